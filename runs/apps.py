"""Django app config for runs: its ready() connects what runs.wiring lists (the audit chain's run lock, run alerts, the tool modules' check, traces, the retention job, the recovery supervisor inside ``manage.py qcluster``)."""
from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Not at import: Django imports an app's config before any app's models are ready.
        from runs import wiring

        wiring.connect()
