"""What a run costs before and after its nodes: run creation, the start and end steps, and a worker's database connection per task.

``fixed`` measures, on the smallest graph (start -> end, two steps):

- ``fixed.inprocess``: ms per whole run in this process (run_start, the start step's claim
  and commit, the end step's commit), and the SQL statements one run sends, counted with
  ``connection.execute_wrapper`` (the prepared PostgreSQL fast path included);
- ``fixed.connect``: what opening one database connection costs here (Django's
  ``connect()``: on PostgreSQL a server backend fork and authentication);
- ``fixed.qcluster``: ms per run through a one-worker qcluster, run after run, with
  worker connections kept (``BALLAST_WORKER_CONN_MAX_AGE``, the default) and with a new
  connection per task and per queue poll (``BALLAST_WORKER_CONN_MAX_AGE=0``, Django's
  default); on PostgreSQL with the sessions the server saw opened per run
  (``pg_stat_database.sessions``).
"""
from __future__ import annotations

import time

from bench import graphs
from bench.cases import check_linear, start_inprocess, start_queued, wait_terminal
from bench.cluster import Cluster
from bench.core import Reporter, check, reset_tables, summary


def _sessions() -> int | None:
    """Sessions ever opened on this PostgreSQL database (None on SQLite)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return int(cur.fetchone()[0])


def case_fixed(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    from django.db import connection

    version = graphs.publish(graphs.linear(0))
    per_sample = n or 20  # runs per in-process sample
    reset_tables()
    for _ in range(3):
        rid, _ = start_inprocess(version)
        check_linear(rid, 0)

    samples, statements = [], []
    for _ in range(runs):
        seen: list[str] = []

        def count(execute, sql, params, many, context, seen=seen):
            seen.append(sql)
            return execute(sql, params, many, context)

        t = time.perf_counter()
        with connection.execute_wrapper(count):
            ids = [start_inprocess(version)[0] for _ in range(per_sample)]
        samples.append((time.perf_counter() - t) * 1000 / per_sample)
        statements.append(len(seen) / per_sample)
        for rid in ids:
            check_linear(rid, 0)
    rep.emit("fixed.inprocess", n=per_sample, runs=runs, samples=samples, unit="ms/run", per_commit=2,
             statements_per_run=summary(statements)[0],
             note="start -> end in this process: run_start, the start step's claim and commit, the end step's commit "
                  "(and drive_local's status polls); statements counted by an execute_wrapper")

    connects = []
    for _ in range(runs * 10):
        connection.close()
        t = time.perf_counter()
        connection.ensure_connection()
        connects.append((time.perf_counter() - t) * 1000)
    rep.emit("fixed.connect", n=1, runs=len(connects), samples=connects, unit="ms/connection",
             note="connection.close() then ensure_connection(): one new database connection, as django-q2's "
                  "close_old_connections() makes a worker open per task when CONN_MAX_AGE is 0")

    queued = max(10, 2 * runs)
    figures = {}
    # This process keeps its own connection from here on (django-q2's enqueue calls
    # close_old_connections() here too), so the sessions counted are the cluster's.
    from django.db import connections

    connections.settings[connection.alias]["CONN_MAX_AGE"] = None
    connection.close()
    for label, env in (("kept", {}), ("per_task", {"BALLAST_WORKER_CONN_MAX_AGE": "0"})):
        reset_tables()
        with Cluster(f"fixed-{label}", db, workers=1, extra_env=env) as cluster:
            cluster.wait_ready()
            for _ in range(3):  # warm-up: imports, the compiled graph
                rid = start_queued(version)
                wait_terminal([rid], cluster=cluster, poll=0.005)
            before, t0 = _sessions(), time.monotonic()
            latencies = []
            for _ in range(queued):
                rid = start_queued(version)
                wait_terminal([rid], cluster=cluster, poll=0.005)
                check_linear(rid, 0)
                from runs.models import Run

                created, finished = Run.objects.values_list("created_at", "finished_at").get(pk=rid)
                latencies.append((finished - created).total_seconds() * 1000)
            seconds = time.monotonic() - t0
            after = _sessions()
        sessions = None if before is None or after is None else (after - before) / queued
        figures[label] = summary(latencies)[0]
        rep.emit(f"fixed.qcluster.{label}", n=queued, runs=queued, samples=latencies, unit="ms/run", per_commit=2,
                 sessions_per_run=sessions,
                 sessions_per_second=None if sessions is None else sessions * queued / seconds,
                 worker_conn_max_age=env.get("BALLAST_WORKER_CONN_MAX_AGE", "default (settings.BALLAST_WORKER_CONN_MAX_AGE)"),
                 note="start -> end through a one-worker qcluster, one run after another: run created_at to finished_at; "
                      "sessions: new server sessions per run from the cluster's processes (sentinel, worker, pusher, "
                      "monitor, supervisor thread)")
    check(figures["kept"] > 0 and figures["per_task"] > 0, "no qcluster figure")
    rep.emit("fixed.qcluster.saved", n=queued, runs=queued, median=figures["per_task"] - figures["kept"], p95=None, unit="ms/run",
             note="median per-run latency with a connection per task minus with kept connections")
