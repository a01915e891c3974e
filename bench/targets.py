"""Issue 11's targets, each read from the figures of a results file and judged met or not.

Pure Python over result lines (dicts as ``bench/results/*.jsonl`` holds them): no Django,
no database, so the judgement is the same when a case prints it, when ``python -m bench
report`` renders it and in the harness tests.

A target names the figures it reads by case, database and n; when one is missing (the
case did not run, was skipped or failed) it is reported as ``met: None`` ("no figure"),
never as met. Limits come from issue 11 ("Targets, in that benchmark on PostgreSQL"); the
recovery targets apply on both databases; the flatness and state-size targets compare a
database with itself, so they are judged on SQLite too; the rest are PostgreSQL only.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Line = dict[str, Any]


class Figures:
    """The figure lines of a results file, looked up by (case, database, n); the last
    line wins when a case ran twice. Lines without a ``median`` (skips, failures, the
    machine header, target verdicts) are not figures."""

    def __init__(self, lines: Iterable[Line]):
        self.lines = [d for d in lines if isinstance(d, dict)]
        self._index: dict[tuple[str, str | None, int | None], Line] = {}
        for d in self.lines:
            if d.get("median") is not None and not str(d.get("case", "")).startswith("target."):
                self._index[(d["case"], d.get("database"), d.get("n"))] = d

    def get(self, case: str, db: str, n: int | None = None) -> Line | None:
        """The figure of ``case`` on ``db`` (with size ``n`` when given, else any size)."""
        if n is not None:
            return self._index.get((case, db, n))
        found = [d for (c, d_db, _), d in self._index.items() if c == case and d_db == db]
        return found[-1] if found else None

    def sizes(self, case: str, db: str) -> dict[int, Line]:
        """Every size ``n`` of ``case`` on ``db``, by n."""
        return {n: d for (c, d_db, n), d in self._index.items() if c == case and d_db == db and n is not None}


@dataclass(frozen=True)
class Verdict:
    """One target judged on one database: ``value`` against ``limit`` (met when
    value <= limit), ``measured`` says it in words with the figures it came from."""

    target: str
    text: str
    database: str
    value: float | None
    limit: float | None
    measured: str
    met: bool | None

    def line(self) -> Line:
        return {"case": f"target.{self.target}", "database": self.database, "text": self.text, "value": self.value,
                "limit": self.limit, "measured": self.measured, "met": self.met}

    def words(self) -> str:
        """One line: the target, the database, the figures and met / NOT MET (nothing
        more when a figure is missing or the target has no limit)."""
        head = f"{self.text} ({self.database}): {self.measured}"
        if self.met is None:
            return head if self.limit is not None or self.measured.startswith("no figure") else f"{head} (reported, no limit)"
        return f"{head}: {'met' if self.met else 'NOT MET'}"


# A measure reads the figures of one database: (value compared with the limit, words) or
# None when a figure it needs is missing.
Measure = Callable[[Figures, str], tuple[float | None, str] | None]


@dataclass(frozen=True)
class Target:
    id: str
    text: str
    limit: float | None  # None: a figure to report, no limit in the issue
    databases: tuple[str, ...]
    measure: Measure
    cases: tuple[str, ...]  # the case names it reads (to print it after those cases)

    def judge(self, figures: Figures, db: str) -> Verdict:
        got = self.measure(figures, db)
        if got is None:
            return Verdict(self.id, self.text, db, None, self.limit, "no figure (case not run, skipped or failed)", None)
        value, words = got
        met = None if self.limit is None or value is None else value <= self.limit
        return Verdict(self.id, self.text, db, value, self.limit, words, met)


def _x(value: float) -> str:
    return f"{value:.2f}x"


def _num(value: float) -> str:
    """A figure for a sentence: thousands separated from 100 on, else 3 significant digits."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _floor_ratio(case: str, n: int, limit: float) -> Measure:
    def measure(f: Figures, db: str) -> tuple[float | None, str] | None:
        d = f.get(case, db, n)
        if d is None or d.get("ratio_to_floor") is None:
            return None
        ratio = float(d["ratio_to_floor"])
        return ratio, f"{_x(ratio)} the floor ({d['median']:.3f} {d.get('unit', '')}, floor {d.get('floor_ms', 0):.3f} ms; limit {_x(limit)})"
    return measure


def pair_case(group: str, other: str, graph: str) -> str:
    """The case name of the headline's per-round ratio Ballast/``other`` on ``graph``."""
    return f"headline.{group}.ratio.ballast/{other}.{graph}"


def _pair(group: str, graph: str, n: int, other: str, limit: float | None) -> Measure:
    """Ballast over a comparator in the same headline group: the median of the per-round
    ratios when the headline wrote it, else the ratio of the two medians."""
    def measure(f: Figures, db: str) -> tuple[float | None, str] | None:
        a = f.get(f"headline.{group}.ballast.{graph}", db, n)
        b = f.get(f"headline.{group}.{other}.{graph}", db, n)
        if a is None or b is None:
            return None
        pair = f.get(pair_case(group, other, graph), db, n)
        ratio = float(pair["median"]) if pair else a["median"] / b["median"]
        how = f"median of per-round ratios, IQR {_fmt_iqr(pair)}" if pair else "ratio of medians"
        bound = f"limit {_x(limit)}" if limit is not None else "no limit"
        return ratio, f"{_x(ratio)} ({_num(a['median'])} vs {_num(b['median'])} {a.get('unit', '')}; {how}; {bound})"
    return measure


def _state_ratio(limit: float) -> Measure:
    """The state-size case (``statesize``, bench/cases.py): per-node cost with the 1 MB
    state over the 1 KB one, and the WAL bytes per node of each when measured."""
    def measure(f: Figures, db: str) -> tuple[float | None, str] | None:
        big, small = f.get("statesize.1mb", db), f.get("statesize.1kb", db)
        if big is None or small is None or not small["median"]:
            return None
        ratio = big["median"] / small["median"]
        wal = ""
        if big.get("wal_bytes_per_node") is not None and small.get("wal_bytes_per_node") is not None:
            wal = f"; WAL {small['wal_bytes_per_node']:,.0f} vs {big['wal_bytes_per_node']:,.0f} bytes per node"
        return ratio, (f"{_x(ratio)} (1 MB vs 1 KB state: {big['median']:.3f} vs {small['median']:.3f} {big.get('unit', '')}"
                       f"{wal}; limit {_x(limit)})")
    return measure


def _flat(case: str, limit: float) -> Measure:
    """Largest over smallest per-node cost across the sizes of ``case`` (at least 3 sizes)."""
    def measure(f: Figures, db: str) -> tuple[float | None, str] | None:
        sizes = f.sizes(case, db)
        if len(sizes) < 3:
            return None
        values = {n: d["median"] for n, d in sorted(sizes.items())}
        spread = max(values.values()) / min(values.values())
        listed = ", ".join(f"{v:.3f} at {n}" for n, v in values.items())
        return spread, f"max/min {_x(spread)} ({listed} {next(iter(sizes.values())).get('unit', '')}; limit {_x(limit)})"
    return measure


def _seconds(case: str, limit: float) -> Measure:
    def measure(f: Figures, db: str) -> tuple[float | None, str] | None:
        d = f.get(case, db)
        if d is None:
            return None
        inflight = d.get("others", d.get("runs_in_flight"))
        extra = f", {inflight} other runs in flight" if inflight is not None else ""
        return float(d["median"]), f"{d['median']:.3f} s (IQR {_fmt_iqr(d)}{extra}; limit {limit:g} s)"
    return measure


def _throughput(f: Figures, db: str) -> tuple[float | None, str] | None:
    one, two = f.get("throughput.workers1", db), f.get("throughput.workers2", db)
    if one is None or two is None:
        return None
    runs1, runs2 = one.get("runs_per_s"), two.get("runs_per_s")
    if runs1 is None or runs2 is None:
        return None
    return None, f"{runs1:.1f} runs/s with 1 worker process, {runs2:.1f} with 2 ({runs2 / runs1:.2f}x)"


def _fmt_iqr(d: Line) -> str:
    if d.get("q1") is None or d.get("q3") is None:
        return "-"
    return f"{d['q1']:.3f}-{d['q3']:.3f}"


PG = ("postgres",)
BOTH = ("postgres", "sqlite")
H = "headline.inprocess."
W = "headline.worker."

TARGETS: tuple[Target, ...] = (
    Target("chain.inprocess", "100-node chain in-process at most 2x the floor", 2.0, PG,
           _floor_ratio(H + "ballast.linear", 100, 2.0), (H + "ballast.linear",)),
    Target("chain.qcluster", "100-node chain through a qcluster worker at most 2.5x the floor", 2.5, PG,
           _floor_ratio(W + "ballast.linear", 100, 2.5), (W + "ballast.linear",)),
    Target("chain.vs_langgraph", "100-node chain in-process vs LangGraph (about 0.4x)", None, PG,
           _pair("inprocess", "linear", 100, "langgraph", None), (H + "ballast.linear",)),
    Target("fanout10.inprocess", "fan-out of 10 in-process no slower than LangGraph", 1.0, PG,
           _pair("inprocess", "fanout", 10, "langgraph", 1.0), (H + "ballast.fanout",)),
    Target("fanout100.inprocess", "fan-out of 100 in-process no slower than LangGraph", 1.0, PG,
           _pair("inprocess", "fanout", 100, "langgraph", 1.0), (H + "ballast.fanout",)),
    Target("fanout10.qcluster", "fan-out of 10 through workers at most 3x LangGraph", 3.0, PG,
           _pair("worker", "fanout", 10, "langgraph", 3.0), (W + "ballast.fanout",)),
    Target("fanout100.qcluster", "fan-out of 100 through workers at most 3x LangGraph", 3.0, PG,
           _pair("worker", "fanout", 100, "langgraph", 3.0), (W + "ballast.fanout",)),
    Target("state.1mb", "per-node cost with a 1 MB state at most 1.3x a 1 KB state", 1.3, BOTH,
           _state_ratio(1.3), ("statesize.1mb", "statesize.1kb")),
    Target("flat.loop", "1,000-step loop: cost per node flat within 10% from 10 to 1,000 steps", 1.10, BOTH,
           _flat("scaling.loop", 1.10), ("scaling.loop",)),
    Target("flat.chain", "500-node chain: cost per node flat within 10% from 10 to 500 nodes", 1.10, BOTH,
           _flat("scaling.chain", 1.10), ("scaling.chain",)),
    # With 30 other runs in flight: the recovery_busy case (bench/cases.py).
    Target("recovery.restart", "worker start to the interrupted step running again under 1 s, 30 runs in flight", 1.0, BOTH,
           _seconds("recovery.restart_busy", 1.0), ("recovery.restart_busy",)),
    Target("recovery.takeover", "a live worker takes over a dead same-host worker's step under 1 s, 30 runs in flight", 1.0, BOTH,
           _seconds("recovery.takeover.same_host_busy", 1.0), ("recovery.takeover.same_host_busy",)),
    Target("throughput", "runs per second, 5-node graph, 1 and 2 worker processes", None, BOTH,
           _throughput, ("throughput.workers1", "throughput.workers2")),
)


def judge(lines: Iterable[Line], targets: Iterable[Target] = TARGETS) -> list[Verdict]:
    """Every target on each of its databases, from these result lines."""
    figures = Figures(lines)
    return [t.judge(figures, db) for t in targets for db in t.databases]


def for_cases(cases: Iterable[str], databases: Iterable[str], lines: Iterable[Line]) -> list[Verdict]:
    """The verdicts of the targets that read any of ``cases`` (the case names a process just
    emitted), on ``databases``: what a case prints after its figures."""
    emitted = set(cases)
    chosen = [t for t in TARGETS if emitted & set(t.cases)]
    dbs = set(databases)
    return [v for v in judge(lines, chosen) if v.database in dbs]
