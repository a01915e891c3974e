"""Tampering with the audit log behind the app's back, for tests of its verification."""
from __future__ import annotations

from typing import Any

from django.db import connection

from audit.models import AuditEntry


def tamper(entry_id: int, **fields: Any) -> None:
    """Edit an audit entry with a plain UPDATE (on PostgreSQL past the trigger that refuses
    it: a superuser with this session's triggers off, as an attacker with the database's
    password could)."""
    if connection.vendor != "postgresql":
        AuditEntry.objects.filter(pk=entry_id).update(**fields)
        return
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
    try:
        AuditEntry.objects.filter(pk=entry_id).update(**fields)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = DEFAULT")
