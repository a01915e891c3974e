"""The system check that imports every tool module at start, so a broken one stops web and workers with its name."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from runs.tools import ToolModuleError, import_tool_module

# The tag of this check alone: ``manage.py qcluster`` runs only the checks with this tag
# (all of them import the URLconf, seconds of a worker's start for nothing it runs).
TOOL_MODULES_TAG = "ballast_tool_modules"
CHECK_ID = "runs.E001"


def tool_modules_importable(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Import every module of ``settings.BALLAST_TOOL_MODULES`` (the built-ins and
    ``BALLAST_EXTRA_TOOL_MODULES``) and return one Error (id ``runs.E001``) per module that
    fails: it does not exist, raises while importing, or a ``@tool`` in it is refused. The
    message names the module and the exception; the modules that import stay registered,
    so the process's first step does not pay for them. Registered by RunsConfig.ready()
    for every ``manage.py`` command that runs system checks (serve, runserver, migrate,
    check) and, by its tag, for ``qcluster``."""
    errors: list[checks.CheckMessage] = []
    for module in settings.BALLAST_TOOL_MODULES:
        try:
            import_tool_module(module)
        except ToolModuleError as exc:
            errors.append(
                checks.Error(
                    str(exc),
                    hint=(
                        "Fix the module, put its package on the Python path of every web and worker process, "
                        "or remove it from BALLAST_EXTRA_TOOL_MODULES."
                    ),
                    obj=module,
                    id=CHECK_ID,
                )
            )
    return errors
