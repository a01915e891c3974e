"""Django app config for triggers: registers the trigger publish checks with the builder and schedules as a due source of the engine."""
from django.apps import AppConfig


class TriggersConfig(AppConfig):
    name = "triggers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at module level: the models (imported by triggers.checks)
        # are not ready when Django imports the app config. The builder and the engine
        # ask no app above them, so triggers registers into their registries
        # (builder.publish_checks, runs.engine.sources through runs.engine.api).
        from builder import publish_checks
        from triggers import checks, schedules

        publish_checks.register(checks.webhook_publish_warnings)
        publish_checks.register(checks.schedule_publish_warnings)
        schedules.register_with_engine()
