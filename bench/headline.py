"""The headline comparison: Ballast, LangGraph, DBOS and the database floor in ONE process,
round after round in rotated order (``python -m bench headline``).

Two groups, each its own set of rounds:

- ``inprocess``: the floor (100 single-row INSERT + COMMIT), Ballast driven in this
  process (``drive_local``), LangGraph (PostgresSaver, durability "sync") and DBOS, on the
  100-node chain and the fan-outs of 10 and 100 branches;
- ``worker``: a ``manage.py qcluster`` (2 worker processes) is up the whole time; the
  floor, Ballast through the queue (run created_at to finished_at) and LangGraph again, so
  the worker figures have a floor and a comparator measured in the same rounds. (Ballast's
  in-process runs do not share a group with a live cluster: its recovery pass would hand
  their pending branches to the queue.)

Every round runs each contestant once (one run, one sample), in the order
:func:`bench.stats.rotated` gives, after one untimed warm-up round. Per contestant the
line carries the median, quartiles and IQR over the rounds, and ``ratio_to_floor`` is
the median of per-round ratios to the floor sampled in the same round (drift between
rounds cancels); Ballast's ratio to each comparator is likewise the median of per-round
ratios (``headline.<group>.ratio.ballast/<other>.<graph>``). On SQLite only Ballast and
the floor run (the comparators are measured on PostgreSQL).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bench import graphs
from bench.core import FloorProbe, Reporter, log, reset_tables
from bench.stats import MIN_ROUNDS, describe, interleave, paired_ratios
from bench.targets import pair_case

if TYPE_CHECKING:  # bench.cases and bench.cluster load the engine and install signal handlers: not at import
    from bench.cluster import Cluster

CHAIN = 100
FANS = (10, 100)
DEFAULT_ROUNDS = 12
FLOOR_OPS = 100


@dataclass
class Contestant:
    """One timed thing: ``sample()`` runs it once and returns a checked sample in ``unit``;
    ``per_commit`` node commits (or floor commits) per sample unit, for the floor ratio."""

    system: str
    graph: str
    n: int
    unit: str
    per_commit: float
    sample: Callable[[], float]
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.system}.{self.graph}.{self.n}"


def _ballast_inprocess(version, check: Callable[[int], None], per: float) -> Callable[[], float]:
    from bench.cases import start_inprocess

    def sample() -> float:
        rid, seconds = start_inprocess(version)
        check(rid)
        return seconds * 1000 / per

    return sample


def _ballast_queued(version, check: Callable[[int], None], per: float, cluster: Cluster) -> Callable[[], float]:
    from bench.cases import db_seconds, start_queued, wait_terminal

    def sample() -> float:
        rid = start_queued(version)
        wait_terminal([rid], cluster=cluster, poll=0.01)
        check(rid)
        return db_seconds(rid)[0] * 1000 / per

    return sample


def _floor(probe: FloorProbe) -> Contestant:
    return Contestant("floor", "commit", FLOOR_OPS, "ms/commit", 1, lambda: probe.sample(FLOOR_OPS),
                      note=f"{FLOOR_OPS} single-row INSERT + COMMIT on one connection, same driver and database; wall time / {FLOOR_OPS}")


def _ballast(path: str, cluster: Cluster | None) -> list[Contestant]:
    from bench.cases import check_fanout, check_linear

    linear = graphs.publish(graphs.linear(CHAIN))
    fans = {size: graphs.publish(graphs.fanout(size)) for size in FANS}
    out = []

    def make(version, check, per):
        return _ballast_inprocess(version, check, per) if cluster is None else _ballast_queued(version, check, per, cluster)

    how = "run_start to drive_local return, in this process" if cluster is None else \
        "run created_at to finished_at through django-q2 (ORM broker) and a qcluster of 2 worker processes"
    out.append(Contestant("ballast", "linear", CHAIN, "ms/node", 1, make(linear, lambda r: check_linear(r, CHAIN), CHAIN),
                          note=f"{CHAIN} transform nodes in a chain; {how}; wall time / n"))
    for size, version in fans.items():
        out.append(Contestant("ballast", "fanout", size, "ms/run", size + 3,
                              make(version, lambda r, s=size: check_fanout(r, s), 1),
                              note=f"start -> {size} branches -> join -> end; {how}"))
    return out


def _comparators(rep: Reporter, db: str, group: str, opened: dict[str, Any]) -> list[Contestant]:
    """LangGraph (both groups) and DBOS (in-process group only) on PostgreSQL; a skip line
    for each that cannot run."""
    from bench.compare import DBOS_NOTES, LANGGRAPH_NOTES, DBOSBench, LangGraphBench, Unavailable

    out: list[Contestant] = []
    if db != "postgres":
        if group == "inprocess":
            rep.skip(f"headline.{group}.langgraph", "compared on PostgreSQL only (PostgresSaver)")
            rep.skip(f"headline.{group}.dbos", "compared on PostgreSQL only")
        return out
    try:
        lg = opened.get("langgraph") or LangGraphBench()
        opened["langgraph"] = lg
        out.append(Contestant("langgraph", "linear", CHAIN, "ms/node", 1, lg.linear(CHAIN), LANGGRAPH_NOTES["linear"]))
        out += [Contestant("langgraph", "fanout", size, "ms/run", size + 2, lg.fanout(size), LANGGRAPH_NOTES["fanout"]) for size in FANS]
    except Unavailable as exc:
        rep.skip(f"headline.{group}.langgraph", str(exc))
    if group == "inprocess":
        try:
            dbos = opened.get("dbos") or DBOSBench()
            opened["dbos"] = dbos
            out.append(Contestant("dbos", "linear", CHAIN, "ms/node", 1, dbos.linear(CHAIN), DBOS_NOTES["linear"]))
            out += [Contestant("dbos", "fanout", size, "ms/run", size + 1, dbos.fanout(size), DBOS_NOTES["fanout"]) for size in FANS]
        except Unavailable as exc:
            rep.skip(f"headline.{group}.dbos", str(exc))
    return out


def summarize(group: str, db: str, contestants: list[Contestant], samples: dict[str, list[float]],
              orders: list[list[str]], load: list[float]) -> list[dict[str, Any]]:
    """The result lines of one group's rounds: one per contestant (median, quartiles, IQR,
    the median per-round ratio to the floor) and one per Ballast/comparator pair (the
    median per-round ratio). Pure: no database (the harness tests call it)."""
    by_key = {c.key: c for c in contestants}
    floor = samples.get(f"floor.commit.{FLOOR_OPS}")
    at = datetime.now(UTC).isoformat(timespec="seconds")
    lines: list[dict[str, Any]] = []
    for key, values in samples.items():
        c = by_key[key]
        stats = describe(values)
        line: dict[str, Any] = {
            "case": f"headline.{group}.{c.system}.{c.graph}", "database": db, "n": c.n, "runs": len(values),
            "rounds": len(values), **{k: _r(v) for k, v in stats.items() if k != "count"}, "unit": c.unit,
            "samples": [_r(v) for v in values],
        }
        if floor and c.system != "floor":
            ratios = [(v / c.per_commit) / f for v, f in zip(values, floor, strict=True)]
            rs = describe(ratios)
            line.update(ratio_to_floor=_r(rs["median"], 2), ratio_to_floor_q1=_r(rs["q1"], 2),
                        ratio_to_floor_q3=_r(rs["q3"], 2), floor_ms=_r(statistics.median(floor)))
        elif c.system == "floor":
            line.update(ratio_to_floor=1.0, floor_ms=_r(stats["median"]))
        positions = [order.index(key) for order in orders]
        line.update(mean_position=round(statistics.mean(positions), 2), note=c.note, load1_rounds=[min(load), max(load)], at=at)
        lines.append(line)
    for c in contestants:
        if c.system != "ballast" or c.key not in samples:
            continue
        for other in ("langgraph", "dbos"):
            theirs = samples.get(f"{other}.{c.graph}.{c.n}")
            if theirs is None:
                continue
            ratios = paired_ratios(samples[c.key], theirs)
            stats = describe(ratios)
            lines.append({
                "case": pair_case(group, other, c.graph), "database": db, "n": c.n, "runs": len(ratios), "rounds": len(ratios),
                **{k: _r(v, 3) for k, v in stats.items() if k in ("median", "q1", "q3", "iqr", "p95")}, "unit": f"ballast/{other}",
                "ballast_median": _r(statistics.median(samples[c.key])), f"{other}_median": _r(statistics.median(theirs)),
                "faster": "ballast" if stats["median"] < 1 else other, "at": at,
            })
    return lines


def _r(value: Any, digits: int = 4) -> Any:
    return round(value, digits) if isinstance(value, float) else value


def graphs_only() -> set[str]:
    """The graphs a restricted headline times (``BENCH_HEADLINE_GRAPHS``, comma-separated:
    ``linear``, ``fanout``; empty: all), the floor always: a subset for A/B work on one
    case (``BENCH_HEADLINE_GRAPHS=fanout python -m bench headline``)."""
    import os

    return {g.strip() for g in os.environ.get("BENCH_HEADLINE_GRAPHS", "").split(",") if g.strip()}


def run_group(rep: Reporter, db: str, group: str, rounds: int, opened: dict[str, Any], cluster: Cluster | None = None) -> list[dict[str, Any]]:
    """Build the group's contestants, warm each up once, run ``rounds`` rotated rounds and
    write the lines; returns them."""
    probe = FloorProbe()
    try:
        contestants = [_floor(probe), *_ballast(group, cluster), *_comparators(rep, db, group, opened)]
        only = graphs_only()
        if only:
            contestants = [c for c in contestants if c.system == "floor" or c.graph in only]
        log(f"headline {group} on {db}: {len(contestants)} contestants x {rounds} rounds: " + ", ".join(c.key for c in contestants))
        for c in contestants:  # warm-up: imports, compiled graphs, connections, forked workers
            for _ in range(2 if cluster is not None and c.system == "ballast" and c.graph == "linear" else 1):  # both forked workers
                c.sample()
        load: list[float] = []
        started = time.monotonic()

        def progress(i: int, order: list[str]) -> None:
            import os

            load.append(round(os.getloadavg()[0], 2))
            if i and i % 4 == 0:
                log(f"headline {group} on {db}: round {i + 1}/{rounds} ({time.monotonic() - started:.0f} s)")

        samples, orders = interleave({c.key: c.sample for c in contestants}, rounds, on_round=progress)
    finally:
        probe.close()
    lines = summarize(group, db, contestants, samples, orders, load)
    rep.write({"case": f"headline.{group}.schedule", "database": db, "rounds": rounds, "orders": orders,
               "seconds": round(time.monotonic() - started, 1)})
    for line in lines:
        rep.write(line)
    return lines


def case_headline(rep: Reporter, db: str, n: int | None, runs: int, rounds: int = DEFAULT_ROUNDS) -> None:
    """Both groups on ``db`` (see the module docstring); ``rounds`` at least 10."""
    if rounds < MIN_ROUNDS:
        raise ValueError(f"the headline needs at least {MIN_ROUNDS} rounds, got {rounds}")
    from bench.cluster import Cluster

    opened: dict[str, Any] = {}
    try:
        reset_tables()
        run_group(rep, db, "inprocess", rounds, opened)
        if "dbos" in opened:  # DBOS's background threads poll its tables: not during the worker group
            opened.pop("dbos").close()
        reset_tables()
        with Cluster("headline", db, workers=2) as cluster:
            cluster.wait_ready()
            run_group(rep, db, "worker", rounds, opened, cluster=cluster)
    finally:
        for bench in opened.values():
            bench.close()
