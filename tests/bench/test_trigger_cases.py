"""Smoke runs of the trigger benchmarks (bench/trigger_cases.py) at a tiny size, so they cannot rot: each ``python -m bench CASE`` runs to the end in a fresh interpreter, checks its own results and emits its figures."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from django.conf import settings

from runs.engine.store.clock import DUE_SLACK

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parents[2]
# A hang guard, not a bound on a figure: each case at this size takes seconds.
HANG_GUARD_SECONDS = 600


@pytest.fixture
def bench_env(tmp_path: Path):
    """The environment of a benchmark process on a database of its own, beside the
    configured test database's vendor (a SQLite file in ``tmp_path``, or a PostgreSQL
    database ``<test database>_bench`` dropped afterwards); results go to ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_SETTINGS", "BALLAST_FAULT"))}
    env["BENCH_RESULTS_FILE"] = str(tmp_path / "results.jsonl")
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        env["BENCH_SQLITE_FILE"] = str(tmp_path / "bench.sqlite3")
        yield "sqlite", env
        return
    server = urlparse(os.environ["DATABASE_URL"])
    name = os.environ.get("BALLAST_PG_TEST_NAME", "test_ballast") + "_bench"
    env["BENCH_PG_URL"] = server._replace(path="/postgres").geturl()
    env["BENCH_PG_DB"] = name
    yield "postgres", env
    import psycopg

    with psycopg.connect(env["BENCH_PG_URL"], autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_case(case: str, size: int, db: str, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Run ``python -m bench CASE --n SIZE`` on ``db``; its figure lines by case name."""
    done = subprocess.run([sys.executable, "-m", "bench", case, "--db", db, "--n", str(size)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(t) for t in done.stdout.splitlines() if t.startswith("{")]
    assert not [d for d in lines if "failed" in d], lines
    return {d["case"]: d for d in lines}


def test_webhooks_case_sends_signed_deliveries_and_reports_latency_and_rate(bench_env) -> None:
    db, env = bench_env
    figures = run_case("webhooks", 5, db, env)
    latency, rate = figures["webhooks.latency"], figures["webhooks.accepted_per_s"]
    assert latency["n"] == 5 and latency["median"] > 0 and latency["p95"] >= latency["median"]
    assert rate["n"] == 10 and rate["clients"] == 4 and rate["median"] > 0
    assert len(latency["load"]) == 3 and latency["database"] == db


def test_schedules_case_fires_every_schedule_once_and_reports_lags(bench_env) -> None:
    db, env = bench_env
    figures = run_case("schedules", 5, db, env)
    fire, first = figures["schedules.fire_lag"], figures["schedules.first_step_lag"]
    assert fire["n"] == first["n"] == 5
    # fired_at is the claim's due_by (its now + DUE_SLACK), so a tick may fire, and its
    # start step be claimed, up to DUE_SLACK before the tick time; never more.
    slack_ms = DUE_SLACK.total_seconds() * 1000
    assert fire["median"] >= 0 and first["median"] >= -slack_ms and first["max_ms"] > -slack_ms
    assert "load" in fire and fire["workers"] == 2


def test_subgraph_case_reports_the_child_runs_overhead(bench_env) -> None:
    db, env = bench_env
    figures = run_case("subgraph", 5, db, env)
    inline, called, overhead = figures["subgraph.inline_run"], figures["subgraph.child_run"], figures["subgraph.overhead"]
    assert inline["n"] == called["n"] == overhead["n"] == 5
    assert called["median"] > 0 and inline["median"] > 0 and figures["subgraph.child_own_run"]["n"] == 5
