"""API token writes: create (the key is returned once) and revoke, each audited in its transaction."""
from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken
from audit.chain import audit

KEY_PREFIX = "bal_"
PREFIX_LENGTH = 12  # "bal_" + 8 characters: enough to tell tokens apart in lists and audit entries


def hash_key(key: str) -> str:
    """SHA-256 hex of a token key (what is stored and looked up). Keys are 256 random bits,
    so a fast hash is enough: there is nothing to brute-force as with a password."""
    return hashlib.sha256(key.encode()).hexdigest()


def token_create(*, user: Any, name: str = "", by: str = "system", actor_type: str = "system") -> tuple[ApiToken, str]:
    """Create an API token for ``user`` (audited as ``by``/``actor_type``).

    Returns ``(token, key)``; ``key`` (``bal_`` + 43 url-safe characters) is not stored
    and cannot be shown again.
    """
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(user=user, name=name, prefix=key[:PREFIX_LENGTH], key_hash=hash_key(key), created_by_name=by)
        audit(by, "token.create", token, actor_type=actor_type, user=user.get_username(), name=name, prefix=token.prefix)
    return token, key


def token_revoke(*, token: ApiToken, by: str = "system", actor_type: str = "system") -> bool:
    """Revoke ``token`` (audited). Returns False if it was already revoked (nothing written)."""
    now = timezone.now()
    with transaction.atomic():
        # Compare-and-set: two revocations record one revocation.
        won = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now, revoked_by_name=by)
        if won:
            audit(by, "token.revoke", token, actor_type=actor_type, user=token.user.get_username(), prefix=token.prefix)
    token.refresh_from_db()
    return bool(won)
