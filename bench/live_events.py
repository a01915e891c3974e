"""Live run events bench case: commit-to-WebSocket latency with Redis push and on the embedded
shared poller, and the web process's database load with 1 and 200 open sockets.

``python -m bench live_events --db postgres|sqlite``. A daphne server (ballast.asgi) and a
qcluster run as subprocesses on the bench database, with ``BALLAST_CHANNELS_REDIS_URL``
set for the "redis" mode and unset for "embedded". Latency: a real ``websockets`` client
follows a run before it is released to the queue; each event's latency is its receipt
time minus its row's ``created_at`` (taken by the worker inside the commit). The client
must get every event of the run once, seq 1..n in order (checked). Load (PostgreSQL only:
transactions the server counted, ``pg_stat_database.xact_commit``, over a quiet window with
no worker running, so every transaction is the web process's poll): queries per second
with 1 and with 200 open sockets on 200 runs.
"""
from __future__ import annotations

import json
import os
import time
from datetime import datetime
from typing import Any

from bench import graphs
from bench.cases import check_linear, create_held
from bench.cluster import Cluster, WebServer, free_port
from bench.core import Reporter, check, reset_tables, summary

# BENCH_REDIS_URL: another database index of a shared Redis (the channel layer's keys).
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
LOAD_WINDOW_S = 10.0


def _mode_env(mode: str) -> dict[str, str]:
    # Only the channel layer: the cache and the queue broker stay as they are.
    return {"BALLAST_CHANNELS_REDIS_URL": REDIS_URL} if mode == "redis" else {"BALLAST_CHANNELS_REDIS_URL": "", "BALLAST_REDIS_URL": ""}


def _xacts() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def case_live_events(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """See the module docstring. ``n``: nodes per run (default 30); ``runs``: runs per mode."""
    from django.contrib.auth import get_user_model
    from websockets.sync.client import connect

    from accounts.tokens import token_create
    from runs.engine import dispatch
    from runs.models import Run, RunEvent

    size = n or 30
    version = graphs.publish(graphs.linear(size))
    reset_tables()
    User = get_user_model()
    user = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser("bench-admin", "admin@localhost", None)
    _, key = token_create(user=user, name="bench live events", by="bench")
    for mode in ("redis", "embedded"):
        env = _mode_env(mode)
        port = free_port()
        web = WebServer(f"live-{mode}", db, port)
        web.extra_env = env
        latencies: list[float] = []
        with web, Cluster(f"live-{mode}", db, workers=2, extra_env=env) as cluster:
            web.wait_ready()
            cluster.wait_ready()
            for i in range(runs + 1):  # the first is a warm-up
                run_ids, step_ids = create_held(version, 1)
                rid = run_ids[0]
                got: list[tuple[float, dict[str, Any]]] = []
                with connect(f"ws://127.0.0.1:{port}/ws/runs/{rid}/?after=0&token={key}", open_timeout=10) as ws:
                    got.append((time.time(), json.loads(ws.recv(timeout=10))["event"]))  # run_created
                    released = time.time()
                    dispatch.enqueue(step_ids)
                    while got[-1][1]["kind"] not in ("run_succeeded", "run_failed", "run_cancelled"):
                        got.append((time.time(), json.loads(ws.recv(timeout=60))["event"]))
                check_linear(rid, size)
                seqs = [e["seq"] for _, e in got]
                check(seqs == list(range(1, len(seqs) + 1)), f"run {rid}: seqs {seqs[:5]}... not 1..n in order")
                check(len(seqs) == RunEvent.objects.filter(run_id=rid).count() == Run.objects.get(pk=rid).read_event_seq(),
                      f"run {rid}: the client got {len(seqs)} events, the table has another count")
                if i:
                    latencies += [(t - datetime.fromisoformat(e["created_at"]).timestamp()) * 1000 for t, e in got[1:]
                                  if datetime.fromisoformat(e["created_at"]).timestamp() >= released]
        p50, p95 = summary(latencies)
        target = 250 if mode == "redis" else 1000
        rep.emit(f"live_events.latency.{mode}", n=len(latencies), runs=runs, samples=latencies, unit="ms", nodes_per_run=size + 2,
                 target_p95_ms=target, met=p95 < target,
                 note="commit (created_at, in the worker) to receipt by a websockets client; daphne + qcluster subprocesses")

    if db != "postgres":
        rep.skip("live_events.queries", "queries per second are counted by PostgreSQL's statistics (pg_stat_database)")
        return
    # Load: no worker, 200 runs with one committed event each, the web process polling.
    quiet_runs = [create_held(version, 1)[0][0] for _ in range(200)]
    for mode in ("embedded", "redis"):
        port = free_port()
        web = WebServer(f"load-{mode}", db, port)
        web.extra_env = _mode_env(mode)
        with web:
            web.wait_ready()
            for sockets in (0, 1, 200):
                clients = [connect(f"ws://127.0.0.1:{port}/ws/runs/{rid}/?after=1&token={key}", open_timeout=10) for rid in quiet_runs[:sockets]]
                time.sleep(3.0)  # backlogs read, stats flushed
                before, t0 = _xacts(), time.time()
                time.sleep(LOAD_WINDOW_S)
                after, t1 = _xacts(), time.time()
                for c in clients:
                    c.close()
                # Our own two statistics reads are transactions too.
                rate = (after - before - 2) / (t1 - t0)
                rep.emit(f"live_events.queries.{mode}.{sockets}_sockets", n=1, runs=1, samples=[rate], unit="queries/s",
                         sockets=sockets, window_s=LOAD_WINDOW_S,
                         note="transactions PostgreSQL counted for the bench database while idle (autocommit: one per query), "
                              "web process only (no worker running)")
