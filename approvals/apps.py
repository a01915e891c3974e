"""Django app config for approvals: connects the run-finished receiver."""
from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals import services  # noqa: F401  (connects signal receivers)
