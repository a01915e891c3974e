"""Completion callbacks: create, change, rotate and delete them (builders), a run's own callback at start, and redelivering a delivery (operators); all audited."""
from __future__ import annotations

import base64
import secrets
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Now

from accounts import policy
from accounts.roles import BUILDERS
from audit.chain import audit
from core.errors import ConflictError, ForbiddenError, NotFoundError
from graphs.models import Graph
from runs.models import Run
from runs.tools import outbound
from triggers.callback_sending import secret_encrypt
from triggers.models import CallbackDelivery, CallbackEvent, CompletionCallback, DeliveryStatus
from triggers.services import TriggerInvalid, require_builder

SECRET_BYTES = 32
_URL = URLValidator(schemes=["http", "https"])


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def url_problems(url: Any) -> list[str]:
    """Why ``url`` cannot be a callback's ([] when it can): not an http(s) URL, a host
    that does not resolve, or an address the outbound guard refuses (runs.tools.outbound,
    BALLAST_OUTBOUND_ALLOW). The guard checks again at each send (DNS may change)."""
    if not isinstance(url, str) or len(url) > 2000:
        return ["A URL of at most 2000 characters."]
    try:
        _URL(url)
    except ValidationError:
        return ["Not a valid http or https URL."]
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        allowed = outbound.allow_list()
    except ValueError as exc:
        return [str(exc)]
    if allowed.allows_host(host):
        return []
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return [f"The host {host} does not resolve."]
    try:
        outbound.vet_addresses(host, [str(info[4][0]) for info in infos], allowed)
    except outbound.OutboundRefused as exc:
        return [f"Refused by the outbound guard: {exc}."]
    return []


def _events_checked(events: Any) -> list[str]:
    if not isinstance(events, list) or not events or any(e not in CallbackEvent.values for e in events):
        raise TriggerInvalid("events", fields={"events": [f"A non-empty list of: {', '.join(CallbackEvent.values)}."]})
    return [e for e in CallbackEvent.values if e in events]  # each once, in a fixed order


def _url_checked(url: Any, field: str = "url") -> str:
    problems = url_problems(url)
    if problems:
        raise TriggerInvalid(f"{field}: {problems[0]}", message=problems[0], fields={field: problems})
    return str(url)


# Reads ------------------------------------------------------------------------------------


def callback_list(*, graph_id: int) -> QuerySet[CompletionCallback]:
    """The graph's own callbacks (not runs' ones), oldest first."""
    return CompletionCallback.objects.filter(graph_id=graph_id, run__isnull=True).select_related("created_by")


def callback_get(*, graph_id: int, callback_id: int) -> CompletionCallback:
    """The graph-level callback ``callback_id`` of graph ``graph_id``; NotFoundError otherwise."""
    found = callback_list(graph_id=graph_id).filter(pk=callback_id).first()
    if found is None:
        raise NotFoundError(f"callback {callback_id} of graph {graph_id}")
    return found


def delivery_list(*, graph_id: int, callback_id: int | None = None, status: str | None = None) -> QuerySet[CallbackDelivery]:
    """Deliveries of the graph's callbacks and of its runs' own callbacks, newest first,
    optionally of one callback or in one status (``failed``: the undeliverable ones)."""
    rows = CallbackDelivery.objects.filter(callback__graph_id=graph_id).select_related("callback")
    if callback_id is not None:
        rows = rows.filter(callback_id=callback_id)
    if status:
        rows = rows.filter(status=status)
    return rows.order_by("-id")


# Management -------------------------------------------------------------------------------


@dataclass
class Created:
    """A new callback and its signing secret, shown this once."""

    callback: CompletionCallback
    secret: str


def callback_create(*, graph: Graph, user: Any, name: str, url: str, events: list[str], enabled: bool = True) -> Created:
    """Create a callback of ``graph``'s runs with a new secret (audited ``callback.create``).
    Raises TriggerInvalid (``url``, ``events``, ``name``), ForbiddenError."""
    require_builder(user, graph)
    events = _events_checked(events)
    url = _url_checked(url)
    if CompletionCallback.objects.filter(graph=graph, run__isnull=True, name=name).exists():
        raise TriggerInvalid("name taken", fields={"name": ["This graph has a callback of this name."]})
    secret = new_secret()
    with transaction.atomic():
        callback = CompletionCallback.objects.create(graph=graph, name=name, url=url, events=events, enabled=enabled, secret_encrypted="-", created_by=user)
        callback.secret_encrypted = secret_encrypt(callback.pk, secret)
        callback.save(update_fields=["secret_encrypted"])
        audit(user.get_username(), "callback.create", callback, name=name, url=url, events=events, enabled=enabled)
    return Created(callback, secret)


_FIELDS = ("name", "url", "events", "enabled")


def callback_update(*, callback: CompletionCallback, user: Any, **changes: Any) -> CompletionCallback:
    """Change any of ``name``, ``url``, ``events``, ``enabled``, checked as at creation; audited ``callback.update``."""
    require_builder(user, callback.graph)
    unknown = set(changes) - set(_FIELDS)
    if unknown:
        raise TypeError(f"unknown callback fields {sorted(unknown)}")
    if "events" in changes:
        changes["events"] = _events_checked(changes["events"])
    if "url" in changes:
        changes["url"] = _url_checked(changes["url"])
    if "name" in changes and CompletionCallback.objects.filter(graph_id=callback.graph_id, run__isnull=True, name=changes["name"]).exclude(pk=callback.pk).exists():
        raise TriggerInvalid("name taken", fields={"name": ["This graph has a callback of this name."]})
    with transaction.atomic():
        for key, value in changes.items():
            setattr(callback, key, value)
        callback.save()
        audit(user.get_username(), "callback.update", callback, **changes)
    return callback


def callback_rotate_secret(*, callback: CompletionCallback, user: Any) -> str:
    """A new signing secret (shown this once); deliveries sent from now on carry its
    signature, pending retries included. Audited ``callback.rotate_secret``."""
    require_builder(user, callback.graph)
    secret = new_secret()
    with transaction.atomic():
        CompletionCallback.objects.filter(pk=callback.pk).update(secret_encrypted=secret_encrypt(callback.pk, secret), updated_at=Now())
        audit(user.get_username(), "callback.rotate_secret", callback)
    return secret


def callback_delete(*, callback: CompletionCallback, user: Any) -> None:
    """Delete ``callback`` and its deliveries (pending ones are not sent); audited ``callback.delete``."""
    require_builder(user, callback.graph)
    with transaction.atomic():
        audit(user.get_username(), "callback.delete", callback, name=callback.name, url=callback.url)
        callback.delete()


class AlreadyPending(ConflictError):
    code = "already_pending"


def may_operate_callbacks(user: Any, graph: Graph) -> bool:
    """Who reads a graph's delivery log and redelivers: its operators and the builders (who manage its callbacks)."""
    return bool(policy.can_operate_graph(user, graph) or (user.is_active and user.groups.filter(name=BUILDERS).exists()))


def delivery_redeliver(*, delivery: CallbackDelivery, user: Any) -> CallbackDelivery:
    """Send a delivered or undeliverable delivery again, due now with fresh attempts and
    the same ``webhook-id`` and body (an operator's decision, audited ``callback.redeliver``).
    Raises AlreadyPending (409) for one not settled yet, ForbiddenError for a user who may
    not operate the graph (:func:`may_operate_callbacks`)."""
    graph = delivery.callback.graph
    if not may_operate_callbacks(user, graph):
        raise ForbiddenError(f"{user} may not redeliver callbacks of graph {graph.pk}", message="Only operators of this graph and builders may redeliver its callbacks.")
    with transaction.atomic():
        moved = CallbackDelivery.objects.filter(pk=delivery.pk, status__in=(DeliveryStatus.FAILED, DeliveryStatus.DELIVERED)).update(
            status=DeliveryStatus.PENDING, attempts=0, next_due_at=Now(), leased_by="", last_error="", last_status_code=None, delivered_at=None
        )
        if not moved:
            raise AlreadyPending(f"delivery {delivery.pk} is pending", message="This delivery is still being sent or retried.")
        audit(user.get_username(), "callback.redeliver", delivery.callback, delivery=delivery.pk, message_id=delivery.message_id,
              run=delivery.run_id, event=delivery.event, previous_status=delivery.status)
    delivery.refresh_from_db()
    return delivery


def delivery_get(*, graph_id: int, delivery_id: int) -> CallbackDelivery:
    """The delivery ``delivery_id`` of one of graph ``graph_id``'s callbacks; NotFoundError otherwise."""
    found = CallbackDelivery.objects.filter(pk=delivery_id, callback__graph_id=graph_id).select_related("callback__graph").first()
    if found is None:
        raise NotFoundError(f"callback delivery {delivery_id} of graph {graph_id}")
    return found


# A run's own callback (POST /api/v1/runs/ with callback_url) ---------------------------------


def run_callback_attach(*, run: Run, user: Any, url: Any, events: Any = None) -> dict[str, Any]:
    """Give ``run`` its own callback to ``url`` (events default: succeeded and failed), in
    the caller's transaction (the run's start: the run cannot end before it exists).
    Returns the keys added to the start's answer: ``callback`` (id) and ``callback_secret``
    (shown this once). Raises TriggerInvalid (``callback_url``, ``callback_events``)."""
    url = _url_checked(url, "callback_url")
    try:
        chosen = _events_checked([CallbackEvent.SUCCEEDED, CallbackEvent.FAILED] if events is None else events)
    except TriggerInvalid:
        raise TriggerInvalid("callback_events", fields={"callback_events": [f"A non-empty list of: {', '.join(CallbackEvent.values)}."]}) from None
    graph_id = run.graph_version.graph_id
    secret = new_secret()
    callback = CompletionCallback.objects.create(graph_id=graph_id, run=run, name=f"run {run.pk}", url=url, events=chosen, secret_encrypted="-", created_by=user)
    CompletionCallback.objects.filter(pk=callback.pk).update(secret_encrypted=secret_encrypt(callback.pk, secret))
    audit(user.get_username(), "callback.create", callback, run=run.pk, url=url, events=chosen)
    return {"callback": callback.pk, "callback_secret": secret}
