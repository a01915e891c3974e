"""``python -m bench CASE [--db sqlite|postgres] [--n N] [--runs R]`` and ``python -m bench all``.

One JSON line per figure on stdout (progress on stderr), also appended to
``bench/results/<timestamp>.jsonl`` (or ``$BENCH_RESULTS_FILE``). See bench/__init__.py.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CASES = {
    "headline": "floor, Ballast, LangGraph and DBOS in one process, rotated order, >= 10 rounds: chain of 100, fan-out 10/100, in-process and through a qcluster",
    "scaling": "cost per step of a loop at 10/100/1,000 steps and of chains of 10/100/500 nodes",
    "floor": "single-row INSERT + COMMIT, same driver and database (the floor)",
    "linear": "100 no-op transform nodes in a chain: ms per node, in-process and through a qcluster",
    "fanout": "10 and 100 parallel no-op branches + join: ms per run, in-process and through a qcluster",
    "queries": "SQL statements per node commit (and per claim, per run create)",
    "recovery": "SIGKILL a qcluster mid-step: restart to re-run, and takeover by a live stand-by",
    "recovery_busy": "recovery with 30 other runs in flight (--n): restart to re-run, and takeover by a busy same-host stand-by",
    "throughput": "nodes/s with 1 and 2 qcluster worker processes over 200 concurrent runs",
    "approvals": "10,000 runs waiting at approval gates: leases, workers, memory; inbox page latency",
    "inbox": "the approvals inbox with 10,000 waiting requests: server time per page of each list, counts, search, one item, the live socket's reads",
    "live": "step commit to WebSocket client latency (daphne + qcluster subprocesses), p50 and p95",
    "live_events": "live run events: commit-to-client p50/p95 with Redis push and the embedded poller; queries/s with 1 and 200 sockets",
    "profile": "pyinstrument profile of the in-process linear case, grouped by library",
    "langgraph": "the linear and fan-out graphs in LangGraph with PostgresSaver, durability 'sync'",
    "dbos": "the linear and fan-out graphs as DBOS steps in a workflow",
    "statesize": "a chain with a 1 KB and a 1 MB state (a node updating one small key): ms and WAL bytes per node",
    "builder": "the builder in headless Chromium: 300-node graph open to interactive, drag frame times, script sizes",
    "run_list": "the run list with 100,000 runs: ms and statements per API page (first, filtered, searched, deep keyset), superuser and operator",
    "startup": "a restarted qcluster's start, phase by phase (interpreter, Django, django-q2's processes, recovery, first claim), 30 runs in flight",
    "fixed": "per-run fixed cost (start -> end) in-process and through a qcluster, worker connections kept vs per task",
    "mcp": "MCP tool-call overhead per call over the tool's own time, stdio and Streamable HTTP (a session per call, as a step)",
    "webhooks": "signed webhook delivery to run committed (daphne, a real HTTP client), p50/p95; deliveries accepted per second by 4 concurrent clients",
    "schedules": "schedule fire lag with 1,000 schedules due at once (--n), one qcluster: tick to fired_at and to the first step's claim, p50/p95",
    "web": "the web process under load: run list, inbox and run page API reads by 1/50/200 locust users (--users), 1,000 open WebSockets (--sockets) on one daphne, PostgreSQL + Redis",
    "subgraph": "a subgraph node calling a one-transform child graph vs the transform inline, through a qcluster: overhead per call",
}

# What `make bench` (``python -m bench all``) runs: (case, databases, extra args). Sized to
# finish in well under 30 minutes on a 2-core machine; qcluster cases use the default
# sizes. The headline replaces the separate linear, fanout, langgraph and dbos cases (they
# still run alone: ``python -m bench linear``).
PLAN: list[tuple[str, tuple[str, ...], list[str]]] = [
    ("headline", ("postgres", "sqlite"), []),
    # What-if: the configuration proposed in docs/performance.md (bench/settings_tuned.py).
    ("linear", ("postgres",), ["--settings", "tuned", "--path", "inprocess"]),
    ("scaling", ("postgres", "sqlite"), []),
    ("statesize", ("postgres", "sqlite"), []),  # 1 KB vs 1 MB state (the per-key state branch)
    ("queries", ("postgres", "sqlite"), []),
    ("fixed", ("postgres", "sqlite"), []),
    ("profile", ("postgres",), []),
    ("recovery", ("postgres", "sqlite"), []),
    ("recovery_busy", ("postgres", "sqlite"), []),
    ("throughput", ("postgres", "sqlite"), []),
    ("approvals", ("postgres", "sqlite"), []),
    ("inbox", ("postgres", "sqlite"), []),
    ("live", ("postgres", "sqlite"), []),
    ("live_events", ("postgres", "sqlite"), []),
    ("run_list", ("postgres", "sqlite"), []),
    ("mcp", ("sqlite",), []),  # no database in the call: one pass
    ("webhooks", ("postgres", "sqlite"), []),
    ("schedules", ("postgres",), []),
    ("subgraph", ("postgres",), []),
]



def plan_steps(steps: list[tuple[str, tuple[str, ...], list[str]]], known: dict[str, str]) -> list[tuple[str, tuple[str, ...], list[str]]]:
    """``steps`` without cases this checkout does not have and without repeats (the same
    case with the same arguments listed twice, as merging two branches that each added
    it leaves it), in their first order."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    out = []
    for case, dbs, extra in steps:
        key = (case, tuple(extra))
        if case in known and key not in seen:
            seen.add(key)
            out.append((case, dbs, extra))
    return out


# statesize and recovery_busy arrive with the per-key state and doorbell branches.
PLAN = plan_steps(PLAN, CASES)

# The headline subset (``make bench-headline``, under 5 minutes): the interleaved
# comparison on PostgreSQL, where the comparators run (``python -m bench headline --db
# both`` adds SQLite's Ballast figures; ``make bench`` has them).
HEADLINE_PLAN: list[tuple[str, tuple[str, ...], list[str]]] = [("headline", ("postgres",), [])]
# Issue 11: make bench under 30 minutes, the headline subset under 5; a run over its
# budget says so at the end (with its slowest steps and the load average).
ALL_BUDGET_S = 30 * 60
HEADLINE_BUDGET_S = 5 * 60


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Ballast benchmarks. Cases: " + "; ".join(f"{k}: {v}" for k, v in CASES.items()),
    )
    parser.add_argument("case", choices=[*CASES, "all", "headline-all", "report"],
                        help="a case; all (what `make bench` runs); headline-all (the headline on both databases, "
                             "one results file); report [FILE] [--write] (a results file as Markdown)")
    parser.add_argument("file", nargs="?", help="report: the results file (default: the newest)")
    parser.add_argument("--db", choices=["postgres", "sqlite", "both"], default=None,
                        help="database (default: postgres for one case, both for all)")
    parser.add_argument("--n", type=int, default=None, help="size: nodes (linear), branches (fanout), runs (throughput, approvals)")
    parser.add_argument("--runs", type=int, default=5, help="timed repetitions after the warm-up (at least 5)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="headline: rotated rounds (at least 10, default 12)")
    parser.add_argument("--users", default="1,50,200", help="web: concurrent users, comma separated")
    parser.add_argument("--seconds", type=int, default=30, help="web: seconds per load run (and sockets held open)")
    parser.add_argument("--sockets", type=int, default=1000, help="web: WebSockets opened on one web process (0: none)")
    parser.add_argument("--pooler", type=int, default=0, help="web: reach PostgreSQL through pgbouncer (transaction mode) with this pool size")
    parser.add_argument("--write", action="store_true",
                        help="report: regenerate the figures in docs/performance.md and README.md from FILE")
    parser.add_argument("--path", choices=["inprocess", "qcluster", "both"], default="both", help="linear/fanout execution path")
    parser.add_argument("--settings", choices=["default", "tuned"], default="default",
                        help="tuned: bench/settings_tuned.py, the proposed configuration (figures get a .tuned suffix)")
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error("--runs must be at least 5 (medians of fewer repetitions are noise)")
    from bench.stats import MIN_ROUNDS

    if args.rounds is not None and args.rounds < MIN_ROUNDS:
        parser.error(f"--rounds must be at least {MIN_ROUNDS} (the headline's medians and quartiles need them)")
    return args


def run_case(args: argparse.Namespace) -> int:
    db = args.db or "postgres"
    if db == "both":
        return run_all(args, databases=("postgres", "sqlite"), cases=[args.case])
    from bench import core

    core.use_settings(args.settings)
    if args.case == "web":  # this process's commits push their events to the web process's sockets (bench/webload.py)
        os.environ["BALLAST_CHANNELS_REDIS_URL"] = os.environ.get("BENCH_WEB_REDIS_URL", "redis://127.0.0.1:6379/7")
    core.setup(db)
    from bench import (
        anatomy,
        browser,
        cases,
        compare,
        fixed,
        headline,
        inbox,
        live_events,
        mcp_overhead,
        run_list,
        scaling,
        startup,
        trigger_cases,
        webload,
    )

    rep = core.Reporter(db)
    paths = ("inprocess", "qcluster") if args.path == "both" else (args.path,)
    functions = {
        "headline": lambda r, d, n, k: headline.case_headline(r, d, n, k, rounds=args.rounds or headline.DEFAULT_ROUNDS),
        "scaling": scaling.case_scaling,
        "floor": cases.case_floor,
        "linear": lambda r, d, n, k: cases.case_linear(r, d, n, k, paths=paths),
        "fanout": lambda r, d, n, k: cases.case_fanout(r, d, n, k, paths=paths),
        "queries": anatomy.case_queries,
        "recovery": cases.case_recovery,
        "recovery_busy": cases.case_recovery_busy,
        "throughput": cases.case_throughput,
        "approvals": cases.case_approvals,
        "inbox": inbox.case_inbox,
        "live": cases.case_live,
        "live_events": live_events.case_live_events,
        "profile": anatomy.case_profile,
        "langgraph": compare.case_langgraph,
        "dbos": compare.case_dbos,
        "builder": browser.case_builder,
        "statesize": cases.case_state_size,
        "fixed": fixed.case_fixed,
        "run_list": run_list.case_run_list,
        "startup": startup.case_startup,
        "mcp": mcp_overhead.case_mcp,
        "webhooks": trigger_cases.case_webhooks,
        "schedules": trigger_cases.case_schedules,
        "subgraph": trigger_cases.case_subgraph,
        "web": lambda r, d, n, k: webload.case_web(r, d, n, k, users=webload.parse_users(args.users), seconds=args.seconds, sockets=args.sockets,
                                                   pooler=args.pooler),
    }
    started = time.monotonic()
    if args.case not in ("floor", "builder", "headline"):  # the headline samples the floor in every round
        rep.floor()
        core.log(f"{args.case} on {db}: floor {rep.floor_ms:.3f} ms")
    try:
        functions[args.case](rep, db, args.n, args.runs)
    except core.CheckFailed as exc:
        core.log(f"CHECK FAILED in {args.case} on {db}: {exc}")
        rep.write({"case": args.case, "database": db, "failed": str(exc)})
        return 1
    core.log(f"{args.case} on {db} took {time.monotonic() - started:.1f} s")
    print_targets(rep, db)
    return 0


def print_targets(rep, db: str) -> None:
    """After a case: each target that reads a figure this process emitted, judged over the
    whole results file so far (the headline's LangGraph figures, another process's
    figures), printed as a line on stderr and written as a ``target.*`` line."""
    from bench import targets
    from bench.core import log

    cases = {d.get("case") for d in rep.emitted}
    lines = [json.loads(t) for t in rep.path.read_text().splitlines() if t.strip()]
    for verdict in targets.for_cases(cases, [db], lines):
        log("TARGET " + verdict.words())
        rep.write(verdict.line())


# --------------------------------------------------------------------------- all


def _pg_version() -> str | None:
    try:
        import psycopg

        from bench.core import PG_SERVER_URL

        with psycopg.connect(PG_SERVER_URL) as conn:
            return conn.execute("SHOW server_version").fetchone()[0]
    except Exception as exc:  # the PostgreSQL cases will fail loudly on their own
        return f"unavailable: {exc}"


def run_all(args: argparse.Namespace, databases: tuple[str, ...] | None = None, cases: list[str] | None = None) -> int:
    from bench.core import RESULTS_DIR, log, machine

    if databases is None:
        databases = ("postgres", "sqlite") if args.db in (None, "both") else (args.db,)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = Path(os.environ.get("BENCH_RESULTS_FILE") or RESULTS_DIR / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.jsonl")
    env = dict(os.environ, BENCH_RESULTS_FILE=str(path))
    header = {"case": "machine", **machine(), "postgres": _pg_version(), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(json.dumps(header), flush=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(header) + "\n")
    if cases == ["headline-all"]:
        plan = HEADLINE_PLAN
    else:
        plan = PLAN if cases is None else [(c, databases, []) for c in cases]
    failures = []
    durations: list[dict] = []
    started = time.monotonic()
    for case, dbs, extra in plan:
        for db in dbs:
            if db not in databases:
                continue
            cmd = [sys.executable, "-m", "bench", case, "--db", db, "--runs", str(args.runs), *extra]
            if "--path" not in extra:
                cmd += ["--path", args.path]
            if args.rounds is not None:
                cmd += ["--rounds", str(args.rounds)]
            if args.settings != "default" and "--settings" not in extra:
                cmd += ["--settings", args.settings]
            if args.n is not None and cases is not None:
                cmd += ["--n", str(args.n)]
            log(f"--- {case} on {db} ({time.monotonic() - started:.0f} s elapsed)")
            t_case = time.monotonic()
            rc = subprocess.call(cmd, env=env)
            durations.append({"case": case, "database": db, "extra": extra, "seconds": round(time.monotonic() - t_case, 1), "exit": rc})
            if rc:
                failures.append(f"{case}/{db} (exit {rc})")
    from bench import targets

    lines = [json.loads(t) for t in path.read_text().splitlines() if t.strip()]
    ran = {db for _, dbs, _ in plan for db in dbs if db in databases}
    verdicts = [v for v in targets.judge(lines) if v.database in ran]
    log("targets (issue 11):")
    for verdict in verdicts:
        log("  " + verdict.words())
    elapsed = time.monotonic() - started
    budget = HEADLINE_BUDGET_S if plan is HEADLINE_PLAN else (ALL_BUDGET_S if plan is PLAN else None)
    if budget and elapsed > budget:
        log(f"OVER BUDGET: {elapsed:.0f} s, the budget is {budget} s (load average {os.getloadavg()[0]:.1f}); slowest: "
            + ", ".join(f"{d['case']}/{d['database']} {d['seconds']:.0f} s" for d in sorted(durations, key=lambda d: -d["seconds"])[:3]))
    footer = {"case": "elapsed", "seconds": round(elapsed, 1), "plan": [c for c, _, _ in plan], "databases": list(databases),
              "budget_seconds": budget, "steps": durations}
    print(json.dumps(footer), flush=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(footer) + "\n")
    log(f"all done in {elapsed:.0f} s; results in {path}; regenerate the docs with: "
        f".venv/bin/python -m bench report {path} --write")
    if failures:
        log("FAILED: " + ", ".join(failures))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.case == "report":
        from bench.report import latest, render, write_docs

        path = Path(args.file) if args.file else latest()
        if args.write:
            for changed in write_docs(path):
                print(f"regenerated {changed} from {path}")
            return 0
        print(render(path), end="")
        return 0
    if args.case == "all":
        return run_all(args)
    if args.case == "headline-all":
        return run_all(args, cases=["headline-all"])
    return run_case(args)


if __name__ == "__main__":
    sys.exit(main())
