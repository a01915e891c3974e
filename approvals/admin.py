"""Admin for approval requests (decisions go through approvals.services, not the form)."""
from django.contrib import admin

from approvals.models import ApprovalRequest
from runs.admin import ReadOnlyAdminMixin


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "run", "node_id", "purpose", "status", "decision", "decided_by_name", "created_at", "decided_at")
    list_filter = ("status", "purpose", "created_at")
    search_fields = ("run__id", "node_id", "prompt", "decided_by_name")
    readonly_fields = [f.name for f in ApprovalRequest._meta.fields]
