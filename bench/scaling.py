"""Cases for issue 11's cost-shape targets: cost per node against run length (``scaling``)
and against state size (``statesize``), both in-process on either database.

- scaling.loop: a two-node loop run for 10, 100 and 1,000 steps; scaling.chain: chains of
  10, 100 and 500 nodes. A sample is the drive time (run creation included) over the
  steps the run committed; the target wants the largest size within 10 % of the smallest.
- state.per_node: a 30-node chain whose nodes update one small key while the run input
  (part of the state) holds a 1 KB or a 1 MB string; a sample is the drive time after
  run creation over the steps committed (creating a run with a 1 MB input is a fixed
  cost, reported apart as ``create_ms``). ``wal_bytes_per_node``: on PostgreSQL the
  server's WAL position before and after the timed runs (``pg_current_wal_lsn``; it is
  server-wide, so other databases' writes on a shared server count too), on SQLite the
  growth of the WAL file while a reader pins it (:class:`WalMeter`).
"""
from __future__ import annotations

import time

from bench import graphs
from bench.cases import start_inprocess
from bench.core import Reporter, check, reset_tables

LOOP_STEPS = (10, 100, 1000)
CHAIN_NODES = (10, 100, 500)
STATE_NODES = 30
STATE_SIZES_KIB = (1, 1024)


def _committed(run_id: int) -> int:
    from runs.models import Step

    return Step.objects.filter(run_id=run_id, status="succeeded").count()


def _check_run(run_id: int, i: int, steps: int) -> None:
    from runs.models import Run

    status, state, error = Run.objects.values_list("status", "state", "error").get(pk=run_id)
    check(status == "succeeded", f"run {run_id}: {status} {error}")
    check(state.get("i") == i, f"run {run_id}: i={state.get('i')!r}, expected {i}")
    committed = _committed(run_id)
    check(committed == steps, f"run {run_id}: {committed} steps committed, expected {steps}")


def case_scaling(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """Cost per committed step of the loop and the chain at each size (``n``: one size for
    both, for a quick look)."""
    shapes = [
        ("loop", [n] if n else list(LOOP_STEPS), graphs.loop, lambda s: (max(1, s // 2), 2 * max(1, s // 2) + 2)),
        ("chain", [n] if n else list(CHAIN_NODES), graphs.linear, lambda s: (s, s + 2)),
    ]
    for shape, sizes, build, expect in shapes:
        reset_tables()
        for size in sizes:
            version = graphs.publish(build(size))
            i, steps = expect(size)
            rid, _ = start_inprocess(version)  # warm-up: compiled graph, plans for this shape
            _check_run(rid, i, steps)
            samples = []
            for _ in range(runs):
                rid, seconds = start_inprocess(version)
                _check_run(rid, i, steps)
                samples.append(seconds * 1000 / steps)
            rep.emit(f"scaling.{shape}", n=size, runs=runs, samples=samples, unit="ms/step", per_commit=1, steps=steps,
                     note=f"{shape} of {size} {'steps' if shape == 'loop' else 'nodes'}: run_start + drive_local wall time / {steps} committed steps")


class WalMeter:
    """WAL bytes written between :meth:`start` and :meth:`stop` on the benchmark database.

    PostgreSQL: the server's WAL position (``pg_current_wal_lsn``), server-wide. SQLite: the
    growth of the ``-wal`` file while a connection of this meter holds a read transaction
    open, which keeps SQLite from rewinding the WAL (a checkpoint cannot pass a reader and
    the log restarts only when no reader uses it), so every frame appended shows as growth.
    """

    def __init__(self) -> None:
        from django.db import connection

        self.vendor = connection.vendor
        self.path = connection.settings_dict["NAME"]
        self.reader = None
        self.before = 0

    def _position(self) -> int:
        from django.db import connection

        if self.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
                return int(cur.fetchone()[0])
        import os

        wal = f"{self.path}-wal"
        return os.path.getsize(wal) if os.path.exists(wal) else 0

    def start(self) -> None:
        if self.vendor != "postgresql":
            import sqlite3

            self.reader = sqlite3.connect(self.path, isolation_level=None, timeout=20)
            self.reader.execute("BEGIN")
            self.reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
        self.before = self._position()

    def stop(self) -> int:
        after = self._position()
        if self.reader is not None:
            self.reader.execute("ROLLBACK")
            self.reader.close()
            self.reader = None
        return after - self.before

    @property
    def scope(self) -> str:
        return "server-wide WAL LSN (other databases on the server count too)" if self.vendor == "postgresql" else \
            "growth of the -wal file with its log pinned by an open reader"


def case_statesize(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """Per-node cost and WAL bytes per node with a 1 KB and a 1 MB value in the state."""
    from django.db import connection

    from runs.engine import api as engine
    from runs.services import run_start

    nodes = n or STATE_NODES
    steps = nodes + 2
    version = graphs.publish(graphs.small_key_chain(nodes))
    reset_tables()
    if connection.vendor == "sqlite":
        with connection.cursor() as cur:
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for kib in STATE_SIZES_KIB:
        run_input = {"blob": "x" * (kib * 1024)}

        def one(run_input: dict = run_input) -> tuple[float, float]:
            with engine.local_mode() as queue:
                t0 = time.perf_counter()
                run = run_start(version=version, run_input=run_input)
                t1 = time.perf_counter()
                engine.drive_local(run.pk, queue=queue, timeout=600)
                t2 = time.perf_counter()
            _check_run(run.pk, nodes, steps)
            return (t1 - t0) * 1000, (t2 - t1) * 1000 / steps

        one()  # warm-up
        meter = WalMeter()
        meter.start()
        creates, samples = [], []
        try:
            for _ in range(runs):
                create_ms, per_node = one()
                creates.append(create_ms)
                samples.append(per_node)
        finally:
            wal = meter.stop()
        if connection.vendor == "sqlite":
            with connection.cursor() as cur:
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rep.emit("state.per_node", n=kib, runs=runs, samples=samples, unit="ms/step", per_commit=1, state_kib=kib,
                 nodes=nodes, create_ms=sorted(creates)[len(creates) // 2], wal_bytes_per_node=wal / (runs * steps),
                 wal_scope=meter.scope,
                 note=f"{nodes}-node chain updating one small key; the state holds a {kib} KiB string; "
                      "drive time after run creation / committed steps (run creation: create_ms)")
