"""Django app config for audit: the audit log's models, writer, admin and ``verify_audit``."""
from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    default_auto_field = "django.db.models.BigAutoField"
