"""Django app config for runs: starts the recovery supervisor inside ``manage.py qcluster``."""
import sys

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs.engine.api import is_cluster_main_process, start_supervisor

        if is_cluster_main_process(sys.argv):
            start_supervisor()
