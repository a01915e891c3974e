"""Roles as Django groups (builders, operators, approvers) and the checks on a user, without the web stack.

Kept apart from accounts.authentication (DRF, Channels, axes) so the policy module, and
the approvals receivers a worker runs, import no web code (a worker's start time).
"""
from __future__ import annotations

from typing import Any

BUILDERS = "builders"
OPERATORS = "operators"
APPROVERS = "approvers"
ROLES = (BUILDERS, OPERATORS, APPROVERS)


def has_role(user: Any, role: str) -> bool:
    """Whether an authenticated, active ``user`` is a superuser or in the group ``role``.
    The user's group names are read once per user object (one query per request)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    names = getattr(user, "_ballast_groups", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._ballast_groups = names
    return role in names


def is_admin(user: Any) -> bool:
    """Staff or superuser: sees every pending approval and the audit log."""
    return bool(user is not None and user.is_authenticated and user.is_active and (user.is_staff or user.is_superuser))
