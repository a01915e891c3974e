"""``python -m bench report [FILE]``: a results file as the Markdown tables of docs/performance.md
(the newest file in bench/results/ when FILE is not given)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.core import RESULTS_DIR


def latest() -> Path:
    files = sorted(RESULTS_DIR.glob("*.jsonl"))
    if not files:
        raise SystemExit("no results in bench/results/: run make bench first")
    return files[-1]


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def render(path: Path) -> str:
    lines = [json.loads(t) for t in path.read_text().splitlines() if t.strip()]
    shown = f"bench/results/{path.name}" if path.resolve().parent == RESULTS_DIR.resolve() else str(path)
    out: list[str] = [f"Results file: `{shown}`", ""]
    header = next((d for d in lines if d.get("case") == "machine"), None)
    if header:
        out += [
            f"Machine: {header.get('nproc')} cores ({header.get('cpu', '?')}), {header.get('mem_total_gib')} GiB, "
            f"PostgreSQL {header.get('postgres')}, Python {header.get('python')}, at {header.get('at')}.",
            "",
        ]
    out += ["| case | db | n | runs | median | p95 | unit | x floor | notes |", "|---|---|---:|---:|---:|---:|---|---:|---|"]
    for d in lines:
        case = d.get("case", "")
        if case in ("machine",) or case.startswith("ratio.") or case.startswith("profile"):
            continue
        if "skipped" in d:
            out.append(f"| {case} | {d.get('database', '')} | | | | | | | skipped: {d['skipped']} |")
            continue
        if "failed" in d:
            out.append(f"| {case} | {d.get('database', '')} | | | | | | | FAILED: {d['failed']} |")
            continue
        notes = []
        for key in ("queue_pickup_ms", "ms_per_node", "kill_to_recovered_s", "recovered_to_rerun_s", "boot_to_supervisor_s",
                    "lease_expiry_to_rerun_s", "lease_seconds", "recovery_interval", "worker_processes", "worker_rss_mib",
                    "worker_rss_mib_baseline", "db_bytes_per_waiting_run", "queries", "python_peak_mib", "round_trips"):
            if d.get(key) is not None:
                notes.append(f"{key}={_fmt(d[key])}")
        if d.get("statements"):
            notes.append("statements: " + "; ".join(d["statements"]))
        out.append(
            f"| {case} | {d.get('database', '')} | {d.get('n', '')} | {d.get('runs', '')} | {_fmt(d.get('median'), 3)} | "
            f"{_fmt(d.get('p95'), 3)} | {d.get('unit', '')} | {_fmt(d.get('ratio_to_floor'), 1)} | {', '.join(notes)} |"
        )
    ratios = [d for d in lines if d.get("case", "").startswith("ratio.")]
    if ratios:
        out += ["", "| comparison (PostgreSQL) | n | Ballast | other | Ballast/other | floor-normalised |", "|---|---:|---:|---:|---:|---:|"]
        for d in ratios:
            if "skipped" in d:
                out.append(f"| {d['case']} | {d.get('n')} | | | skipped: {d['skipped']} | |")
                continue
            other = next(k for k in ("langgraph", "dbos") if k in d)
            out.append(f"| {d['case']} | {d['n']} | {_fmt(d['ballast'], 3)} {d['unit']} | {_fmt(d[other], 3)} | "
                       f"{_fmt(d['ratio'], 2)} | {_fmt(d.get('ratio_floor_normalized'), 2)} |")
    profiles = [d for d in lines if d.get("case", "").startswith("profile")]
    for d in profiles:
        out += ["", f"Profile ({d['database']}, {d['n']} nodes x {d['runs']} runs, {_fmt(d['median'], 2)} ms/node under the profiler):", ""]
        out += ["| where (self time) | share |", "|---|---:|"]
        out += [f"| {k} | {v}% |" for k, v in d.get("share_percent", {}).items()]
        out += ["", "| inclusive, ms per step | ms |", "|---|---:|"]
        out += [f"| `{k}` | {v} |" for k, v in d.get("inclusive_ms_per_step", {}).items()]
    return "\n".join(out) + "\n"
