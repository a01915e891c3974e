"""Django app config for runs: starts the recovery supervisor inside ``manage.py qcluster``."""
import sys

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs.engine import recovery

        if recovery.is_cluster_main_process(sys.argv):
            recovery.start_supervisor()
