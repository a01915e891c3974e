"""Admin for API tokens: create (the key is shown once), list, revoke (audited); never edit or delete."""
from __future__ import annotations

from typing import Any

from django.contrib import admin, messages

from accounts.models import ApiToken
from accounts.tokens import token_create, token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Add form asks for user and name; the service makes the key and audits the creation."""

    list_display = ("prefix", "user", "name", "created_at", "created_by_name", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__username")
    actions = ["revoke_selected"]
    autocomplete_fields = ()

    def get_fields(self, request: Any, obj: ApiToken | None = None) -> list[str]:  # type: ignore[override]  # a list of names is a valid field list; the stubs' list of field groups is invariant
        if obj is None:
            return ["user", "name"]
        return ["prefix", "user", "name", "created_at", "created_by_name", "last_used_at", "revoked_at", "revoked_by_name"]

    def get_readonly_fields(self, request: Any, obj: ApiToken | None = None) -> list[str]:
        return [] if obj is None else self.get_fields(request, obj)

    def has_delete_permission(self, request: Any, obj: ApiToken | None = None) -> bool:
        return False  # revoke instead: the row stays for the audit trail

    def save_model(self, request: Any, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return
        token, key = token_create(user=obj.user, name=obj.name, by=request.user.get_username(), actor_type="user")
        obj.pk = token.pk
        for name in ("prefix", "key_hash", "created_at", "created_by_name"):
            setattr(obj, name, getattr(token, name))
        obj._state.adding = False
        messages.warning(request, f"API token for {obj.user}: {key}  (copy it now: it is not stored and will not be shown again)")

    @admin.action(description="Revoke selected tokens")
    def revoke_selected(self, request: Any, queryset: Any) -> None:
        revoked = sum(token_revoke(token=t, by=request.user.get_username(), actor_type="user") for t in queryset.select_related("user"))
        messages.success(request, f"Revoked {revoked} token(s).")
