"""Django app config for accounts: connects the login-failure audit receiver."""
from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts import authentication  # noqa: F401  (connects the login-failure audit receiver)
