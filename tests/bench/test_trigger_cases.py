"""Smoke runs of the trigger benchmarks (bench/trigger_cases.py) at a tiny size, so they cannot rot: each ``python -m bench CASE`` runs to the end in a fresh interpreter, checks its own results and emits its figures."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runs.engine.store.clock import DUE_SLACK
from tests.support.bench_run import bench_database, run_bench

pytestmark = pytest.mark.process


@pytest.fixture
def bench_env(tmp_path: Path):
    """(database, environment) of a benchmark process on a database of its own
    (tests/support/bench_run.py); results go to ``tmp_path``."""
    with bench_database(tmp_path) as pair:
        yield pair


def run_case(case: str, size: int, db: str, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Run ``python -m bench CASE --n SIZE`` on ``db``; its figure lines by case name."""
    return run_bench([case, "--db", db, "--n", str(size)], env)


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
