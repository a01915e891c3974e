"""Ballast's Prometheus metrics: every metric's definition, the bounded label values, and a host's multiprocess exposition.

One module owns the definitions (prometheus-client), on the ground floor so that the
engine, the tools' HTTP client and the WebSocket consumers can all record into them.
Metric names are ``ballast_*``; counters are exposed with ``_total``, histograms with
``_bucket``/``_sum``/``_count`` (prometheus-client adds the suffixes).

Multiprocess mode: ``manage.py serve`` and ``manage.py qcluster`` run several processes
per host (daphne or runserver, the cluster's main process, sentinel and workers), so
each writes its values to files in one directory per host, named by the standard
``PROMETHEUS_MULTIPROC_DIR`` (settings set it for those commands; README "Metrics"),
and a scrape of that host adds them up (:func:`exposition`). The directory must be set
before prometheus-client is imported, which is why settings, not this module, set it.
Without it (tests, ``manage.py shell``) values stay in the process's default registry.

Cardinality is bounded: no run, step or user ids as labels; every label whose values
come from data (node kind, error code, graph, provider, model) goes through
:func:`bounded`, which keeps at most :data:`MAX_LABEL_VALUES` distinct values per label
in a process and folds the rest into ``other``.
"""
from __future__ import annotations

import glob
import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any, Protocol

import psutil
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

log = logging.getLogger("ballast.metrics")

__all__ = ["CONTENT_TYPE_LATEST", "bounded", "clean_dead_processes", "exposition", "multiprocess_dir", "serve_host"]

# Buckets in seconds for the engine's claim and commit: a commit costs about 0.5-5 ms
# (TRAPS.md), a claim about as much; the top buckets catch lock waits and reconnects.
FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

STEPS_STARTED = Counter("ballast_steps_started", "Step attempts a worker started executing, by node kind.", ["kind"])
STEPS_COMMITTED = Counter("ballast_steps_committed", "Step attempts whose result committed, by node kind.", ["kind"])
STEPS_FAILED = Counter(
    "ballast_steps_failed",
    "Step attempts whose failure committed (to be retried, parked or final), by node kind and error code.",
    ["kind", "code"],
)
COMMIT_SECONDS = Histogram(
    "ballast_step_commit_seconds",
    "Seconds of a step's fenced commit (result or failure), reconnects included; outcome committed or lease_lost.",
    ["outcome"],
    buckets=FAST_BUCKETS,
)
CLAIM_SECONDS = Histogram(
    "ballast_step_claim_seconds",
    "Seconds of one claim of a due step by a worker; result claimed or none (nothing due, or someone else's).",
    ["result"],
    buckets=FAST_BUCKETS,
)
LEASES_TAKEN_OVER = Counter(
    "ballast_leases_taken_over",
    "Running steps taken back from their lease owner, by cause: lease_expired, owner_gone (process or host dead), handed_back (its own worker, after a failed commit).",
    ["cause"],
)
STEPS_PARKED = Counter(
    "ballast_steps_parked",
    "Steps parked for a person's decision (not safe to repeat), by cause: worker_lost or outcome_unknown (an error that may have let the effect happen).",
    ["cause"],
)
WORKER_SLOTS = Gauge(
    "ballast_worker_slots",
    "Step slots of the clusters running on this host: worker processes x BALLAST_WORKER_STEP_THREADS.",
    multiprocess_mode="livesum",
)
WORKER_SLOTS_IN_USE = Gauge(
    "ballast_worker_slots_in_use", "Steps (chains of kept successors) in flight in worker processes now.", multiprocess_mode="livesum"
)
LLM_TOKENS = Counter(
    "ballast_llm_tokens",
    "LLM tokens of committed step attempts, by graph, provider, model and direction (input, output).",
    ["graph", "provider", "model", "direction"],
)
LLM_COST_USD = Counter(
    "ballast_llm_cost_usd", "USD of committed step attempts' LLM calls, by graph, provider and model.", ["graph", "provider", "model"]
)
WEBSOCKETS_OPEN = Gauge(
    "ballast_websockets_open", "WebSockets open now, by stream (runs, inbox).", ["stream"], multiprocess_mode="livesum"
)
OUTBOUND_REFUSED = Counter(
    "ballast_outbound_refused",
    "Outbound calls of tools refused before connecting, by reason (loopback, private, link-local ...).",
    ["reason"],
)

# The metrics this module defines, for tests and the dashboard's check.
DEFINED = (
    STEPS_STARTED, STEPS_COMMITTED, STEPS_FAILED, COMMIT_SECONDS, CLAIM_SECONDS, LEASES_TAKEN_OVER, STEPS_PARKED,
    WORKER_SLOTS, WORKER_SLOTS_IN_USE, LLM_TOKENS, LLM_COST_USD, WEBSOCKETS_OPEN, OUTBOUND_REFUSED,
)

# ---------------------------------------------------------------------------- bounded labels

MAX_LABEL_VALUES = 100
OTHER = "other"
_LABEL_TEXT = re.compile(r"^[\w.:/@+-]{1,80}$")
_seen: dict[str, set[str]] = {}
_seen_lock = threading.Lock()


def bounded(label: str, value: object) -> str:
    """``value`` as a value of label ``label``: itself while this process has seen fewer
    than MAX_LABEL_VALUES distinct values of that label (and it is short, printable
    text), else ``other``. Empty or None: ``none``. So a plug-in's error codes, a
    provider's model names or thousands of graphs cannot grow a series per value."""
    text = "none" if value is None or value == "" else str(value)
    if not _LABEL_TEXT.match(text):
        return OTHER
    with _seen_lock:
        seen = _seen.setdefault(label, set())
        if text in seen:
            return text
        if len(seen) >= MAX_LABEL_VALUES:
            return OTHER
        seen.add(text)
        return text


_children: dict[tuple[int, tuple[str, ...]], Any] = {}


def labelled(metric: Any, *values: str) -> Any:
    """``metric.labels(*values)``, kept per label values: prometheus-client's ``labels()``
    validates, converts and takes a lock on every call (about 10 us here), which the
    engine would pay several times per step. The number of children is bounded by the
    labels' bounds (:func:`bounded`), as the metric's own are."""
    key = (id(metric), values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


def record_llm_usage(*, graph: str, provider: str, model: str, input_tokens: int, output_tokens: int, cost_usd: Decimal | None) -> None:
    """Count one committed attempt's LLM usage (tokens; USD when priced) under bounded labels."""
    labels = (bounded("graph", graph), bounded("provider", provider), bounded("model", model))
    if input_tokens:
        labelled(LLM_TOKENS, *labels, "input").inc(input_tokens)
    if output_tokens:
        labelled(LLM_TOKENS, *labels, "output").inc(output_tokens)
    if cost_usd:
        labelled(LLM_COST_USD, *labels).inc(float(cost_usd))


# ---------------------------------------------------------------------------- exposition


class Collector(Protocol):
    """Anything prometheus-client can collect from."""

    def collect(self) -> Iterable[Metric]: ...


def multiprocess_dir() -> str | None:
    """The host's multiprocess directory (PROMETHEUS_MULTIPROC_DIR), or None in single-process mode."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def _pid_of(path: str) -> int | None:
    """The process id in a multiprocess file name (``counter_1234.db``), or None."""
    stem = os.path.basename(path)[: -len(".db")]
    tail = stem.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


def clean_dead_processes(path: str) -> int:
    """At a host's start (``serve``, ``qcluster``): remove the files of every process
    that no longer runs from the multiprocess directory ``path`` (created if missing), so
    values of a previous start are not added to this one's. Files of live processes (a
    web server beside a restarted cluster) stay. Returns how many files went."""
    os.makedirs(path, exist_ok=True)
    removed = 0
    for name in glob.glob(os.path.join(path, "*.db")):
        pid = _pid_of(name)
        if pid is not None and (pid == os.getpid() or psutil.pid_exists(pid)):
            continue
        try:
            os.remove(name)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def _forget_dead_gauges(path: str) -> None:
    """Drop the live gauges (slots, sockets) of processes that died since (a recycled or
    killed worker never says so itself): prometheus-client's ``mark_process_dead`` for
    each such pid on this host."""
    pids = {_pid_of(name) for name in glob.glob(os.path.join(path, "gauge_live*.db"))}
    for pid in pids:
        if pid is not None and not psutil.pid_exists(pid):
            mark_process_dead(pid, path)


class _HostCollector:
    """This host's processes' metrics: the multiprocess files added up (dead processes'
    live gauges forgotten first), or this process's default registry without a directory."""

    def collect(self) -> Iterator[Metric]:
        path = multiprocess_dir()
        if path is None:
            yield from REGISTRY.collect()
            return
        _forget_dead_gauges(path)
        yield from MultiProcessCollector(None, path=path).collect()


class _Union:
    """Several collectors as one, for ``generate_latest``."""

    def __init__(self, collectors: Iterable[Collector]):
        self.collectors = list(collectors)

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


def exposition(extra: Iterable[Collector] = ()) -> bytes:
    """The text exposition (:data:`CONTENT_TYPE_LATEST`) of this host's
    metrics followed by ``extra`` collectors' (the web's database gauges)."""
    return generate_latest(_Union([_HostCollector(), *extra]))


def serve_host(address: str, port: int) -> Any:
    """Start this host's metrics endpoint (``GET /metrics`` and ``/`` on ``address:port``,
    prometheus-client's HTTP server on a daemon thread) and return the server (its
    ``shutdown()`` stops it), or None when the port cannot be bound (logged: another
    cluster of this host serves it already)."""
    from prometheus_client import start_http_server  # only a worker host's main process serves

    try:
        server, _thread = start_http_server(port, addr=address, registry=_Union([_HostCollector()]))
    except OSError as exc:
        log.warning("metrics endpoint not started on %s:%s: %s (another process of this host may serve it)", address, port, exc)
        return None
    log.info("metrics endpoint on http://%s:%s/metrics", address, server.server_port)
    return server
