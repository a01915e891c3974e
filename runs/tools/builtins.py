"""Built-in tools: ``http_request`` (httpx) and ``send_email`` (Django's configured email backend).

Both pass the step's idempotency key on (an ``Idempotency-Key`` header, a Message-ID
derived from it) so a receiver that de-duplicates can recognise a repeated attempt. Both
are registered ``repeat_safe=False``: a receiver may ignore the key, so an attempt cut
short by a crash is parked for a person rather than silently sent again.
"""

from __future__ import annotations

import email.utils
import hashlib
import smtplib
import time
from typing import Any, Literal, NoReturn

import httpx
from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.mail import BadHeaderError, EmailMessage
from django.core.validators import validate_email
from pydantic import BaseModel, ConfigDict, Field, field_validator

from runs import abort
from runs.retry_after import parse_retry_after
from runs.sandbox import values
from runs.tools import ToolContext, outbound, tool
from runs.vocabulary import NodeError, StepCancelled

# Response headers worth keeping in run state; the rest are noise (and can be large).
KEPT_RESPONSE_HEADERS = (
    "content-type",
    "content-length",
    "location",
    "etag",
    "last-modified",
    "retry-after",
    "x-request-id",
)
# Characters of an error response body kept in the error details.
ERROR_BODY_CHARS = 500

HttpMethod = Literal["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]
ParamValue = str | int | float | bool | None


class HttpRequestArgs(BaseModel):
    """Arguments of ``http_request``.

    - ``json``: a JSON body (sent with ``Content-Type: application/json``), or None.
    - ``timeout``: seconds; bounded by the step's remaining time as well.
    - ``max_chars``: the response body kept in the result, in characters.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    method: HttpMethod = "GET"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    params: dict[str, ParamValue | list[ParamValue]] | None = None
    json_body: Any = Field(None, alias="json")
    timeout: float = Field(30.0, gt=0, le=600)
    max_chars: int = Field(20_000, ge=0, le=1_000_000)

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL as exc:
            raise ValueError(f"invalid URL: {exc}") from exc
        if url.scheme not in {"http", "https"} or not url.host:
            raise ValueError("URL must be absolute http:// or https://")
        return value


@tool(name="http_request", repeat_safe=False)
def http_request(args: HttpRequestArgs, ctx: ToolContext) -> dict[str, Any]:
    """Send one HTTP request and return its status, a few headers and its body.

    Returns ``{"status": int, "headers": {lower-case name: value}, "json": value}`` when
    the body is JSON, else ``{"status", "headers", "text": str, "truncated": bool}``.
    Sends ``Idempotency-Key: <step key>`` unless the caller set that header itself.
    Redirects are followed for GET, HEAD and OPTIONS only. Goes through the shared
    client (:mod:`runs.tools.outbound`): loopback, private, link-local, multicast and
    other non-public addresses are refused after name resolution and on every redirect
    unless BALLAST_OUTBOUND_ALLOW names them, and the body read is capped by
    BALLAST_OUTBOUND_MAX_RESPONSE_BYTES.

    Raises NodeError: ``http_timeout`` (retryable; also for a 408 answer),
    ``http_connection`` (retryable), ``http_5xx`` (retryable), ``rate_limited`` (429,
    retryable, ``details.retry_after``: the server's Retry-After in seconds, at most
    ``runs.retry_after.MAX_RETRY_AFTER_SECONDS``, when it sent one),
    ``http_4xx`` (not retryable; also for more than BALLAST_OUTBOUND_MAX_REDIRECTS
    redirects), ``outbound_refused`` (not retryable; ``details``: ``host``, ``address``,
    ``reason``), ``response_too_large`` (not retryable; ``details.limit`` in bytes) and
    ``outbound_config`` (a malformed BALLAST_OUTBOUND_ALLOW). Not repeat-safe: the server
    may ignore the key. Errors after which the request certainly was not acted on carry
    ``not_sent`` (could not connect, a connect or pool timeout, 429): only those are
    retried by the node's policy; after the others the step is parked for a decision.
    """
    headers = dict(args.headers)
    if not any(name.lower() == "idempotency-key" for name in headers):
        headers["Idempotency-Key"] = ctx.idempotency_key
    timeout = args.timeout if ctx.timeout is None else max(0.001, min(args.timeout, ctx.timeout))
    # httpx's timeout bounds each network phase; this deadline bounds the whole exchange
    # (a server trickling bytes would otherwise hold the step forever).
    deadline = time.monotonic() + timeout
    limit_bytes = args.max_chars * 4 + 4  # UTF-8 needs at most 4 bytes per character
    where = {"url": args.url}
    try:
        allowed = outbound.allow_list()
    except ValueError as exc:  # a malformed BALLAST_OUTBOUND_ALLOW: the operator's to fix
        raise NodeError(f"http_request: {exc}", code="outbound_config", retryable=False) from exc

    call = None
    try:
        # The step's cancel shuts the request's connection down at once (runs.abort).
        with abort.aborting_on(ctx.cancelled) as call, outbound.outbound_client(timeout=timeout, allowed=allowed) as client:
            request = client.build_request(
                args.method, args.url, headers=headers, params=args.params, json=args.json_body
            )
            with outbound.open_response(client, request, follow_redirects=True) as response:
                body, truncated = outbound.read_body(response, keep_bytes=limit_bytes, deadline=deadline)
    except httpx.TransportError as exc:
        if call is not None and call.aborted:
            raise StepCancelled() from exc
        _raise_transport_error(args, exc, timeout, where)
    except outbound.OutboundRefused as exc:
        details = {**where, "host": exc.host, "address": exc.address, "reason": exc.reason}
        raise NodeError(
            f"{args.method} {args.url}: {exc}", code="outbound_refused", retryable=False, details=details
        ) from exc
    except outbound.ResponseTooLarge as exc:
        raise NodeError(
            f"{args.method} {args.url}: {exc}",
            code="response_too_large",
            retryable=False,
            details={**where, "limit": exc.limit},
        ) from exc
    except outbound.TooManyRedirects as exc:
        raise NodeError(f"{args.method} {args.url}: {exc}", code="http_4xx", retryable=False, details=where) from exc

    text = body.decode(response.encoding or "utf-8", errors="replace")
    kept_headers = {name: response.headers[name] for name in KEPT_RESPONSE_HEADERS if name in response.headers}
    status = response.status_code
    if status >= 400:
        _raise_for_status(args, status, kept_headers, text)

    result: dict[str, Any] = {"status": status, "headers": kept_headers}
    if not truncated and len(text) <= args.max_chars and "json" in kept_headers.get("content-type", ""):
        try:
            result["json"] = values.loads(text)  # NaN is not JSON: kept as text
            return result
        except ValueError:
            pass  # says JSON, is not: hand back the text
    result["text"] = text[: args.max_chars]
    result["truncated"] = truncated or len(text) > args.max_chars
    return result


def _raise_transport_error(args: HttpRequestArgs, exc: httpx.TransportError, timeout: float, where: dict[str, Any]) -> NoReturn:
    """Raise the NodeError of ``http_request``'s transport error ``exc`` (a timeout or a
    lost connection; see http_request)."""
    if isinstance(exc, httpx.TimeoutException):
        # Waiting for a connection (pool) or to connect: the request never left.
        unsent = isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
        raise NodeError(
            f"{args.method} {args.url}: timed out after {timeout:g}s", code="http_timeout", details=where, not_sent=unsent
        ) from exc
    raise NodeError(
        f"{args.method} {args.url}: {type(exc).__name__}: {exc}",
        code="http_connection",
        details=where,
        not_sent=isinstance(exc, httpx.ConnectError),  # refused, unreachable, no such host: nothing sent
    ) from exc


def _raise_for_status(args: HttpRequestArgs, status: int, headers: dict[str, str], text: str) -> None:
    details: dict[str, Any] = {"url": args.url, "status": status, "body": text[:ERROR_BODY_CHARS]}
    message = f"{args.method} {args.url}: HTTP {status}"
    if status == 429:
        retry_after = parse_retry_after(headers)
        if retry_after is not None:
            details["retry_after"] = retry_after
        raise NodeError(message, code="rate_limited", retryable=True, details=details, not_sent=True)  # refused, not acted on
    if status == 408:
        raise NodeError(message, code="http_timeout", retryable=True, details=details)
    if status >= 500:
        raise NodeError(message, code="http_5xx", retryable=True, details=details)
    raise NodeError(message, code="http_4xx", retryable=False, details=details)


class SendEmailArgs(BaseModel):
    """Arguments of ``send_email``: ``to`` is one address or a list (1 to 50)."""

    model_config = ConfigDict(extra="forbid")

    to: list[str] = Field(min_length=1, max_length=50)
    subject: str = Field(max_length=998)
    body: str

    @field_validator("to", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("to")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            try:
                validate_email(address)
            except DjangoValidationError as exc:
                raise ValueError(f"invalid email address: {address!r}") from exc
        return value

    @field_validator("subject")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value or "\r" in value:
            raise ValueError("subject must be one line")
        return value


def message_id_for(idempotency_key: str) -> str:
    """A Message-ID that is the same for every attempt of a step (and on every machine:
    it depends on the key and DEFAULT_FROM_EMAIL's domain only, not on the host name)."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:40]
    _, address = email.utils.parseaddr(settings.DEFAULT_FROM_EMAIL)
    domain = address.rpartition("@")[2] or "ballast.invalid"
    return f"<{digest}.ballast@{domain}>"


@tool(name="send_email", repeat_safe=False)
def send_email(args: SendEmailArgs, ctx: ToolContext) -> dict[str, Any]:
    """Send a plain-text email from DEFAULT_FROM_EMAIL through the configured EMAIL_BACKEND.

    Returns ``{"message_id": str, "to": [addresses], "sent": int}``. The Message-ID is
    derived from the idempotency key, so receivers and mail logs can spot a resend.

    Raises NodeError: ``email_rejected`` (not retryable) when the server refuses the
    recipients or answers with a permanent 5xx, ``email_error`` (retryable) for
    connection problems and temporary failures (``not_sent`` when the server could not be
    reached or refused the session: only then retried by the policy). Not repeat-safe.
    """
    message_id = message_id_for(ctx.idempotency_key)
    message = EmailMessage(
        subject=args.subject,
        body=args.body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=args.to,
        headers={"Message-ID": message_id},
    )
    try:
        sent = message.send(fail_silently=False)
    except BadHeaderError as exc:
        raise NodeError(f"send_email: {exc}", code="tool_arguments", retryable=False) from exc
    except smtplib.SMTPRecipientsRefused as exc:
        raise NodeError(f"send_email: recipients refused: {exc}", code="email_rejected", retryable=False) from exc
    except smtplib.SMTPResponseException as exc:
        permanent = exc.smtp_code >= 500
        raise NodeError(
            f"send_email: SMTP {exc.smtp_code}: {exc.smtp_error!r}",
            code="email_rejected" if permanent else "email_error",
            retryable=not permanent,
            not_sent=isinstance(exc, smtplib.SMTPConnectError),  # refused at the greeting: nothing sent
        ) from exc
    except ConnectionRefusedError as exc:  # no session: nothing sent
        raise NodeError(f"send_email: {type(exc).__name__}: {exc}", code="email_error", not_sent=True) from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise NodeError(f"send_email: {type(exc).__name__}: {exc}", code="email_error") from exc
    return {"message_id": message_id, "to": list(args.to), "sent": sent}
