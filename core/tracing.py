"""OpenTelemetry traces: off unless the standard ``OTEL_*`` variables name an exporter; a run's trace context; spans for step attempts, LLM calls and tool calls.

Every run stores a W3C ``traceparent`` (``Run.traceparent``): the one of the request or
webhook delivery that started it (:func:`incoming`, set by :class:`TraceparentMiddleware`)
or, without one, a new trace begun for the run (:func:`new_traceparent`). That costs
nothing and is kept even with tracing off, so the JSON logs carry the run's trace id and
a run traced later joins the caller's trace.

Tracing is on in a process when, at start (:func:`configure`, called by the runs app):
``OTEL_TRACES_EXPORTER`` names exporters (``otlp``, which is OTLP over HTTP/protobuf,
the exporter installed; ``console``; or any installed ``opentelemetry_traces_exporter``
entry point), or, with ``OTEL_TRACES_EXPORTER`` unset, ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (then ``otlp``). ``OTEL_SDK_DISABLED=true``
or ``OTEL_TRACES_EXPORTER=none`` turns it off. The SDK reads the rest itself: the OTLP
endpoint, headers and timeout, ``OTEL_SERVICE_NAME`` (default ``ballast``),
``OTEL_RESOURCE_ATTRIBUTES``, the sampler (``OTEL_TRACES_SAMPLER``, parent-based by
default, so an unsampled caller's ``traceparent`` is honoured) and the batch processor's
``OTEL_BSP_*``. Off, every span helper here returns at once without touching the SDK.

Spans (each ends before the code that opened it returns, so no span stays open across
a wait; a run waiting for an approval has none open):

- ``run start``: the moment a run was started, a child of the caller's context; the
  run stores its context (:func:`run_traceparent`);
- ``step <node id>``: one step attempt (execute and commit) on whichever worker runs it,
  a child of the run's stored context (runs.engine.loop.run_claimed);
- ``chat <model>``: one LLM call (the GenAI semantic conventions: ``gen_ai.*``, cost as
  ``ballast.cost_usd``), a child of the attempt's span (runs.providers.spans);
- ``execute_tool <name>``: one tool call (runs.tools.RegisteredTool.call).
"""
from __future__ import annotations

import contextvars
import logging
import multiprocessing.util
import os
import re
import secrets
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from importlib import metadata
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from core.build import build

log = logging.getLogger("ballast.tracing")

__all__ = ["Span", "configure", "enabled", "flush", "install", "new_traceparent", "parse_traceparent", "run_traceparent", "set_attributes", "set_error", "span", "trace_id_of"]

TRACER_NAME = "ballast"
# version-traceid-parentid-flags, lower-case hex (W3C Trace Context, level 1). A future
# version may append fields after the flags; they are dropped (we store version 00).
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16

_propagator = TraceContextTextMapPropagator()
_tracer: trace.Tracer | None = None  # set by configure() when an exporter is configured
_incoming: contextvars.ContextVar[str] = contextvars.ContextVar("ballast_incoming_traceparent", default="")


def parse_traceparent(value: str | None) -> str | None:
    """``value`` as a valid version-00 ``traceparent`` (lower case, 55 characters), or None
    when it is missing or malformed (wrong shape, version ``ff``, an all-zero trace or span
    id): a bad header is ignored, as the W3C specification asks, never an error."""
    match = _TRACEPARENT.match((value or "").strip().lower())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return f"00-{trace_id}-{span_id}-{flags}"


def new_traceparent() -> str:
    """A ``traceparent`` for a new trace (random trace and parent ids, sampled)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def trace_id_of(traceparent: str | None) -> str | None:
    """The 32-hex-digit trace id of a STORED ``traceparent`` (checked when it was stored:
    only its length is looked at here, once per step), or None for "" (a run from before
    traces were kept)."""
    return traceparent[3:35] if traceparent and len(traceparent) == 55 else None


def incoming() -> str:
    """The valid ``traceparent`` of the request being served (TraceparentMiddleware), or ""."""
    return _incoming.get()


def run_traceparent() -> str:
    """The ``traceparent`` a run started now stores.

    Traces on: the context of a ``run start`` span, ended at once, whose parent is the
    incoming request's trace context when it sent a valid one, else the current span
    (a run started inside a traced block), else none (a new trace). The run's step
    attempts are children of that span, so a trace shows where the run began and no
    span's parent is missing. Traces off: the incoming request's ``traceparent``, else a
    new trace's (random ids, nothing recorded)."""
    given = incoming()
    if _tracer is not None:
        with _span(_tracer, "run start", attributes=None, kind=SpanKind.INTERNAL, traceparent=given or None):
            carrier: dict[str, str] = {}
            _propagator.inject(carrier)
            if parsed := parse_traceparent(carrier.get("traceparent")):
                return parsed
    return given or new_traceparent()


class TraceparentMiddleware:
    """Django middleware: keeps the request's valid ``traceparent`` header for
    :func:`run_traceparent` while the request is served (a run it starts joins the
    caller's trace). Costs a header lookup; a malformed header is ignored."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        token = _incoming.set(parse_traceparent(request.META.get("HTTP_TRACEPARENT")) or "")
        try:
            return self.get_response(request)
        finally:
            _incoming.reset(token)


def exporter_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """The span exporters the environment configures (module docstring), [] for none."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = env.get("OTEL_TRACES_EXPORTER")
    if names is None:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return ["otlp"] if endpoint else []
    return [n for n in (p.strip().lower() for p in names.split(",")) if n and n != "none"]


def _exporter(name: str) -> Any:
    """A new span exporter by its OTEL_TRACES_EXPORTER name. Raises ValueError naming the
    installed ones when there is no such exporter."""
    if name in {"otlp", "otlp_proto_http"}:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # endpoint, headers, timeout: OTEL_EXPORTER_OTLP_* (the SDK reads them)
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    found = metadata.entry_points(group="opentelemetry_traces_exporter", name=name)
    if not found:
        installed = sorted({"otlp", "console", *(e.name for e in metadata.entry_points(group="opentelemetry_traces_exporter"))})
        raise ValueError(f"OTEL_TRACES_EXPORTER names {name!r}, which is not installed (installed: {', '.join(installed)})")
    return next(iter(found)).load()()


def configure(environ: Mapping[str, str] | None = None) -> bool:
    """Set up the SDK's tracer provider (a batch processor per exporter) when the
    environment configures an exporter; True when tracing is on. Called once per process
    at start (forked workers inherit it: the batch processor restarts its thread in a
    child). Raises ValueError for an exporter name that is not installed."""
    names = exporter_names(environ)
    if not names:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.version": build(), "host.name": socket.gethostname()})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "ballast"}))
    provider = TracerProvider(resource=resource)
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
    trace.set_tracer_provider(provider)
    install(provider)
    # A forked multiprocessing child (a qcluster's worker) leaves by os._exit, which skips
    # the SDK's atexit flush: each child registers one with multiprocessing's exit hooks.
    multiprocessing.util.register_after_fork(provider, _flush_at_child_exit)
    log.info("traces on: exporter(s) %s", ", ".join(names))
    return True


def _flush_at_child_exit(provider: Any) -> None:
    """In a forked multiprocessing child: export the spans it still holds when it ends."""
    multiprocessing.util.Finalize(provider, provider.force_flush, exitpriority=100)


def install(provider: Any) -> None:
    """Record this module's spans through ``provider`` (an SDK TracerProvider), or stop
    recording them (None). :func:`configure` installs the global provider; tests install
    one with an in-memory exporter (the global one can be set only once per process)."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer(TRACER_NAME, build())


def enabled() -> bool:
    """Whether this process records spans (an exporter was configured)."""
    return _tracer is not None


def flush(timeout_millis: int = 5000) -> None:
    """Export the spans this process still holds (a worker about to exit). No-op when off."""
    provider = trace.get_tracer_provider()
    if _tracer is not None and hasattr(provider, "force_flush"):
        provider.force_flush(timeout_millis)


# What span() returns with traces off: entering it yields None and costs a method call.
_OFF: AbstractContextManager[None] = nullcontext(None)


def span(name: str, *, attributes: Mapping[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL,
         traceparent: str | None = None) -> AbstractContextManager[Span | None]:
    """A span around the block, current inside it (spans opened in the block are its
    children), ended when the block ends; an exception escaping the block is recorded on
    it and sets its status to error. Its parent: the context of ``traceparent`` when given
    (a step attempt, under its run's stored context; a new trace when it is invalid),
    else the current span. Yields None, and does nothing, when tracing is off.
    ``attributes``: None values are left out."""
    if _tracer is None:
        return _OFF
    return _span(_tracer, name, attributes=attributes, kind=kind, traceparent=traceparent)


@contextmanager
def _span(tracer: trace.Tracer, name: str, *, attributes: Mapping[str, Any] | None, kind: SpanKind,
          traceparent: str | None) -> Iterator[Span]:
    """:func:`span` with traces on."""
    context = None
    if traceparent is not None:
        context = _propagator.extract({"traceparent": traceparent}) if parse_traceparent(traceparent) else trace.set_span_in_context(trace.INVALID_SPAN)
    clean = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer.start_as_current_span(name, context=context, kind=kind, attributes=clean) as current:
        yield current


def set_attributes(current: Span | None, attributes: Mapping[str, Any]) -> None:
    """Set ``attributes`` (None values left out) on ``current``; no-op for None (off)."""
    if current is not None:
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def set_error(current: Span | None, code: str, message: str) -> None:
    """Mark ``current`` failed (status error, ``error.type`` = ``code``) without an
    exception (a node's NodeError is a value, not a raise); no-op for None (off)."""
    if current is not None:
        current.set_attribute("error.type", code)
        current.set_status(Status(StatusCode.ERROR, message[:500]))
