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
    "floor": "single-row INSERT + COMMIT, same driver and database (the floor)",
    "linear": "100 no-op transform nodes in a chain: ms per node, in-process and through a qcluster",
    "fanout": "10 and 100 parallel no-op branches + join: ms per run, in-process and through a qcluster",
    "queries": "SQL statements per node commit (and per claim, per run create)",
    "recovery": "SIGKILL a qcluster mid-step: restart to re-run, and takeover by a live stand-by",
    "throughput": "nodes/s with 1 and 2 qcluster worker processes over 200 concurrent runs",
    "approvals": "10,000 runs waiting at approval gates: leases, workers, memory; inbox page latency",
    "live": "step commit to WebSocket client latency (daphne + qcluster subprocesses), p50 and p95",
    "profile": "pyinstrument profile of the in-process linear case, grouped by library",
    "langgraph": "the linear and fan-out graphs in LangGraph with PostgresSaver, durability 'sync'",
    "dbos": "the linear and fan-out graphs as DBOS steps in a workflow",
    "statesize": "a chain with a 1 KB and a 1 MB state (a node updating one small key): ms and WAL bytes per node",
    "builder": "the builder in headless Chromium: 300-node graph open to interactive, drag frame times, script sizes",
}

# What `make bench` (``python -m bench all``) runs: (case, databases, extra args). Sized to
# finish in about 15 minutes on a 2-core machine; qcluster cases use the default sizes.
PLAN: list[tuple[str, tuple[str, ...], list[str]]] = [
    ("floor", ("postgres", "sqlite"), []),
    ("linear", ("postgres", "sqlite"), []),
    # What-if right after the figure it changes: the configuration proposed in
    # docs/performance.md (bench/settings_tuned.py), minutes apart, not a quarter-hour.
    ("linear", ("postgres",), ["--settings", "tuned"]),
    ("langgraph", ("postgres",), []),
    ("dbos", ("postgres",), []),
    ("fanout", ("postgres", "sqlite"), []),
    ("queries", ("postgres", "sqlite"), []),
    ("statesize", ("postgres", "sqlite"), []),
    ("profile", ("postgres",), []),
    ("recovery", ("postgres", "sqlite"), []),
    ("throughput", ("postgres", "sqlite"), []),
    ("throughput", ("postgres",), ["--settings", "tuned"]),
    ("approvals", ("postgres", "sqlite"), []),
    ("live", ("postgres", "sqlite"), []),
]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Ballast benchmarks. Cases: " + "; ".join(f"{k}: {v}" for k, v in CASES.items()),
    )
    parser.add_argument("case", choices=[*CASES, "all", "report"],
                        help="a case; all (what `make bench` runs); report [FILE] (a results file as Markdown)")
    parser.add_argument("file", nargs="?", help="report: the results file (default: the newest)")
    parser.add_argument("--db", choices=["postgres", "sqlite", "both"], default=None,
                        help="database (default: postgres for one case, both for all)")
    parser.add_argument("--n", type=int, default=None, help="size: nodes (linear), branches (fanout), runs (throughput, approvals)")
    parser.add_argument("--runs", type=int, default=5, help="timed repetitions after the warm-up (at least 5)")
    parser.add_argument("--path", choices=["inprocess", "qcluster", "both"], default="both", help="linear/fanout execution path")
    parser.add_argument("--settings", choices=["default", "tuned"], default="default",
                        help="tuned: bench/settings_tuned.py, the proposed configuration (figures get a .tuned suffix)")
    args = parser.parse_args(argv)
    if args.runs < 5:
        parser.error("--runs must be at least 5 (medians of fewer repetitions are noise)")
    return args


def run_case(args: argparse.Namespace) -> int:
    db = args.db or "postgres"
    if db == "both":
        return run_all(args, databases=("postgres", "sqlite"), cases=[args.case])
    from bench import core

    core.use_settings(args.settings)
    core.setup(db)
    from bench import anatomy, browser, cases, compare

    rep = core.Reporter(db)
    paths = ("inprocess", "qcluster") if args.path == "both" else (args.path,)
    functions = {
        "floor": cases.case_floor,
        "linear": lambda r, d, n, k: cases.case_linear(r, d, n, k, paths=paths),
        "fanout": lambda r, d, n, k: cases.case_fanout(r, d, n, k, paths=paths),
        "queries": anatomy.case_queries,
        "recovery": cases.case_recovery,
        "throughput": cases.case_throughput,
        "approvals": cases.case_approvals,
        "live": cases.case_live,
        "profile": anatomy.case_profile,
        "langgraph": compare.case_langgraph,
        "dbos": compare.case_dbos,
        "builder": browser.case_builder,
        "statesize": cases.case_state_size,
    }
    started = time.monotonic()
    if args.case not in ("floor", "builder"):
        rep.floor()
        core.log(f"{args.case} on {db}: floor {rep.floor_ms:.3f} ms")
    try:
        functions[args.case](rep, db, args.n, args.runs)
    except core.CheckFailed as exc:
        core.log(f"CHECK FAILED in {args.case} on {db}: {exc}")
        rep.write({"case": args.case, "database": db, "failed": str(exc)})
        return 1
    core.log(f"{args.case} on {db} took {time.monotonic() - started:.1f} s")
    return 0


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
    plan = PLAN if cases is None else [(c, databases, []) for c in cases]
    failures = []
    started = time.monotonic()
    for case, dbs, extra in plan:
        for db in dbs:
            if db not in databases:
                continue
            cmd = [sys.executable, "-m", "bench", case, "--db", db, "--runs", str(args.runs), "--path", args.path, *extra]
            if args.settings != "default" and "--settings" not in extra:
                cmd += ["--settings", args.settings]
            if args.n is not None and cases is not None:
                cmd += ["--n", str(args.n)]
            log(f"--- {case} on {db} ({time.monotonic() - started:.0f} s elapsed)")
            rc = subprocess.call(cmd, env=env)
            if rc:
                failures.append(f"{case}/{db} (exit {rc})")
    for line in ratios(path):
        print(json.dumps(line), flush=True)
        with open(path, "a") as fh:
            fh.write(json.dumps(line) + "\n")
    log(f"all done in {time.monotonic() - started:.0f} s; results in {path}")
    if failures:
        log("FAILED: " + ", ".join(failures))
        return 1
    return 0


def ratios(path: Path) -> list[dict]:
    """Ballast/LangGraph and Ballast/DBOS from the lines of one results file: the plain
    ratio of medians, and the ratio of ratios-to-floor (each process's own floor, which
    cancels drift between the processes)."""
    lines = [json.loads(t) for t in path.read_text().splitlines() if t.strip()]
    figures = {(d["case"], d.get("database"), d.get("n")): d for d in lines if "median" in d}
    out = []
    pairs = [
        ("linear", "linear.inprocess", 100),
        ("linear (qcluster)", "linear.qcluster", 100),
        ("linear (tuned settings)", "linear.inprocess.tuned", 100),
        ("fanout", "fanout.inprocess", 10),
        ("fanout", "fanout.inprocess", 100),
        ("fanout (qcluster)", "fanout.qcluster", 10),
        ("fanout (qcluster)", "fanout.qcluster", 100),
    ]
    for label, case, n in pairs:
        ours = figures.get((case, "postgres", n))
        if ours is None:
            continue
        kind = case.split(".")[0]
        for other in ("langgraph", "dbos"):
            theirs = figures.get((f"{other}.{kind}", "postgres", n))
            if theirs is None:
                skipped = next((d for d in lines if d.get("case") == other and "skipped" in d), None)
                if skipped:
                    out.append({"case": f"ratio.{label}.ballast/{other}", "database": "postgres", "n": n, "skipped": skipped["skipped"]})
                continue
            ratio = ours["median"] / theirs["median"]
            normalized = None
            if ours.get("floor_ms") and theirs.get("floor_ms"):
                normalized = (ours["median"] / ours["floor_ms"]) / (theirs["median"] / theirs["floor_ms"])
            out.append({
                "case": f"ratio.{label}.ballast/{other}", "database": "postgres", "n": n,
                "ballast": ours["median"], other: theirs["median"], "unit": ours["unit"],
                "ratio": round(ratio, 3), "ratio_floor_normalized": round(normalized, 3) if normalized else None,
                "faster": "ballast" if ratio < 1 else other,
            })
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.case == "report":
        from bench.report import latest, render

        print(render(Path(args.file) if args.file else latest()), end="")
        return 0
    if args.case == "all":
        return run_all(args)
    return run_case(args)


if __name__ == "__main__":
    sys.exit(main())
