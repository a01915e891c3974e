"""Django app config for triggers: registers the webhook publish check with the builder."""
from django.apps import AppConfig


class TriggersConfig(AppConfig):
    name = "triggers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at module level: the models (imported by triggers.checks)
        # are not ready when Django imports the app config. The builder asks no app above
        # it, so the check is registered into its registry (builder.publish_checks).
        from builder import publish_checks
        from triggers import checks

        publish_checks.register(checks.webhook_publish_warnings)
