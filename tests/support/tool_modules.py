"""Tool modules added for one test (BALLAST_TOOL_MODULES extended, the registry restored after), throwaway tool modules on disk, and a run driven on a background thread."""
from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connections

import runs.tools as tools
from graphs.models import GraphVersion
from runs.engine import api as engine
from runs.services import run_start

REPO_ROOT = Path(__file__).resolve().parents[2]
# The example package of README "Your own tools": importable once this is on sys.path.
EXAMPLES = REPO_ROOT / "examples"
EXAMPLE_PACKAGE = "ballast_tools_example"
EXAMPLE_TOOLS = "ballast_tools_example.tools"
EXAMPLE_GRAPH = EXAMPLES / EXAMPLE_PACKAGE / "graph.json"


@contextmanager
def extra_tool_modules(settings: Any, *modules: str, path: Path | None = None) -> Iterator[None]:
    """Within the block, ``modules`` follow the built-ins in ``settings.BALLAST_TOOL_MODULES``
    (as BALLAST_EXTRA_TOOL_MODULES puts them there) and ``path``, if given, leads sys.path.
    After it: the tools of those modules' packages gone from the registry and their modules
    from its set of loaded modules and from sys.modules (so a later block imports them, and
    registers their tools, afresh), and sys.path restored. What else the block loaded (the
    built-ins, on a process's first lookup) stays: Python would not import it again.
    ``settings`` is pytest-django's fixture, which restores the setting itself."""
    path_before = list(sys.path)
    packages = {m.split(".")[0] for m in modules}

    def ours(module: str) -> bool:
        return module.split(".")[0] in packages

    if path is not None:
        sys.path.insert(0, str(path))
        importlib.invalidate_caches()  # a directory's listing may be cached from before its files were written
    settings.BALLAST_TOOL_MODULES = [*settings.BALLAST_TOOL_MODULES, *modules]
    try:
        yield
    finally:
        for name in [n for n, t in tools._REGISTRY.items() if ours(t.fn.__module__)]:
            del tools._REGISTRY[name]
        tools._loaded_modules.difference_update([m for m in tools._loaded_modules if ours(m)])
        for name in [n for n in sys.modules if ours(n)]:
            del sys.modules[name]
        sys.path[:] = path_before


def write_module(directory: Path, name: str, source: str) -> str:
    """Write ``source`` as the module ``name`` (``pkg.mod`` makes the package too) under
    ``directory``; returns ``name``."""
    *package, leaf = name.split(".")
    folder = directory.joinpath(*package)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(len(package)):
        init = directory.joinpath(*package[: i + 1], "__init__.py")
        if not init.exists():
            init.write_text("")
    (folder / f"{leaf}.py").write_text(source)
    return name


class BackgroundRun:
    """A run started and driven in this process on a thread of its own (``engine.local_mode``),
    so the test's thread can act while a step runs (reply, cancel). ``run_id`` is set once
    the run is started; ``status`` when the drive ended; ``error`` holds what the thread raised."""

    def __init__(self, version: GraphVersion, run_input: dict[str, Any], *, timeout: float = 120) -> None:
        self.run_id: int | None = None
        self.status: str | None = None
        self.error: BaseException | None = None
        self.started = threading.Event()
        self._thread = threading.Thread(target=self._drive, args=(version, run_input, timeout), name="background-run", daemon=True)
        self._thread.start()

    def _drive(self, version: GraphVersion, run_input: dict[str, Any], timeout: float) -> None:
        try:
            with engine.local_mode() as queue:
                run = run_start(version=version, run_input=run_input, actor="tester")
                self.run_id = run.pk
                self.started.set()
                self.status = engine.drive_local(run.pk, queue=queue, timeout=timeout)
        except BaseException as exc:  # handed to the test by join()
            self.error = exc
        finally:
            self.started.set()
            connections.close_all()

    def join(self, timeout: float) -> str:
        """Wait at most ``timeout`` seconds for the drive to end; return the run's status.
        Re-raises what the thread raised; fails if it is still running."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the run was still being driven after {timeout} s"
        if self.error is not None:
            raise self.error
        assert self.status is not None
        return self.status
