"""The web's /metrics through the real middleware stack: refused without a token or an allowed address (401, no metric in the body); after real runs, the engine's counters and histograms, the LLM spend by graph, provider and model, the database's gauges read at scrape time (worker hosts and clusters alive among them); and the Grafana dashboard names only metrics a scrape exposes."""
from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from prometheus_client.metrics_core import Metric

from accounts.tokens import token_create
from approvals.models import ApprovalRequest
from ballast.metrics import DATABASE_GAUGES
from core import metrics as core_metrics
from runs.models import HostHeartbeat, Run, StepAttempt, Worker
from runs.services import run_start
from tests.support import engine
from tests.support.costs import crash_rerun_run, llm_spec
from tests.support.metrics import DASHBOARD, dashboard_queries, exposed_names, metric_names, parse, sample_value
from tests.support.specs import chain, edge, graph, node, publish, run_local

# Transactional: the engine counts parks and take-backs once their transaction commits.
pytestmark = pytest.mark.django_db(transaction=True)
# Prometheus scrapes by address: a Host no ALLOWED_HOSTS names.
SCRAPE_HOST = "10.0.3.7:8000"


def _token(*, staff: bool = True) -> str:
    user = get_user_model().objects.create_user("scraper" if staff else "someone", password="pw", is_staff=staff)
    return token_create(user=user, name="prometheus")[1]


def _scrape(key: str) -> list[Metric]:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Token {key}", HTTP_HOST=SCRAPE_HOST)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain; version=")
    return parse(response.content.decode())


def _totals(families: Iterable[Metric]) -> dict[str, float]:
    fams = list(families)
    return {
        "committed_llm": sample_value(fams, "ballast_steps_committed_total", kind="llm"),
        "failed_llm": sample_value(fams, "ballast_steps_failed_total", kind="llm"),
        "started_llm": sample_value(fams, "ballast_steps_started_total", kind="llm"),
        "started": sample_value(fams, "ballast_steps_started_total"),
        "commits": sample_value(fams, "ballast_step_commit_seconds_count", outcome="committed"),
        "claims": sample_value(fams, "ballast_step_claim_seconds_count", result="claimed"),
        "owner_gone": sample_value(fams, "ballast_leases_taken_over_total", cause="owner_gone"),
        "parked": sample_value(fams, "ballast_steps_parked_total", cause="outcome_unknown"),
    }


def test_metrics_without_a_token_are_401_with_no_metric_in_the_body() -> None:
    client = Client()
    for headers in ({}, {"HTTP_AUTHORIZATION": "Token not-a-real-key"}):
        response = client.get("/metrics", HTTP_HOST=SCRAPE_HOST, **headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] in {"not_authenticated", "authentication_failed"}
        assert b"ballast_" not in response.content
        assert "WWW-Authenticate" in response
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Token {_token(staff=False)}")
    assert (response.status_code, response.json()["error"]["code"]) == (403, "permission_denied")
    assert b"ballast_" not in response.content
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Token {_token()}").status_code == 405


def test_an_allowed_address_needs_no_token() -> None:
    with override_settings(BALLAST_METRICS_ALLOW=["10.9.0.0/16", "127.0.0.0/8"]):
        response = Client().get("/metrics", HTTP_HOST=SCRAPE_HOST)  # the test client's REMOTE_ADDR is 127.0.0.1
        assert response.status_code == 200
        assert b"ballast_runs{" in response.content
    with override_settings(BALLAST_METRICS_ALLOW=["10.9.0.0/16", "not an address"]):
        assert Client().get("/metrics", HTTP_HOST=SCRAPE_HOST).status_code == 401


def test_runs_move_the_engine_counters_the_spend_and_the_database_gauges() -> None:
    key = _token()
    before = _totals(_scrape(key))
    # A retried LLM step (one failed attempt, then its reply), a crash re-run (a lease taken
    # from a dead owner) and a step parked after an error that leaves its effect unknown.
    retried = run_local(llm_spec("metrics-retried", fail_times=1))
    assert retried.status == "succeeded", retried.error
    crash_rerun_run(llm_spec("metrics-crash"))
    parked_spec = graph(
        [node("start", "start"),
         node("x", "tool", config={"tool": "flaky", "args": {"fail_times": 1}}, retry={"max_attempts": 3, "backoff_seconds": 0}, repeat_safe=False),
         node("end", "end")],
        chain("start", "x", "end"),
    )
    assert run_local(parked_spec).status == "waiting"
    families = _scrape(key)
    after = _totals(families)
    delta = {name: after[name] - before[name] for name in after}
    llm_attempts = StepAttempt.objects.filter(step__node_id="ask").count()
    assert delta["started_llm"] == llm_attempts - 1  # every attempt but the dead owner's (claimed by hand, never run)
    assert delta["committed_llm"] == 2
    assert delta["failed_llm"] == 1
    assert delta["owner_gone"] == 1
    assert delta["parked"] == 1
    assert delta["commits"] == delta["started"] >= 6  # every attempt a worker started committed (result or failure)
    # One claim at least per chain of steps (a successor its predecessor's commit leased to the same worker needs none).
    assert 3 <= delta["claims"] <= delta["started"]
    # The spend as the database recorded it, by graph, provider and model.
    for run in Run.objects.filter(graph_version__graph__name__in=["metrics-retried", "metrics-crash"]):
        graph_name = run.graph_version.graph.name
        cost = sample_value(families, "ballast_llm_cost_usd_total", graph=graph_name, provider="mock", model="mock-1")
        assert Decimal(str(cost)).quantize(Decimal("0.000001")) == run.cost_usd.quantize(Decimal("0.000001")) > 0
        tokens = sample_value(families, "ballast_llm_tokens_total", graph=graph_name, provider="mock", model="mock-1")
        # The crash re-run's hand-made first commit ("start") spent nothing; all tokens are the llm step's.
        assert tokens == run.input_tokens + run.output_tokens > 0
    # Runs by status, counted at scrape time.
    for status in ("succeeded", "waiting", "failed", "queued"):
        assert sample_value(families, "ballast_runs", status=status) == Run.objects.filter(status=status).count()
    assert sample_value(families, "ballast_metrics_database_up") == 1


def test_queue_depth_and_approvals_waiting_are_read_at_scrape_time() -> None:
    key = _token()
    families = _scrape(key)
    assert sample_value(families, "ballast_queue_depth") == 0
    assert sample_value(families, "ballast_approvals_waiting") == 0
    # A run started with no worker to take it: its first step is due and waits.
    with engine.local_mode():
        run_start(version=publish(graph([node("start", "start"), node("end", "end")], chain("start", "end"))), run_input={})
    review = node("review", "approval", config={"prompt": "Send it?"})
    gated = run_local(graph([node("start", "start"), review, node("end", "end")], chain("start", "review") + [edge("review", "end", "approved"), edge("review", "end", "rejected")]))
    assert gated.status == "waiting"
    families = _scrape(key)
    assert sample_value(families, "ballast_queue_depth") == 1
    assert 0 <= sample_value(families, "ballast_queue_oldest_due_age_seconds") < 300
    assert sample_value(families, "ballast_approvals_waiting") == ApprovalRequest.objects.filter(status="pending").count() == 1
    assert 0 <= sample_value(families, "ballast_approvals_oldest_waiting_age_seconds") < 300


def test_no_label_carries_a_run_or_step_id() -> None:
    run_local(llm_spec("metrics-labels", fail_times=1))
    families = _scrape(_token())
    allowed = {"kind", "code", "outcome", "result", "cause", "graph", "provider", "model", "direction", "stream", "reason", "status", "le"}
    for family in families:
        if not family.name.startswith("ballast_"):
            continue
        for sample in family.samples:
            assert set(sample.labels) <= allowed, (sample.name, sample.labels)


def test_the_dashboard_names_only_metrics_a_scrape_exposes_and_shows_every_one() -> None:
    run_local(llm_spec("metrics-dashboard", fail_times=1))
    exposed = exposed_names(_scrape(_token()))
    queries = dashboard_queries()
    assert len(queries) >= 12
    named = set().union(*(metric_names(expr) for expr in queries))
    assert named, queries
    assert named <= exposed, sorted(named - exposed)
    # Importable as Grafana exports it: a data source input, unique panel ids, each placed on the grid.
    board = json.loads(DASHBOARD.read_text())
    assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"] and board["uid"] and board["title"]
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    assert all(set(p["gridPos"]) == {"h", "w", "x", "y"} and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in panels)
    assert all(p["datasource"]["uid"] == "${DS_PROMETHEUS}" for p in panels if p["type"] != "row")
    # Every metric Ballast defines has a panel.
    defined = {m._name for m in core_metrics.DEFINED} | set(DATABASE_GAUGES)
    shown = {name for name in defined if any(n == name or n.startswith(name + "_") for n in named)}
    assert shown == defined, sorted(defined - shown)


def test_worker_hosts_and_clusters_alive_are_read_at_scrape_time() -> None:
    key = _token()
    families = _scrape(key)
    assert (sample_value(families, "ballast_worker_hosts_alive"), sample_value(families, "ballast_workers_alive")) == (0, 0)
    now = engine.db_now()
    old = now - timedelta(hours=1)

    def cluster(host: str, pid: int, beat: datetime) -> None:
        Worker.objects.create(name=f"{host}:{pid}:1", host=host, pid=pid, started_at=old, heartbeat_at=beat)

    # Hosts other than this one (no process check): two live clusters on one, one on a host
    # whose own heartbeat went silent, one whose cluster heartbeat is an hour old.
    cluster("metrics-a", 11, now)
    cluster("metrics-a", 12, now)
    cluster("metrics-b", 21, now)
    cluster("metrics-c", 31, old)
    HostHeartbeat.objects.create(host="metrics-a", beat_at=now, up_since=old)
    HostHeartbeat.objects.create(host="metrics-b", beat_at=old, up_since=old)
    HostHeartbeat.objects.create(host="metrics-c", beat_at=now, up_since=old)
    families = _scrape(key)
    assert sample_value(families, "ballast_workers_alive") == 3
    # Host heartbeats are written on PostgreSQL only (runs.engine.store.liveness): there a
    # silent host is dead whatever its clusters say.
    assert sample_value(families, "ballast_worker_hosts_alive") == (1 if connection.vendor == "postgresql" else 2)
