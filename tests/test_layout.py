"""The code's structure as the issue that shaped it fixed it (issue 22): few function-level
imports of project modules, each saying why."""
from __future__ import annotations

from tests.support.layout import engine_circles, engine_files_over, engine_local_imports, local_imports, mutual_pairs

# Outside runs/engine/ (its own issue's): app configs' ready(), modules DRF's settings
# import before the app registry is ready, and imports kept out of a worker's start.
MAX_LOCAL_IMPORTS = 15


def test_function_level_imports_of_project_modules_are_few_and_say_why() -> None:
    imports = local_imports()
    assert len(imports) <= MAX_LOCAL_IMPORTS, [f"{i.path}:{i.line}" for i in imports]
    assert [f"{i.path}:{i.line} {i.module}" for i in imports if not i.commented] == []


def test_the_apps_import_each_other_in_one_direction_only() -> None:
    # The API base every app's views build on is core.api (ground floor), so no package
    # pair imports each other (issue 22).
    assert mutual_pairs() == set()


def test_the_engine_imports_its_own_modules_lazily_only_for_the_driver() -> None:
    # Issue 23: no import circle hides behind a function-level import inside the engine;
    # the one left is fastpath_postgresql, imported with psycopg on first use
    # (runs.engine.store.paths.postgresql). django_q and channels are not project modules.
    assert [(i.path, i.module, i.commented) for i in engine_local_imports()] == [
        ("runs/engine/store/paths.py", "runs.engine.store", True)
    ]


def test_the_engine_has_no_import_circle() -> None:
    assert engine_circles() == set()


def test_no_engine_module_is_over_600_lines() -> None:
    assert engine_files_over(600) == {}
