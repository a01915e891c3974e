"""Where a restarted worker's first second goes: every phase of ``manage.py qcluster``'s start, timed from its spawn.

``python -m bench startup`` repeats recovery_busy's restart (a qcluster SIGKILLed while
it holds t2's lease, ``--n`` other runs, default 30, started in the meantime) with the
fresh qcluster run through ``bench/startup_trace.py``, which writes a timestamp at each
phase (interpreter up, Django set up, sentinel forked, workers and pusher entered, the
recovery supervisor's first pass, the first claims). One figure per phase: its median
offset from the spawn in seconds, then the interrupted step's re-run.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from bench import graphs
from bench.cases import RECOVERY_NODE, restart_busy_once
from bench.cluster import Cluster
from bench.core import REPO, WORK_DIR, Reporter, reset_tables, summary

# The phases in the order a start goes through them (bench/startup_trace.py); the first
# occurrence in any process of the cluster counts.
PHASES = (
    "boot", "setup", "setup_done", "handle", "cluster_start", "sentinel", "broker_ping_done", "spawn_done",
    "worker", "monitor", "pusher", "guard", "cluster_started", "heartbeat", "recover", "recover_done",
    "dequeue", "task", "claim_call", "claimed",
)


class TracedCluster(Cluster):
    """A qcluster started through bench/startup_trace.py, writing its phases to ``trace``."""

    def __init__(self, *args, trace: Path, **kwargs):
        super().__init__(*args, **kwargs)
        self.trace = trace
        self.extra_env["BENCH_TRACE_FILE"] = str(trace)

    def command(self) -> list[str]:
        return [sys.executable, str(REPO / "bench" / "startup_trace.py")]


def phases(trace: Path, t0: float) -> tuple[dict[str, float], dict[str, float]]:
    """(first time of each phase in ``trace``, in seconds after ``t0``; the CPU seconds
    the process that reached it had used by then). ``rerun_claimed``: the first claim of
    the interrupted step (attempt 2 of t2)."""
    first: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for line in trace.read_text().splitlines():
        row = json.loads(line)
        ev, t = row["ev"], row["t"] - t0
        if ev == "claimed" and row.get("node_id") == RECOVERY_NODE and row.get("attempt") == 2:
            ev = "rerun_claimed"
        if ev not in first or t < first[ev]:
            first[ev] = t
            cpu[ev] = row["cpu"]
    return first, cpu


def case_startup(rep: Reporter, db: str, n: int | None, runs: int, chain: int = 10) -> None:
    count = 30 if n is None else n
    version = graphs.publish(graphs.linear(3))
    busy_version = graphs.publish(graphs.linear(chain))
    reset_tables()
    samples: dict[str, list[float]] = defaultdict(list)
    cpu_samples: dict[str, list[float]] = defaultdict(list)
    for i in range(runs + 1):  # the first is a warm-up
        trace = WORK_DIR / f"startup-{db}.jsonl"
        trace.unlink(missing_ok=True)
        t0, started = restart_busy_once(db, version, busy_version, count, chain, TracedCluster("startup", db, workers=2, trace=trace))
        if i:
            at, cpu = phases(trace, t0)
            for name, t in at.items():
                samples[name].append(t)
                cpu_samples[name].append(cpu[name])
            samples["rerun_started"].append(started - t0)
    for name in (*PHASES, "rerun_claimed", "rerun_started"):
        if samples.get(name):
            rep.emit(f"startup.{name}", n=count, runs=len(samples[name]), samples=samples[name], unit="s",
                     cpu_s=summary(cpu_samples[name])[0] if cpu_samples.get(name) else None,
                     note="seconds from the spawn of `manage.py qcluster` (bench/startup_trace.py); cpu_s: CPU seconds "
                          "the process that reached the phase had used (a forked child counts from its fork)")
    med = {name: summary(v)[0] for name, v in samples.items()}
    rep.emit("startup.rerun", n=count, runs=runs, samples=samples["rerun_started"], unit="s", target_s=1.0,
             phases={k: round(v, 3) for k, v in sorted(med.items(), key=lambda kv: kv[1])},
             note=f"restart with {count} other {chain}-node runs in flight: spawn to t2's re-run, phases by median")
