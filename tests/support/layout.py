"""The structure map's counts: function-level imports of project modules in product code."""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The project's top packages (the apps and the ground module).
PROJECT = ("ballast", "core", "graphs", "audit", "accounts", "runs", "builder", "approvals")
# The engine is owned by its own issue; migrations are frozen history.
SKIP_PARTS = ("migrations",)


@dataclass(frozen=True)
class LocalImport:
    """One import of a project module inside a function body."""

    path: str
    line: int
    module: str
    commented: bool


def _module_of(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] if node.level == 0 else []
    return [alias.name for alias in node.names]


def _commented(lines: list[str], lineno: int) -> bool:
    """Whether the import on ``lineno`` (1-based) carries a comment on its line, or on the
    line above its block of imports (one comment may say why for the block)."""
    if "#" in lines[lineno - 1]:
        return True
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith(("from ", "import ")):
        i -= 1
    return i >= 0 and lines[i].strip().startswith("#")


def local_imports(*, skip_engine: bool = True) -> list[LocalImport]:
    """Every import of a project module inside a function body of the product tree
    (outside ``runs/engine/`` when ``skip_engine``), with whether a comment on its line or
    the line above says why (``TYPE_CHECKING`` blocks are module level, so not counted)."""
    return [i for i in _all_local_imports() if not (skip_engine and i.path.startswith("runs/engine/"))]


@functools.lru_cache(maxsize=1)
def _all_local_imports() -> tuple[LocalImport, ...]:
    """:func:`local_imports` of the whole product tree, the engine included: parsed once
    per process (each parse is one more chance for CPython 3.11.7's AST recursion-depth
    bug, ``SystemError: AST constructor recursion depth mismatch``, to strike when another
    thread compiles at the same moment, as an abandoned expression thread may)."""
    found: list[LocalImport] = []
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if any(part in SKIP_PARTS for part in path.parts):
                continue
            source = path.read_text()
            lines = source.splitlines()
            tree = _parse(source)
            for func in ast.walk(tree):
                if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(func):
                    if not isinstance(node, (ast.Import, ast.ImportFrom)):
                        continue
                    for module in _module_of(node):
                        if module.split(".")[0] in PROJECT:
                            found.append(LocalImport(rel, node.lineno, module, _commented(lines, node.lineno)))
    # A nested function inside a function is walked twice: keep each import once.
    return tuple(sorted(set(found), key=lambda i: (i.path, i.line)))


def _parse(source: str) -> ast.Module:
    """``ast.parse(source)``, tried once more on CPython 3.11.7's spurious ``SystemError``
    (gh-106905: the AST recursion depth is shared between threads; a parse racing another
    thread's compile fails though the source is fine)."""
    try:
        return ast.parse(source)
    except SystemError:
        return ast.parse(source)


def engine_local_imports() -> list[LocalImport]:
    """The function-level imports of project modules inside ``runs/engine/``."""
    return [i for i in local_imports(skip_engine=False) if i.path.startswith("runs/engine/")]


def engine_files_over(lines: int) -> dict[str, int]:
    """The engine's modules longer than ``lines`` lines: {path: line count}."""
    found = {}
    for path in sorted((ROOT / "runs" / "engine").rglob("*.py")):
        count = len(path.read_text().splitlines())
        if count > lines:
            found[path.relative_to(ROOT).as_posix()] = count
    return found


def engine_circles() -> set[tuple[str, str]]:
    """Pairs of engine modules each of which reaches the other through imports (a circle,
    however long), each as a sorted tuple; function-level imports count too."""
    import grimp  # import-linter's graph builder; only this check needs it

    graph = grimp.build_graph("runs")
    modules = [m for m in graph.modules if m.startswith("runs.engine.")]
    return {
        tuple(sorted((m, d)))  # type: ignore[misc]
        for m in modules
        for d in graph.find_modules_directly_imported_by(m)
        if d.startswith("runs.engine.") and graph.chain_exists(importer=d, imported=m)
    }


def mutual_pairs() -> set[tuple[str, str]]:
    """Pairs of project packages that import each other (a module of either imports a
    module of the other), each as a sorted tuple."""
    import grimp  # import-linter's graph builder; only this check needs it

    graph = grimp.build_graph(*PROJECT)
    edges = {
        (a, b)
        for a in PROJECT
        for b in PROJECT
        if a != b and graph.direct_import_exists(importer=a, imported=b, as_packages=True)
    }
    return {(a, b) for a, b in edges if (b, a) in edges and a < b}


if __name__ == "__main__":
    imports = local_imports()
    for item in imports:
        print(f"{item.path}:{item.line}: {item.module}{'' if item.commented else '  (no comment)'}")
    print("package pairs importing each other:", sorted(mutual_pairs()))
    print(len(imports), "function-level imports of project modules outside runs/engine/,", sum(not i.commented for i in imports), "without a comment")
