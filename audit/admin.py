"""Admin of the audit log: entries can be listed and viewed, never added, changed or deleted
(entries are appended by audit.chain only, in the transaction of the change they record)."""
from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "actor_type", "actor", "action", "object_type", "object_id")
    list_filter = ("action", "actor_type", "object_type")
    search_fields = ("actor", "action", "object_id")
    readonly_fields = [f.name for f in AuditEntry._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
