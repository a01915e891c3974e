"""A worker process imports its node kinds and tool modules as it starts, so its first step (often a takeover) does not pay for them."""
from __future__ import annotations

import sys

from runs.engine import cluster
from runs.tools import _loaded_modules


def test_warm_up_imports_every_tool_module(settings):
    settings.BALLAST_TOOL_MODULES = [*settings.BALLAST_TOOL_MODULES, "tests.support.chaos_tools"]
    _loaded_modules.discard("tests.support.chaos_tools")
    cluster._warm_up()
    assert "tests.support.chaos_tools" in sys.modules
    assert "tests.support.chaos_tools" in _loaded_modules


def test_a_module_that_fails_to_import_does_not_stop_the_worker(settings, caplog):
    settings.BALLAST_TOOL_MODULES = [*settings.BALLAST_TOOL_MODULES, "tests.support.no_such_tool_module"]
    cluster._warm_up()  # does not raise: the step that needs it fails later, as before
    assert "failed to import" in caplog.text
