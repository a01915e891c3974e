"""Django app config for accounts: the login-failure audit receivers, and the shared cache's table after every migrate."""
from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def create_cache_table(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """post_migrate: ``createcachetable`` on the migrated database, so the database cache
    that holds the throttle counters (settings ``CACHES``) exists after ``migrate`` and
    ``make up`` as in the test databases. Idempotent (an existing table is left alone).
    With Redis as the cache the table is still made: the counters fall back to it while
    Redis is down (CACHES alias ``database``, accounts.throttling)."""
    from django.core.management import call_command

    call_command("createcachetable", database=using, verbosity=0)


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        if not getattr(settings, "BALLAST_WORKER_PROCESS", False):
            # Sign-ins happen only in the web process; a worker keeps DRF out of its imports.
            from accounts import authentication  # noqa: F401  (connects the login-failure audit receivers)

        post_migrate.connect(create_cache_table, sender=self, dispatch_uid="ballast_create_cache_table")
