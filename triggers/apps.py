"""Django app config for triggers: registers the trigger publish checks with the builder, schedules and callback deliveries as due sources of the engine, and the completion callbacks' receivers."""
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

        from triggers import (
            callback_events,  # noqa: F401  (connects its receivers: engine signals fire in web processes too)
            callback_sending,
            firing,
        )

        # Every process that claims steps fires due schedules and sends due callback
        # deliveries (the engine's due sources).
        firing.register_with_engine()
        callback_sending.register_with_engine()
        # Publishing happens in web processes and commands, never in a worker, whose start
        # must not load the builder's validation (Jinja2, jsonschema): settings.py.
        if not getattr(settings, "BALLAST_WORKER_PROCESS", False):
            from builder import publish_checks
            from runs import start_options
            from triggers import callback_services, checks

            # POST /api/v1/runs/ with callback_url: the run's own completion callback.
            start_options.register("callback_url", lambda *, run, user, value, data: callback_services.run_callback_attach(
                run=run, user=user, url=value, events=data.get("callback_events")))

            publish_checks.register(checks.webhook_publish_warnings)
            publish_checks.register(checks.schedule_publish_warnings)
