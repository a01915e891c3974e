"""Tools used by tests: side effects recorded outside the run state, and a flaky tool.

Imported by tests/conftest.py and, in worker subprocesses, through
BALLAST_EXTRA_TOOL_MODULES=tests.support.tools.
"""
from __future__ import annotations

import json
import os
import time

from pydantic import BaseModel

from runs.tools import ToolContext, tool
from runs.vocabulary import NodeError


def effects_path() -> str:
    """The side-effect log (one JSON line per executed effect); BALLAST_EFFECTS_FILE."""
    return os.environ.get("BALLAST_EFFECTS_FILE", "/tmp/ballast-effects.jsonl")


def read_effects(path: str | None = None) -> list[dict]:
    """Every recorded effect, in order."""
    try:
        with open(path or effects_path()) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


class EffectArgs(BaseModel):
    label: str
    sleep: float = 0.0


@tool("record_effect", description="Append a line to the side-effect log (tests).", repeat_safe=True)
def record_effect(args: EffectArgs, ctx: ToolContext) -> dict:
    """Record that this step executed (label, idempotency key, attempt), then sleep."""
    with open(effects_path(), "a") as fh:
        fh.write(json.dumps({"label": args.label, "key": ctx.idempotency_key, "attempt": ctx.attempt, "pid": os.getpid()}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    if args.sleep:
        time.sleep(args.sleep)
    return {"label": args.label}


@tool("record_effect_unsafe", description="Like record_effect but not safe to repeat (tests).", repeat_safe=False)
def record_effect_unsafe(args: EffectArgs, ctx: ToolContext) -> dict:
    """Record an effect that must not repeat (a payment, an email)."""
    return record_effect.__wrapped__(args, ctx) if hasattr(record_effect, "__wrapped__") else _record(args, ctx)


def _record(args: EffectArgs, ctx: ToolContext) -> dict:
    with open(effects_path(), "a") as fh:
        fh.write(json.dumps({"label": args.label, "key": ctx.idempotency_key, "attempt": ctx.attempt, "pid": os.getpid()}) + "\n")
    if args.sleep:
        time.sleep(args.sleep)
    return {"label": args.label}


class GilArgs(BaseModel):
    label: str
    seconds: float


@tool("gil_hold", description="Record an effect, then hold the GIL for some seconds (tests).", repeat_safe=True)
def gil_hold(args: GilArgs, ctx: ToolContext) -> dict:
    """Record that this step executed, then block the worker's whole interpreter for
    ``seconds``: libc's ``usleep`` called through ``ctypes.PyDLL``, which keeps the GIL
    for the call (a pure-Python loop would give it up every switch interval), so no other
    thread of the worker process (its lease heartbeat) runs meanwhile, as with a C
    extension that computes without releasing the GIL."""
    import ctypes

    _record(EffectArgs(label=args.label), ctx)
    ctypes.PyDLL(None).usleep(int(args.seconds * 1_000_000))
    return {"label": args.label}


class HeldEffectArgs(BaseModel):
    label: str
    release: str  # a file path: the step finishes once it exists
    max_seconds: float = 120.0


@tool("held_effect", description="Record an effect, then wait until a release file exists (tests).", repeat_safe=True)
def held_effect(args: HeldEffectArgs, ctx: ToolContext) -> dict:
    """Record that this step executed, then hold the step running until the test creates
    ``release`` (polled every 20 ms; raises after ``max_seconds``), so a browser test sees
    the running state for as long as it needs, with no sleep that guesses how long that is."""
    _record(EffectArgs(label=args.label), ctx)
    deadline = time.monotonic() + args.max_seconds
    while not os.path.exists(args.release):
        if time.monotonic() > deadline:
            raise NodeError(f"{args.release} was not created within {args.max_seconds} s", code="held_too_long", retryable=False)
        time.sleep(0.02)
    return {"label": args.label}


class FlakyArgs(BaseModel):
    fail_times: int = 1
    code: str = "flaky"
    retryable: bool = True
    sleep: float = 0.0


@tool("flaky", description="Fail the first fail_times attempts, then succeed (tests).")
def flaky(args: FlakyArgs, ctx: ToolContext) -> dict:
    """Raise a NodeError while ``ctx.attempt <= fail_times``; sleep first if asked."""
    if args.sleep:
        time.sleep(args.sleep)
    if ctx.attempt <= args.fail_times:
        raise NodeError(f"flaky failure on attempt {ctx.attempt}", code=args.code, retryable=args.retryable)
    return {"attempt": ctx.attempt}


class IgnoreTimeoutArgs(BaseModel):
    seconds: float = 30.0
    mode: str = "sleep"  # "sleep": blocked in one C call (time.sleep); "spin": a busy Python loop


@tool("ignore_timeout", description="Run for `seconds` without ever looking at the step's cancel event (tests).", repeat_safe=True)
def ignore_timeout(args: IgnoreTimeoutArgs, ctx: ToolContext) -> dict:
    """A node whose code ignores its timeout: sleeps in one C call or busy-loops, and
    records its start in the effects log first (label ``ignore_timeout``)."""
    _record(EffectArgs(label="ignore_timeout"), ctx)
    if args.mode == "spin":
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            pass
    else:
        time.sleep(args.seconds)
    return {"slept": args.seconds}

class NotJsonArgs(BaseModel):
    value: str  # a name in tests.support.kinds.NOT_JSON


@tool("not_json", description="Return a value JSON cannot carry (tests).", repeat_safe=True)
def not_json(args: NotJsonArgs, ctx: ToolContext) -> object:
    """What a careless tool returns: NaN, a set, bytes, a Decimal, ..."""
    from tests.support.kinds import NOT_JSON

    return NOT_JSON[args.value][0]


@tool("fails_with_odd_details", description="Fail with error details that are not JSON (tests).", repeat_safe=True)
def fails_with_odd_details(args: NotJsonArgs, ctx: ToolContext) -> object:
    """A tool whose NodeError carries bytes and NaN in its details, and a NUL in its message."""
    raise NodeError("upstream said \x00 no", code="upstream", retryable=False, details={"raw": b"\x00\x01", "score": float("nan")})


class SessionArgs(BaseModel):
    label: str = "session"


# Raw connections this process has reported, kept alive so that id() stays unique.
_reported: list[object] = []


@tool("db_session", description="Record which database session this step ran on (tests).", repeat_safe=True)
def db_session(args: SessionArgs, ctx: ToolContext) -> dict:
    """Record the worker pid and its database session: the server's backend pid on
    PostgreSQL, the driver connection's identity on SQLite."""
    from django.db import connection

    connection.ensure_connection()
    if connection.vendor == "postgresql":
        session = connection.connection.execute("SELECT pg_backend_pid()").fetchone()[0]
    else:
        _reported.append(connection.connection)
        session = id(connection.connection)
    with open(effects_path(), "a") as fh:
        fh.write(json.dumps({"label": args.label, "key": ctx.idempotency_key, "pid": os.getpid(), "session": session}) + "\n")
    return {"label": args.label}


class HoldArgs(BaseModel):
    label: str = "held"
    release_file: str
    hold_seconds: float = 120.0


def _session_then_hold(args: HoldArgs, ctx: ToolContext) -> dict:
    """Record the worker's database session (as db_session), then wait (polling) until
    ``release_file`` exists, at most ``hold_seconds``: a step in flight that a test can
    hit with a database fault before it commits."""
    _session(args.label, ctx)
    deadline = time.monotonic() + args.hold_seconds
    while not os.path.exists(args.release_file) and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"label": args.label}


def _session(label: str, ctx: ToolContext) -> None:
    from django.db import connection

    connection.ensure_connection()
    session = connection.connection.execute("SELECT pg_backend_pid()").fetchone()[0] if connection.vendor == "postgresql" else id(connection.connection)
    with open(effects_path(), "a") as fh:
        fh.write(json.dumps({"label": label, "key": ctx.idempotency_key, "attempt": ctx.attempt, "pid": os.getpid(), "session": session}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


@tool("session_then_hold", description="Record the database session, then wait for a file (tests).", repeat_safe=True)
def session_then_hold(args: HoldArgs, ctx: ToolContext) -> dict:
    return _session_then_hold(args, ctx)


@tool("session_then_hold_unsafe", description="As session_then_hold, not safe to repeat (tests).", repeat_safe=False)
def session_then_hold_unsafe(args: HoldArgs, ctx: ToolContext) -> dict:
    return _session_then_hold(args, ctx)


class RendezvousArgs(BaseModel):
    label: str
    dir: str  # shared by the branches: started/, active/ and peaks.jsonl in it
    expect: int  # how many branches must have started before any goes on
    max_seconds: float = 60.0


@tool("rendezvous", description="Wait until `expect` branches have started; record how many run at once (tests).", repeat_safe=True)
def rendezvous(args: RendezvousArgs, ctx: ToolContext) -> dict:
    """A barrier across steps, threads and processes, for proving concurrency without a
    clock: mark this step active (a file), record how many steps are active right then
    (``peaks.jsonl``: label, active, pid, thread), mark it started, wait until ``expect``
    steps have started (polled every 10 ms; a step that runs alone waits in vain and
    fails after ``max_seconds``), then stop being active. Stops at once, with
    StepCancelled, when the step's cancel event is set (a line ``cancelled`` in the
    effects log)."""
    import threading
    from pathlib import Path

    from runs.vocabulary import StepCancelled

    _record(EffectArgs(label=args.label), ctx)
    root = Path(args.dir)
    started, active = root / "started", root / "active"
    started.mkdir(parents=True, exist_ok=True)
    active.mkdir(parents=True, exist_ok=True)
    mine = f"{args.label}-{ctx.attempt}"
    (active / mine).touch()
    try:
        # Counted before this step counts as started: no step waiting at the barrier can
        # leave (and stop being active) before this count.
        running = len(list(active.iterdir()))
        with open(root / "peaks.jsonl", "a") as fh:
            fh.write(json.dumps({"label": args.label, "active": running, "pid": os.getpid(), "thread": threading.get_ident()}) + "\n")
        (started / mine).touch()
        deadline = time.monotonic() + args.max_seconds
        while len(list(started.iterdir())) < args.expect:
            if ctx.cancelled.wait(0.01):
                _record(EffectArgs(label=f"cancelled:{args.label}"), ctx)
                raise StepCancelled()
            if time.monotonic() > deadline:
                raise NodeError(f"only {len(list(started.iterdir()))} of {args.expect} branches started", code="alone", retryable=False)
    finally:
        (active / mine).unlink(missing_ok=True)
    return {"label": args.label}


class UntilCancelledArgs(BaseModel):
    label: str
    max_seconds: float = 120.0


@tool("until_cancelled", description="Record an effect, then wait for the step's cancel event (tests).", repeat_safe=True)
def until_cancelled(args: UntilCancelledArgs, ctx: ToolContext) -> dict:
    """Record that this step started, then wait on the step's cancel event; once it is
    set, record ``cancelled:<label>`` and stop (StepCancelled). Returns normally, as a
    success, only if nothing cancels it within ``max_seconds``."""
    from runs.vocabulary import StepCancelled

    _record(EffectArgs(label=args.label), ctx)
    if ctx.cancelled.wait(args.max_seconds):
        _record(EffectArgs(label=f"cancelled:{args.label}"), ctx)
        raise StepCancelled()
    return {"label": args.label}
