"""The audit log's writer: append an entry in the caller's transaction."""
from __future__ import annotations

from typing import Any

from runs.models import AuditEntry


def audit(actor: str, action: str, obj: Any, *, actor_type: str = "user", **data: Any) -> AuditEntry:
    """Append an audit entry in the caller's transaction (who did what to which object)."""
    return AuditEntry.objects.create(
        actor_type=actor_type,
        actor=actor,
        action=action,
        object_type=obj._meta.model_name,
        object_id=str(obj.pk),
        data=data,
    )
