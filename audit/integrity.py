"""The audit log's integrity primitives, shared by its writer (audit.chain) and its retention checks (audit.checkpoints): the HMAC key, canonical content, and the record of a defect found."""
from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.utils import timezone

#: The ``prev_hash`` of a chain's first entry.
GENESIS = "0" * 64


def audit_key() -> bytes:
    """The HMAC key of every hash of the log: derived from ``settings.BALLAST_AUDIT_KEY``
    if set, else ``SECRET_KEY`` (read on each call: a changed setting takes effect)."""
    return _derived(str(getattr(settings, "BALLAST_AUDIT_KEY", None) or settings.SECRET_KEY))


@lru_cache(maxsize=8)
def _derived(secret: str) -> bytes:
    # Cached: verifying or cutting a chain hashes thousands of entries in a row.
    return hashlib.sha256(b"ballast-audit:" + secret.encode()).digest()


def timestamp(value: datetime) -> str:
    """``value`` as the fixed UTC text that is hashed (a naive value is read as UTC)."""
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def canonical(data: Any) -> str:
    """The canonical JSON text of ``data`` (sorted keys, no spaces, ASCII; other values as ``str``)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def keyed_hash(content: list[Any]) -> str:
    """HMAC-SHA256 (hex, :func:`audit_key`) of ``content``'s canonical text."""
    return hmac.new(audit_key(), canonical(content).encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class AuditProblem:
    """One defect found by audit.chain.audit_verify: the chain, the entry (if any) and what is wrong."""

    scope: str
    entry_id: int | None
    seq: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.scope} seq {self.seq} (entry {self.entry_id})" if self.entry_id else self.scope
        return f"{where}: {self.message}"
