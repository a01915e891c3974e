"""Django app config for builder."""
from django.apps import AppConfig


class BuilderConfig(AppConfig):
    name = "builder"
    default_auto_field = "django.db.models.BigAutoField"
