"""Webhook triggers: create, change, rotate and delete them, and receive a delivery.

A delivery (:func:`delivery_receive`) is checked in this order, each refusal answered
with its own status and code and nothing started: unknown or disabled token (404, no
detail), the trigger's rate (429 with ``Retry-After``), the signature when the trigger
has a secret (401 ``signature_missing``, ``timestamp_invalid``, ``timestamp_stale``,
``signature_invalid``), the delivery id (400), the body (400 ``body_invalid``: not
JSON, or not an object where it is the input), the mapped input against the version's
input schema (400 ``input_invalid`` with field errors). A delivery id starts at most one
run per trigger: the run's idempotency key is ``webhook:<trigger>:<delivery id>``
(unique in the runs table), so a repeat, even a concurrent one, answers with the first
run. Every delivery to a known trigger is logged (:class:`WebhookDelivery`) and audited
(``webhook.delivery`` in the graph's chain).

Listening for a test event (:func:`trigger_listen`): until ``listening_until`` (database
clock), the first delivery that passes the signature, delivery id and body checks is
captured: its mapped input is kept as the delivery's ``payload`` for the builder to pin
as the draft's test input. An enabled trigger then goes on as always (the URL is the
production URL: a listen window must never swallow a real event); a disabled one, which
answers 404 otherwise, answers ``202 {"run": null, "status": "captured"}`` and starts
nothing, so a webhook can be tried out before it is switched on.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from accounts import policy
from accounts.roles import BUILDERS
from accounts.throttling import rate_counted
from audit.chain import audit
from core.errors import ForbiddenError, NotFoundError, ServiceError
from graphs.models import Graph, GraphVersion
from runs import services as run_services
from runs.models import TERMINAL_RUN_STATUSES, Run
from runs.providers.credentials import cipher
from runs.sandbox import values
from triggers.models import WebhookDelivery, WebhookTrigger

log = logging.getLogger("ballast.triggers")

SIGNATURE_HEADER = "X-Ballast-Signature"
TIMESTAMP_HEADER = "X-Ballast-Timestamp"
DELIVERY_HEADERS = ("X-Ballast-Delivery", "Idempotency-Key")
DELIVERY_ID = re.compile(r"^[\x21-\x7e]{1,128}$")  # printable ASCII, no spaces
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,100}$")
HEADER_PREFIX = "header:"
MAX_WAIT_SECONDS = 30.0
DEFAULT_WINDOW_SECONDS = 300
DEFAULT_LISTEN_SECONDS = 120
MAX_LISTEN_SECONDS = 600


class TriggerInvalid(ServiceError):
    """A trigger's settings are refused at save (400 with the field at fault)."""

    code = "invalid"


class DeliveryRefused(ServiceError):
    """A delivery refused before anything started; ``status_code`` and ``code`` per instance."""

    def __init__(self, status_code: int, code: str, message: str, *, fields: dict[str, list[str]] | None = None, retry_after: int | None = None):
        super().__init__(message, fields=fields)
        self.status_code = status_code  # type: ignore[misc]  # per instance, as the docstring says
        self.code = code
        self.retry_after = retry_after


@dataclass
class Answer:
    """What the delivery endpoint answers: status, JSON body and extra headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


# Tokens and secrets ---------------------------------------------------------------


def token_hash(token: str) -> str:
    """The stored form of a URL token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _encrypt_secret(trigger_key: str, secret: str) -> str:
    plain = json.dumps({"webhook": trigger_key, "secret": secret}, separators=(",", ":"))
    return cipher().encrypt(plain.encode()).decode("ascii")


def _decrypt_secret(trigger: WebhookTrigger) -> str:
    plain = json.loads(cipher().decrypt(trigger.secret_encrypted.encode("ascii")))
    if not isinstance(plain, dict) or plain.get("webhook") != trigger.token_hash:
        raise ValueError(f"the secret of webhook trigger {trigger.pk} belongs to another trigger")
    return str(plain["secret"])


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Ballast-Signature`` value of ``body`` sent at ``timestamp``:
    ``sha256=`` and the hex HMAC-SHA256 of ``"<timestamp>.<body>"`` keyed by ``secret``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


# Versions and mappings ------------------------------------------------------------


def latest_published(graph: Graph | int) -> GraphVersion | None:
    """The graph's newest published version (test snapshots are not versions), or None."""
    graph_id = graph if isinstance(graph, int) else graph.pk
    return GraphVersion.objects.filter(graph_id=graph_id, is_test=False).order_by("-number").first()


def version_of(trigger: WebhookTrigger) -> GraphVersion | None:
    """The version a delivery to ``trigger`` runs now."""
    return trigger.version if trigger.version_id is not None else latest_published(trigger.graph_id)


def mapping_errors(version: GraphVersion, mapping: Any) -> dict[str, list[str]]:
    """Why ``mapping`` cannot feed ``version``'s input ({} when it can): each entry
    ``field -> "/json/pointer"`` or ``field -> "header:Name"``; a non-empty mapping must
    name every required field of the input schema."""
    if not isinstance(mapping, dict):
        return {"input_mapping": ["Must be an object of input field -> JSON pointer or header:Name."]}
    errors: dict[str, list[str]] = {}
    for name, target in mapping.items():
        where = f"input_mapping.{name}"
        if not isinstance(target, str):
            errors[where] = ["Must be a JSON pointer (\"/a/b\", \"\" for the whole body) or \"header:Name\"."]
        elif target.startswith(HEADER_PREFIX):
            if not HEADER_NAME.match(target[len(HEADER_PREFIX):]):
                errors[where] = ["A header name is letters, digits and dashes."]
        elif target and not target.startswith("/"):
            errors[where] = ["A JSON pointer starts with \"/\" (\"\" is the whole body)."]
    if mapping:
        schema = version.spec.get("input_schema") or {}
        required = schema.get("required") if isinstance(schema, dict) else None
        for name in required or []:
            if name not in mapping:
                errors.setdefault(f"input_mapping.{name}", []).append(
                    f"The input schema of version {version.number} requires {name!r}; map it to the body or a header."
                )
    return errors


def _pointer(document: Any, pointer: str) -> tuple[bool, Any]:
    """RFC 6901: (found, value) of ``pointer`` in ``document``."""
    if pointer == "":
        return True, document
    value = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return False, None
    return True, value


def mapped_input(mapping: dict[str, str], body: Any, headers: Any) -> dict[str, Any]:
    """The run input of a delivery: ``body`` itself with no mapping, else each mapped
    field that is present (a missing one is left out, so the schema names it)."""
    if not mapping:
        return body  # the caller checked it is an object
    out: dict[str, Any] = {}
    for name, target in mapping.items():
        if target.startswith(HEADER_PREFIX):
            value = headers.get(target[len(HEADER_PREFIX):])
            if value is not None:
                out[name] = value
        else:
            found, value = _pointer(body, target)
            if found:
                out[name] = value
    return out


# Management -----------------------------------------------------------------------


def require_builder(user: Any, graph: Graph) -> None:
    """Only builders manage a graph's triggers (as only they edit the graph)."""
    if not (user.is_superuser or user.groups.filter(name=BUILDERS).exists()):
        raise ForbiddenError(f"{user} may not manage the webhooks of graph {graph.pk}", message="Only builders may manage a graph's webhooks.")


def _check_run_as(graph: Graph, run_as: Any) -> None:
    if not policy.can_operate_graph(run_as, graph):
        raise TriggerInvalid(f"{run_as} may not start runs of graph {graph.pk}", message="The webhook's runs would act as a user who may not start them.",
                             fields={"run_as": [f"{run_as.get_username()} may not start runs of this graph (not an operator of it)."]})


def _checked(graph: Graph, version: GraphVersion | None, mapping: dict[str, str], window: int) -> None:
    if version is not None and version.graph_id != graph.pk:
        raise TriggerInvalid("version of another graph", fields={"version": ["No such published version of this graph."]})
    target = version or latest_published(graph)
    if target is None:
        raise TriggerInvalid("nothing published", fields={"version": ["The graph has no published version; publish it first."]})
    errors = mapping_errors(target, mapping)
    if errors:
        raise TriggerInvalid("; ".join(f"{k}: {v[0]}" for k, v in errors.items()), message="The input mapping cannot satisfy the input schema.", fields=errors)
    if not 1 <= window <= 86400:
        raise TriggerInvalid("window", fields={"timestamp_window_seconds": ["Between 1 and 86400 seconds."]})


@dataclass
class Created:
    """A new trigger with its URL token and secret, shown this once."""

    trigger: WebhookTrigger
    token: str
    secret: str | None


def trigger_create(
    *, graph: Graph, name: str, user: Any, version: GraphVersion | None = None, input_mapping: dict[str, str] | None = None,
    signed: bool = True, timestamp_window_seconds: int = DEFAULT_WINDOW_SECONDS, run_as: Any = None, enabled: bool = True,
) -> Created:
    """Create a webhook trigger of ``graph`` (audited ``webhook.create``); with ``signed``,
    it gets an HMAC secret. Raises TriggerInvalid (a field named) and ForbiddenError."""
    require_builder(user, graph)
    mapping = input_mapping or {}
    _checked(graph, version, mapping, timestamp_window_seconds)
    _check_run_as(graph, run_as or user)
    if WebhookTrigger.objects.filter(graph=graph, name=name).exists():
        raise TriggerInvalid("name taken", fields={"name": ["This graph has a webhook of this name."]})
    token = secrets.token_urlsafe(32)
    secret = secrets.token_urlsafe(32) if signed else None
    trigger = WebhookTrigger(
        graph=graph, name=name, enabled=enabled, version=version, token_hash=token_hash(token),
        timestamp_window_seconds=timestamp_window_seconds, input_mapping=mapping,
        run_as=run_as or user, created_by=user,
    )
    if secret is not None:
        trigger.secret_encrypted = _encrypt_secret(trigger.token_hash, secret)
    with transaction.atomic():
        trigger.save()
        audit(user.get_username(), "webhook.create", trigger, name=name, signed=signed, version=version.number if version else None)
    return Created(trigger, token, secret)


_UNSET: Any = object()


def trigger_update(
    *, trigger: WebhookTrigger, user: Any, enabled: bool | None = None, version: Any = _UNSET, input_mapping: dict[str, str] | None = None,
    timestamp_window_seconds: int | None = None, name: str | None = None, run_as: Any = None,
) -> WebhookTrigger:
    """Change a trigger (``version=None``: latest published), validated as at creation; audited ``webhook.update``."""
    require_builder(user, trigger.graph)
    if run_as is not None:
        _check_run_as(trigger.graph, run_as)
        trigger.run_as = run_as
    new_version = trigger.version if version is _UNSET else version
    mapping = trigger.input_mapping if input_mapping is None else input_mapping
    window = trigger.timestamp_window_seconds if timestamp_window_seconds is None else timestamp_window_seconds
    _checked(trigger.graph, new_version, mapping, window)
    if name is not None and name != trigger.name:
        if WebhookTrigger.objects.filter(graph_id=trigger.graph_id, name=name).exists():
            raise TriggerInvalid("name taken", fields={"name": ["This graph has a webhook of this name."]})
        trigger.name = name
    changed: dict[str, Any] = {"enabled": enabled, "version": None if new_version is None else new_version.number, "input_mapping": input_mapping, "name": name,
                               "run_as": None if run_as is None else run_as.get_username()}
    if enabled is not None:
        trigger.enabled = enabled
    trigger.version = new_version
    trigger.input_mapping = mapping
    trigger.timestamp_window_seconds = window
    with transaction.atomic():
        trigger.save()
        audit(user.get_username(), "webhook.update", trigger, **{k: v for k, v in changed.items() if v is not None})
    return trigger


def trigger_rotate_secret(*, trigger: WebhookTrigger, user: Any) -> str:
    """A new HMAC secret for ``trigger`` (the old one stops verifying at once), shown this once; audited."""
    require_builder(user, trigger.graph)
    secret = secrets.token_urlsafe(32)
    trigger.secret_encrypted = _encrypt_secret(trigger.token_hash, secret)
    with transaction.atomic():
        trigger.save(update_fields=["secret_encrypted", "updated_at"])
        audit(user.get_username(), "webhook.rotate_secret", trigger)
    return secret


def trigger_delete(*, trigger: WebhookTrigger, user: Any) -> None:
    """Delete ``trigger`` and its delivery log (its runs stay); audited ``webhook.delete``."""
    require_builder(user, trigger.graph)
    with transaction.atomic():
        audit(user.get_username(), "webhook.delete", trigger, name=trigger.name)
        trigger.delete()


# Deliveries ------------------------------------------------------------------------


def _verify(trigger: WebhookTrigger, body: bytes, headers: Any) -> None:
    sent = headers.get(SIGNATURE_HEADER)
    stamp = headers.get(TIMESTAMP_HEADER)
    if not sent or not stamp:
        missing = [h for h, v in ((SIGNATURE_HEADER, sent), (TIMESTAMP_HEADER, stamp)) if not v]
        raise DeliveryRefused(401, "signature_missing", f"This webhook needs a signed delivery: {', '.join(missing)} missing.",
                              fields={h: ["Missing."] for h in missing})
    if not stamp.isdigit() or len(stamp) > 12:
        raise DeliveryRefused(401, "timestamp_invalid", f"{TIMESTAMP_HEADER} must be Unix seconds.", fields={TIMESTAMP_HEADER: ["Not Unix seconds."]})
    if abs(time.time() - int(stamp)) > trigger.timestamp_window_seconds:
        raise DeliveryRefused(401, "timestamp_stale", f"{TIMESTAMP_HEADER} is more than {trigger.timestamp_window_seconds} s from the server's clock.",
                              fields={TIMESTAMP_HEADER: ["Outside the window."]})
    try:
        secret = _decrypt_secret(trigger)
    except (InvalidToken, ValueError, UnicodeError, KeyError, TypeError):
        log.error("webhook trigger %s: its secret does not decrypt with the configured BALLAST_CREDENTIALS_KEY keys", trigger.pk)
        raise DeliveryRefused(503, "secret_unreadable", "This webhook's secret cannot be read on the server; its owner must rotate it.") from None
    expected = signature(secret, stamp, body)
    if not hmac.compare_digest(expected.encode(), sent.strip().encode("utf-8", "replace")):
        raise DeliveryRefused(401, "signature_invalid", "The signature does not match the body and timestamp.", fields={SIGNATURE_HEADER: ["Does not match."]})


def _delivery_id(headers: Any) -> str:
    for name in DELIVERY_HEADERS:
        value = headers.get(name)
        if value is not None:
            if not DELIVERY_ID.match(value):
                raise DeliveryRefused(400, "invalid", f"{name} must be 1 to 128 printable ASCII characters.", fields={name: ["Invalid delivery id."]})
            return str(value)
    return ""


def _body(trigger: WebhookTrigger, raw: bytes) -> Any:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise DeliveryRefused(400, "body_invalid", "The body must be JSON.", fields={"body": ["Not JSON."]}) from None
    if not trigger.input_mapping and not isinstance(body, dict):
        raise DeliveryRefused(400, "body_invalid", "The body must be a JSON object (it is the run input).", fields={"body": ["Not a JSON object."]})
    return body


def _start(trigger: WebhookTrigger, delivery_id: str, run_input: Any) -> tuple[Run, bool]:
    if not policy.can_operate_graph(trigger.run_as, trigger.graph):  # lost the role (or was deactivated) since the save
        raise DeliveryRefused(403, "run_as_not_allowed", f"The user this webhook acts as, {trigger.run_as.get_username()}, may no longer start runs of this graph.")
    version = version_of(trigger)
    if version is None:
        raise DeliveryRefused(409, "no_published_version", "The graph has no published version.")
    kwargs: dict[str, Any] = {"version": version, "run_input": run_input, "user": trigger.run_as, "actor": trigger.source, "source": trigger.source}
    try:
        if not delivery_id:
            return run_services.run_start(**kwargs), False
        started = run_services.run_start_idempotent(idempotency_key=f"webhook:{trigger.pk}:{delivery_id}", version_pinned=False, **kwargs)
    except run_services.RunInputInvalid as exc:
        raise DeliveryRefused(400, exc.code, exc.message, fields=exc.fields) from None
    except run_services.IdempotencyKeyReused as exc:
        raise DeliveryRefused(422, "delivery_id_reused", f"This delivery id started run {exc.run.pk} with another body.") from None
    return started.run, started.replayed


def _waited(run: Run, wait: float) -> Run:
    """``run`` once it has ended, or as it is after ``wait`` seconds."""
    deadline = time.monotonic() + wait
    pause = 0.02
    while run.status not in TERMINAL_RUN_STATUSES and time.monotonic() < deadline:
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.25)
        run.refresh_from_db(fields=["status", "output", "error"])
    return run


def _record(trigger: WebhookTrigger, delivery_id: str, status: int, run: Run | None, replayed: bool, error: dict[str, Any] | None,
            payload: dict[str, Any] | None = None) -> WebhookDelivery:
    with transaction.atomic():
        delivery = WebhookDelivery.objects.create(trigger=trigger, delivery_id=delivery_id, status_code=status, run=run, replayed=replayed,
                                                  error=error, payload=payload)
        audit(trigger.source, "webhook.delivery", trigger, actor_type="system", status=status, delivery_id=delivery_id,
              run=None if run is None else run.pk, replayed=replayed, error=None if error is None else error["code"],
              **({"captured": True} if payload is not None else {}))
    return delivery


def _capture(trigger: WebhookTrigger, run_input: Any) -> dict[str, Any] | None:
    """``run_input`` if this delivery is the one a listen takes (the compare-and-set on
    ``listening_until`` against the database clock: one delivery per listen, however many
    race), else None. An input the database cannot store (NaN, NUL) is not taken."""
    if trigger.listening_until is None or not isinstance(run_input, dict):
        return None
    try:
        values.check(run_input, "payload")
    except values.InvalidValue:
        return None
    taken = WebhookTrigger.objects.filter(pk=trigger.pk, listening_until__gt=Now()).update(listening_until=None)
    return run_input if taken == 1 else None


def delivery_receive(*, token: str, body: bytes, headers: Any, wait: float | None = None, address: str = "") -> Answer:
    """Handle one delivery to the trigger whose URL token is ``token`` (module docstring).

    202 ``{"run", "status"}`` once the run is committed (a repeated delivery id: the same
    run); with ``wait`` (seconds, at most MAX_WAIT_SECONDS), 200 with the run's
    ``output`` and ``error`` if it ends by then. Refusals are answers too, never raised.
    ``address`` (the client's) counts deliveries to unknown tokens (rate ``webhook_unknown``)."""
    trigger = WebhookTrigger.objects.select_related("run_as", "version", "graph").filter(token_hash=token_hash(token)).first()
    if trigger is None:
        # Counted per client address, so a scan of tokens costs its sender a 429 soon.
        blocked = rate_counted("webhook_unknown", address) if address else None
        if blocked is not None:
            error = DeliveryRefused(429, "throttled", f"Too many deliveries to unknown webhooks; wait {blocked} s.")
            return Answer(429, {"error": error.body()}, {"Retry-After": str(blocked)})
        return Answer(404, {"detail": "Not found."})
    delivery_id = ""
    captured: dict[str, Any] | None = None
    try:
        # A disabled webhook answers as an unknown one unless a listen is open now (database
        # clock: a window that lapsed leaves its timestamp behind, and must reveal nothing).
        if not trigger.enabled and (trigger.listening_until is None or not trigger_is_listening(trigger)):
            raise DeliveryRefused(404, "disabled", "Not found.")
        wait_rate = rate_counted("webhook", trigger.token_hash[:32])  # never reused, unlike an id
        if wait_rate is not None:
            raise DeliveryRefused(429, "throttled", f"This webhook takes no more deliveries for {wait_rate} s.", retry_after=wait_rate)
        if trigger.secret_encrypted:
            _verify(trigger, body, headers)
        delivery_id = _delivery_id(headers)
        run_input = mapped_input(trigger.input_mapping, _body(trigger, body), headers)
        captured = _capture(trigger, run_input)
        if not trigger.enabled:
            if captured is None:  # the listen ended (or another delivery took it): disabled as before
                raise DeliveryRefused(404, "disabled", "Not found.")
            _record(trigger, delivery_id, 202, None, False, None, captured)
            return Answer(202, {"run": None, "status": "captured", "replayed": False})
        run, replayed = _start(trigger, delivery_id, run_input)
    except DeliveryRefused as exc:
        _record(trigger, delivery_id, exc.status_code, None, False, exc.body(), captured)
        if exc.code == "disabled":
            return Answer(404, {"detail": "Not found."})
        extra = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
        return Answer(exc.status_code, {"error": exc.body()}, extra)
    delivery = _record(trigger, delivery_id, 202, run, replayed, None, captured)
    answer: dict[str, Any] = {"run": run.pk, "status": run.status, "replayed": replayed}
    if wait:
        run = _waited(run, min(wait, getattr(settings, "BALLAST_WEBHOOK_MAX_WAIT", MAX_WAIT_SECONDS)))
        answer["status"] = run.status
        if run.status in TERMINAL_RUN_STATUSES:
            WebhookDelivery.objects.filter(pk=delivery.pk).update(status_code=200)  # what was answered
            return Answer(200, {**answer, "output": run.output, "error": run.error})
    return Answer(202, answer)


def trigger_get(*, graph_id: int, trigger_id: int) -> WebhookTrigger:
    """The trigger ``trigger_id`` of graph ``graph_id``; NotFoundError otherwise."""
    trigger = WebhookTrigger.objects.select_related("graph", "version", "run_as").filter(pk=trigger_id, graph_id=graph_id).first()
    if trigger is None:
        raise NotFoundError(f"webhook {trigger_id} of graph {graph_id}")
    return trigger


# Listening for a test event --------------------------------------------------------


def trigger_listen(*, trigger: WebhookTrigger, user: Any, seconds: int = DEFAULT_LISTEN_SECONDS) -> tuple[WebhookTrigger, int]:
    """Listen for ``seconds`` (1 to MAX_LISTEN_SECONDS, from the database clock) for the
    next delivery to ``trigger`` (module docstring); listening again restarts the window.
    Returns the trigger (``listening_until`` read back) and the id of its newest delivery
    so far (0 for none): the capture is the first delivery after it with a ``payload``
    (:func:`trigger_listen_result`). Audited ``webhook.listen``. Raises TriggerInvalid."""
    require_builder(user, trigger.graph)
    if not 1 <= seconds <= MAX_LISTEN_SECONDS:
        raise TriggerInvalid("listen seconds", fields={"seconds": [f"Between 1 and {MAX_LISTEN_SECONDS} seconds."]})
    with transaction.atomic():
        after = WebhookDelivery.objects.filter(trigger=trigger).order_by("-id").values_list("id", flat=True).first() or 0
        WebhookTrigger.objects.filter(pk=trigger.pk).update(listening_until=Now() + timedelta(seconds=seconds))
        audit(user.get_username(), "webhook.listen", trigger, seconds=seconds)
    trigger.refresh_from_db(fields=["listening_until"])
    return trigger, after


def trigger_listen_stop(*, trigger: WebhookTrigger, user: Any) -> None:
    """Stop listening (nothing happens when the trigger was not listening)."""
    require_builder(user, trigger.graph)
    WebhookTrigger.objects.filter(pk=trigger.pk).update(listening_until=None)


def trigger_listen_result(*, trigger: WebhookTrigger, after: int) -> WebhookDelivery | None:
    """The delivery a listen captured: the first one after delivery ``after`` that kept a
    payload, or None (yet)."""
    return WebhookDelivery.objects.filter(trigger=trigger, id__gt=after, payload__isnull=False).order_by("id").first()


def trigger_is_listening(trigger: WebhookTrigger) -> bool:
    """Whether a listen window of ``trigger`` is open now (database clock)."""
    return WebhookTrigger.objects.filter(pk=trigger.pk, listening_until__gt=Now()).exists()
