"""Tools of the chaos suite (tests/chaos): each call is a side effect counted by the suite's HTTP server.

Loaded into worker processes through BALLAST_EXTRA_TOOL_MODULES=tests.support.chaos_tools.
The server's address is ``BALLAST_CHAOS_EFFECT_URL`` (``http://HOST:PORT/effect``); every
call POSTs the step's idempotency key, attempt, run, node and the calling host name, and
the server timestamps it on arrival, so the suite can tell a re-run of an in-flight step
(same key, an earlier attempt never committed) from a repeat after a commit.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import time
from urllib.parse import urlsplit

from pydantic import BaseModel

from runs.tools import ToolContext, tool
from runs.vocabulary import NodeError

# Seconds a call may wait for the effect server (a cut network makes it wait this long).
CALL_TIMEOUT = 10.0


class ChaosEffectArgs(BaseModel):
    label: str
    sleep: float = 0.0  # seconds the step keeps running after its side effect


def _send(args: ChaosEffectArgs, ctx: ToolContext) -> dict:
    """POST the effect, then sleep ``args.sleep``. A refused connection is ``not_sent``
    (nothing happened outside, so even a step not safe to repeat may retry); any other
    failure may have reached the server and is retryable without that promise."""
    url = urlsplit(os.environ["BALLAST_CHAOS_EFFECT_URL"])
    body = json.dumps(
        {
            "key": ctx.idempotency_key,
            "attempt": ctx.attempt,
            "run": ctx.run_id,
            "step": ctx.step_id,
            "node": ctx.node_id,
            "label": args.label,
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
    )
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=CALL_TIMEOUT)
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise NodeError(f"effect server unreachable: {exc}", code="effect_unreachable", retryable=True, not_sent=True) from exc
        try:
            conn.request("POST", url.path, body=body, headers={"Content-Type": "application/json", "Idempotency-Key": ctx.idempotency_key})
            status = conn.getresponse().status
        except OSError as exc:
            raise NodeError(f"effect call failed: {exc}", code="effect_failed", retryable=True) from exc
    finally:
        conn.close()
    if status != 200:
        raise NodeError(f"effect server answered {status}", code="effect_failed", retryable=True)
    if args.sleep:
        time.sleep(args.sleep)
    return {"label": args.label}


@tool("chaos_effect", description="Count a side effect on the chaos suite's server (tests).", repeat_safe=True)
def chaos_effect(args: ChaosEffectArgs, ctx: ToolContext) -> dict:
    """A side effect that may be repeated (the receiver de-duplicates by key)."""
    return _send(args, ctx)


@tool("chaos_effect_unsafe", description="Like chaos_effect, but not safe to repeat (tests).", repeat_safe=False)
def chaos_effect_unsafe(args: ChaosEffectArgs, ctx: ToolContext) -> dict:
    """A side effect that must not repeat (a payment): a crash mid-step parks it."""
    return _send(args, ctx)
