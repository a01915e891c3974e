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
        from django.conf import settings

        from triggers import firing

        # Every process that claims steps fires due schedules (the engine's due source).
        firing.register_with_engine()
        # Publishing happens in web processes and commands, never in a worker, whose start
        # must not load the builder's validation (Jinja2, jsonschema): settings.py.
        if not getattr(settings, "BALLAST_WORKER_PROCESS", False):
            from builder import publish_checks
            from triggers import checks

            publish_checks.register(checks.webhook_publish_warnings)
            publish_checks.register(checks.schedule_publish_warnings)
