"""Run ``manage.py qcluster`` with a timestamp written at every phase of its start, for ``python -m bench startup``.

Run as a script (``python bench/startup_trace.py``) with ``BENCH_TRACE_FILE`` set: each
phase appends one JSON line ``{"t": unix seconds, "pid", "ppid", "ev", ...}`` to that
file (opened in append mode per line, so forked children write their own lines). Phases:
``boot`` (this line runs: the interpreter has started), ``setup`` / ``setup_done``
(django.setup), ``handle`` (the qcluster command), ``cluster_start`` / ``cluster_started``
(the main process forks the sentinel and sees it running), ``sentinel``,
``broker_ping_done``, ``spawn_done``, ``guard`` (the sentinel says the cluster runs),
``worker``, ``pusher``, ``monitor`` (each child's entry), ``dequeue`` (the pusher's first
pull that returned tasks), ``heartbeat`` / ``recover`` / ``recover_done`` (the recovery
supervisor's passes; the first three only), ``task`` (a doorbell task starts),
``claimed`` (a claim that returned a step, with its id; the first ten). Nothing is
patched in the engine's behaviour: every wrapper calls the original and only logs.
"""
from __future__ import annotations

import json
import os
import sys
import time

T_BOOT = time.time()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACE = os.environ["BENCH_TRACE_FILE"]
_counts: dict[str, int] = {}


def mark(ev: str, limit: int = 1, **data: object) -> None:
    """Append one phase line (at most ``limit`` per event name and process)."""
    key = f"{os.getpid()}:{ev}"
    seen = _counts.get(key, 0)
    if seen >= limit:
        return
    _counts[key] = seen + 1
    cpu = os.times()
    line = {"t": time.time(), "cpu": cpu.user + cpu.system, "pid": os.getpid(), "ppid": os.getppid(), "ev": ev, **data}
    with open(TRACE, "a") as fh:
        fh.write(json.dumps(line) + "\n")


def _wrap(owner: object, name: str, ev: str, *, after: str | None = None, limit: int = 1, when=None) -> None:
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        mark(ev, limit=limit)
        result = original(*args, **kwargs)
        if after and (when is None or when(result)):
            mark(after, limit=limit, **({"result": result} if isinstance(result, int | str) else {}))
        return result

    wrapper.__name__ = getattr(original, "__name__", name)
    wrapper.__qualname__ = getattr(original, "__qualname__", name)
    setattr(owner, name, wrapper)


def _patch_after_setup() -> None:
    import django_q.cluster as qc
    from django_q.brokers import orm

    from runs import tasks
    from runs.engine import dispatch, loop, recovery
    from runs.engine.store import recovery_queries
    from runs.management.commands import qcluster

    _wrap(qcluster.Command, "handle", "handle")
    _wrap(qc.Cluster, "start", "cluster_start", after="cluster_started")
    _wrap(qc.Sentinel, "start", "sentinel")
    _wrap(qc.Sentinel, "spawn_cluster", "broker_ping_done", after="spawn_done")
    _wrap(qc.Sentinel, "guard", "guard")
    for name in ("worker", "pusher", "monitor"):
        original = getattr(qc, name)

        def child(*args, _original=original, _name=name, **kwargs):
            mark(_name)
            return _original(*args, **kwargs)

        setattr(qc, name, child)
    from django.conf import settings

    brokers = [orm.ORM]
    if settings.Q_CLUSTER.get("broker_class", "").endswith("NotifyingOrmBroker"):  # PostgreSQL (psycopg loaded anyway)
        brokers.append(dispatch.NotifyingOrmBroker)
    for cls in brokers:
        if "dequeue" in vars(cls):
            _wrap(cls, "dequeue", "dequeue_call", after="dequeue", when=bool)
    _wrap(recovery_queries, "worker_heartbeat", "heartbeat", limit=3)
    _wrap(recovery, "recover_once", "recover", after="recover_done", limit=3)
    _wrap(tasks, "step_execute", "task", limit=3)
    original_claim = loop.step_claim_due

    def claim(*args, **kwargs):
        mark("claim_call")
        claimed = original_claim(*args, **kwargs)
        if claimed is not None:
            mark("claimed", limit=10, step_id=claimed.step_id, node_id=claimed.node_id, attempt=claimed.attempt)
        return claimed

    loop.step_claim_due = claim


def main() -> None:
    mark("boot")
    sys.path.insert(0, REPO)
    os.chdir(REPO)
    sys.argv = ["manage.py", "qcluster"]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballast.settings")
    import django

    original_setup = django.setup

    def setup(*args, **kwargs):
        mark("setup")
        original_setup(*args, **kwargs)
        mark("setup_done")
        _patch_after_setup()

    django.setup = setup
    import runpy

    runpy.run_path(os.path.join(REPO, "manage.py"), run_name="__main__")


if __name__ == "__main__":
    main()
