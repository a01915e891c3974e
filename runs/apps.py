"""Django app config for runs: registers the run row as the lock of a run's audit chain,
connects the run alerts, registers the tool modules' system check, sets up traces when
the OTEL_* variables ask (core.tracing), and starts the recovery supervisor inside
``manage.py qcluster``."""
import sys

from django.apps import AppConfig
from django.core import checks

from core import tracing


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Not at import: Django imports an app's config before any app's models are ready.
        from audit.chain import register_scope_lock
        from runs.engine.api import is_cluster_main_process, run_lock_for_audit, start_supervisor

        # Appends to a run's chain (run:<id>) lock the run row before the chain's head: the
        # order every engine commit of the run takes its locks in (no deadlock between them).
        register_scope_lock("run", run_lock_for_audit)
        # Connects the run alert receivers (runs fail and park in workers too).
        from runs.reports import alerts  # noqa: F401

        # Not at import (it imports the tool registry); ready() is where checks register.
        from runs.tools.checks import TOOL_MODULES_TAG, tool_modules_importable

        # A tool module that fails to import stops manage.py commands at start, naming it.
        checks.register(tool_modules_importable, TOOL_MODULES_TAG)

        # Traces, when the OTEL_* variables name an exporter (off otherwise): before a
        # qcluster forks its workers, which inherit the provider.
        tracing.configure()

        if is_cluster_main_process(sys.argv):
            start_supervisor()
