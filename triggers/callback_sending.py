"""Sending completion callbacks' deliveries: a due source of the engine (registered from triggers.apps), signed as Standard Webhooks do, retried with backoff.

A delivery (triggers.models.CallbackDelivery) is due when ``next_due_at`` (database
clock) has passed. No scanner exists: the claim by due time on any worker sends the
earliest due one before it picks a step (:func:`delivery_send_next`), and the recovery
pass rings a doorbell when one falls due (runs.engine.sources).

One attempt:

1. claims the row in one short transaction: locks it (``SELECT ... FOR UPDATE SKIP
   LOCKED`` on PostgreSQL; SQLite: IMMEDIATE transactions, one writer), re-reads it as
   due, counts the attempt and moves ``next_due_at`` a lease ahead
   (BALLAST_CALLBACK_LEASE_SECONDS, longer than the send's timeout) with ``leased_by``
   set to a token of this claim. Once that commits no other worker sends it; a worker
   that dies mid-send leaves it due again after the lease.
2. sends it outside any transaction, through the outbound guard (runs.tools.outbound:
   non-public addresses refused unless BALLAST_OUTBOUND_ALLOW names them, the vetted
   address pinned, no redirects followed), with the headers ``webhook-id`` (the row's
   ``message_id``: the same on every attempt, so a receiver deduplicates),
   ``webhook-timestamp`` (this attempt's, Unix seconds) and ``webhook-signature``
   (``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``, the ``standardwebhooks`` package).
3. settles it (a compare-and-set on the claim's token): a 2xx answer is ``delivered``; a
   refusal of the outbound guard is ``failed`` at once (the same address is refused until
   an operator changes the allow-list); anything else is due again after
   BALLAST_CALLBACK_BACKOFF_SECONDS * 2^(attempts-1) (capped at an hour), or ``failed``
   after BALLAST_CALLBACK_MAX_ATTEMPTS attempts, with the last error kept for the
   operator, who may redeliver it (triggers.callback_services.delivery_redeliver).

Ballast never sends one event twice by its own doing: a second send happens only when
the worker of the first died (or lost its lease) before it could record the answer, and
it carries the same ``webhook-id`` and body.

Worker processes load this module, so it imports nothing of the web stack.
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.conf import settings
from django.db import connection, transaction
from standardwebhooks import Webhook

from runs.engine import api as engine
from runs.providers.credentials import cipher
from runs.tools import outbound
from triggers.models import CallbackDelivery, CompletionCallback, DeliveryStatus

log = logging.getLogger("ballast.callbacks")

MAX_BACKOFF_SECONDS = 3600.0
# How much of a receiver's answer is kept as the last error (characters).
ERROR_BODY_CHARS = 300


def timeout_seconds() -> float:
    """Seconds one send may take per network phase (BALLAST_CALLBACK_TIMEOUT_SECONDS)."""
    return float(getattr(settings, "BALLAST_CALLBACK_TIMEOUT_SECONDS", 10.0))


def lease_seconds() -> float:
    """How long a claimed delivery is held (BALLAST_CALLBACK_LEASE_SECONDS); at least the timeout plus a margin."""
    return max(float(getattr(settings, "BALLAST_CALLBACK_LEASE_SECONDS", 60.0)), timeout_seconds() * 2 + 1)


def max_attempts() -> int:
    """Attempts before a delivery is undeliverable (BALLAST_CALLBACK_MAX_ATTEMPTS)."""
    return max(1, int(getattr(settings, "BALLAST_CALLBACK_MAX_ATTEMPTS", 8)))


def backoff(attempts: int) -> timedelta:
    """The wait after the ``attempts``-th failed attempt: BALLAST_CALLBACK_BACKOFF_SECONDS * 2^(attempts-1), at most an hour."""
    base = float(getattr(settings, "BALLAST_CALLBACK_BACKOFF_SECONDS", 5.0))
    return timedelta(seconds=min(MAX_BACKOFF_SECONDS, base * 2 ** max(0, attempts - 1)))


# Secrets and signatures -----------------------------------------------------------------


def secret_encrypt(callback_id: int, secret: str) -> str:
    """``secret`` (``whsec_...``) encrypted for callback ``callback_id`` (bound to it: a copied ciphertext does not decrypt as another's)."""
    plain = json.dumps({"callback": callback_id, "secret": secret}, separators=(",", ":"))
    return cipher().encrypt(plain.encode()).decode("ascii")


def secret_decrypt(callback: CompletionCallback) -> str:
    """The callback's signing secret. Raises cryptography's InvalidToken (the keys changed) or ValueError."""
    plain = json.loads(cipher().decrypt(callback.secret_encrypted.encode("ascii")))
    if plain.get("callback") != callback.pk:
        raise ValueError(f"the secret of callback {callback.pk} belongs to another callback")
    return str(plain["secret"])


def body_bytes(payload: Any) -> bytes:
    """The body of a delivery: the same bytes on every attempt (compact JSON, keys sorted)."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def signed_headers(secret: str, message_id: str, at: datetime, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers for ``body`` sent at ``at`` (aware): ``webhook-id``,
    ``webhook-timestamp`` (Unix seconds) and ``webhook-signature`` (``v1,<base64>``)."""
    stamp = int(at.timestamp())
    signature = Webhook(secret).sign(message_id, datetime.fromtimestamp(stamp, at.tzinfo), body.decode())
    return {"webhook-id": message_id, "webhook-timestamp": str(stamp), "webhook-signature": signature}


# The due source ---------------------------------------------------------------------------


def earliest_due(now: datetime) -> datetime | None:
    """The due source's ``earliest_due``: the earliest pending delivery's due time at
    ``now``, or None. One read of the ``callback_delivery_due`` index."""
    due = CallbackDelivery.objects.filter(status=DeliveryStatus.PENDING, next_due_at__lte=now).order_by("next_due_at", "id")
    return due.values_list("next_due_at", flat=True).first()


@dataclass(frozen=True)
class Claimed:
    delivery_id: int
    token: str
    attempt: int


def _claim(now: datetime, worker: str) -> Claimed | None:
    """Step 1 (module docstring): the delivery this worker now holds, or None."""
    with transaction.atomic():
        rows = CallbackDelivery.objects.filter(status=DeliveryStatus.PENDING, next_due_at__lte=now).order_by("next_due_at", "id")
        if connection.features.has_select_for_update_skip_locked:
            rows = rows.select_for_update(skip_locked=True)
        row = rows.values("pk", "attempts").first()
        if row is None:
            return None
        token = f"{worker}#{uuid.uuid4().hex[:12]}"
        attempt = row["attempts"] + 1
        CallbackDelivery.objects.filter(pk=row["pk"]).update(
            attempts=attempt, leased_by=token, last_attempt_at=now, next_due_at=now + timedelta(seconds=lease_seconds())
        )
    return Claimed(row["pk"], token, attempt)


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    status_code: int | None = None
    error: str = ""
    final: bool = False  # no retry (the outbound guard refused the address)


def _send(delivery: CallbackDelivery, now: datetime) -> Outcome:
    """Step 2: one POST of ``delivery`` (outside any transaction)."""
    callback = delivery.callback
    if not callback.enabled:
        return Outcome(False, error="the callback is disabled", final=True)
    try:
        secret = secret_decrypt(callback)
    except Exception:
        return Outcome(False, error="the callback's secret cannot be read with the configured BALLAST_CREDENTIALS_KEY keys; rotate it", final=True)
    body = body_bytes(delivery.payload)
    headers = {"content-type": "application/json", "user-agent": "Ballast-Callbacks/1", **signed_headers(secret, delivery.message_id, now, body)}
    timeout = timeout_seconds()
    try:
        with outbound.outbound_client(timeout=timeout) as client:
            request = client.build_request("POST", callback.url, content=body, headers=headers)
            with outbound.open_response(client, request, follow_redirects=False) as response:
                text, _ = outbound.read_body(response, keep_bytes=ERROR_BODY_CHARS, deadline=time.monotonic() + timeout)
                code = response.status_code
    except outbound.OutboundRefused as exc:
        return Outcome(False, error=str(exc), final=True)
    except (httpx.HTTPError, outbound.ResponseTooLarge, OSError, ValueError) as exc:
        return Outcome(False, error=f"{type(exc).__name__}: {exc}"[:1000])
    if 200 <= code < 300:
        return Outcome(True, status_code=code)
    answer = text.decode("utf-8", "replace")[:ERROR_BODY_CHARS]
    return Outcome(False, status_code=code, error=f"HTTP {code}" + (f": {answer}" if answer else ""))


def _settle(claimed: Claimed, outcome: Outcome, ended: datetime) -> bool:
    """Step 3: record the attempt, unless another claim took the row over; True when recorded."""
    fenced = CallbackDelivery.objects.filter(pk=claimed.delivery_id, leased_by=claimed.token, status=DeliveryStatus.PENDING)
    common: dict[str, Any] = {"leased_by": "", "last_status_code": outcome.status_code}
    if outcome.delivered:
        return bool(fenced.update(status=DeliveryStatus.DELIVERED, next_due_at=None, delivered_at=ended, last_error="", **common))
    if outcome.final or claimed.attempt >= max_attempts():
        return bool(fenced.update(status=DeliveryStatus.FAILED, next_due_at=None, last_error=outcome.error, **common))
    return bool(fenced.update(next_due_at=ended + backoff(claimed.attempt), last_error=outcome.error, **common))


def delivery_send_next(now: datetime, worker: str) -> int | None:
    """Send the earliest delivery due at ``now`` (database clock) that no other worker
    holds, once (module docstring). Returns its id, or None when none was due."""
    claimed = _claim(now, worker)
    if claimed is None:
        return None
    delivery = CallbackDelivery.objects.select_related("callback").get(pk=claimed.delivery_id)
    started = time.monotonic()
    outcome = _send(delivery, now)
    ended = now + timedelta(seconds=time.monotonic() - started)
    if not _settle(claimed, outcome, ended):
        log.warning("callback delivery %s: attempt %d outlived its lease; another attempt holds it", delivery.pk, claimed.attempt)
    elif not outcome.delivered:
        log.info("callback delivery %s to %s: attempt %d failed: %s", delivery.pk, delivery.callback.url, claimed.attempt, outcome.error)
    return claimed.delivery_id


def fire_next_for_engine(now: datetime, worker: str) -> bool:
    """The due source's ``fire_next`` (runs.engine.sources.DueSource): True when one was sent."""
    return delivery_send_next(now, worker) is not None


def register_with_engine() -> None:
    """Register callback deliveries as a due source of the engine (triggers.apps, once per process)."""
    engine.register_due_source(engine.DueSource(name="callbacks", earliest_due=earliest_due, fire_next=fire_next_for_engine))
