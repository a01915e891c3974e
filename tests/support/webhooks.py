"""Webhook trigger helpers for tests: a graph to trigger, signed delivery headers."""
from __future__ import annotations

import json
import time
from typing import Any

from tests.support.specs import chain, graph, node, transform


def order_spec() -> dict[str, Any]:
    """A graph whose input needs an integer ``x`` (and takes an optional ``event``); output y = x * 2."""
    return graph(
        [node("start", "start"), transform("double", y="x * 2"), node("end", "end")],
        chain("start", "double", "end"),
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}, "event": {"type": "string"}}, "required": ["x"]},
    )


def signed_headers(secret: str, body: bytes, *, timestamp: int | None = None, **extra: str) -> dict[str, str]:
    """Django test-client keyword headers of a delivery signed with ``secret``."""
    from triggers.services import signature

    stamp = str(int(time.time()) if timestamp is None else timestamp)
    headers = {"HTTP_X_BALLAST_TIMESTAMP": stamp, "HTTP_X_BALLAST_SIGNATURE": signature(secret, stamp, body)}
    headers.update({f"HTTP_{k.upper().replace('-', '_')}": v for k, v in extra.items()})
    return headers


def dumps(value: Any) -> bytes:
    """The JSON body bytes of ``value``."""
    return json.dumps(value).encode()


def send_signed(url: str, secret: str, value: Any, *, delivery_id: str | None = None, timeout: float = 30) -> tuple[int, Any]:
    """POST ``value`` as JSON to a webhook ``url`` over a real socket (urllib), signed as the
    README says, computed here on its own: ``sha256=`` + hex HMAC-SHA256 of
    ``"<unix seconds>.<raw body>"`` keyed by ``secret``. Returns (status, parsed answer)."""
    import hashlib
    import hmac
    import urllib.error
    import urllib.request

    body = dumps(value)
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Ballast-Timestamp": stamp,
        "X-Ballast-Signature": "sha256=" + hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest(),
    }
    if delivery_id:
        headers["X-Ballast-Delivery"] = delivery_id
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
