"""Honest status through the API: a run parked for a decision after a crash apart from a run
at an approval gate (``waiting_for``), and a running step's lease owner, lease expiry and
whether its worker is alive, worked out when read (before any recovery pass)."""
from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.engine import workers
from runs.models import Run, Step, Worker
from runs.nodes.base import NodeResult
from runs.services import run_start
from tests.support import engine
from tests.support.leases import begun, dead_owner, pay_version, run_at_pay
from tests.support.specs import chain, edge, effect, graph, node, publish
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def parked_run() -> Run:
    """A run whose unsafe step 'pay' was interrupted by a (real, SIGKILLed) worker's death
    and parked by a recovery pass."""
    run, pay = run_at_pay(pay_version(unsafe=True))
    begun(engine.step_claim(pay.pk, dead_owner()))
    with engine.local_mode():
        engine.recover_once()
    run.refresh_from_db()
    assert run.status == "waiting" and Step.objects.get(pk=pay.pk).status == "parked"
    return run


def test_waiting_for_tells_a_parked_run_from_one_at_an_approval_gate(world: World) -> None:
    client = world.clients["operator"]  # reads every run of a graph that names no operators
    gate = world.waiting_run()
    parked = parked_run()
    done = world.succeeded_run()
    # Both have status "waiting"; waiting_for says which one waits for what.
    listed = {r["id"]: (r["status"], r["waiting_for"]) for r in client.get("/api/v1/runs/").json()["results"]}
    assert listed[gate.pk] == ("waiting", "approval")
    assert listed[parked.pk] == ("waiting", "decision")
    assert listed[done.pk] == ("succeeded", None)
    assert client.get(f"/api/v1/runs/{parked.pk}/").json()["waiting_for"] == "decision"
    assert client.get(f"/api/v1/runs/{gate.pk}/").json()["waiting_for"] == "approval"
    for value, expected in (("decision", [parked.pk]), ("approval", [gate.pk])):
        page = client.get("/api/v1/runs/", {"waiting_for": value}).json()
        assert [r["id"] for r in page["results"]] == expected and page["next"] is None
    events = client.get(f"/api/v1/runs/{parked.pk}/events/").json()
    assert events["run_status"] == "waiting" and events["run_waiting_for"] == "decision"
    assert client.get(f"/api/v1/runs/{gate.pk}/events/").json()["run_waiting_for"] == "approval"
    bad = client.get("/api/v1/runs/", {"waiting_for": "parked"})
    assert bad.status_code == 400 and "waiting_for" in bad.json()["error"]["fields"]


def test_a_run_list_page_reads_waiting_for_in_its_one_query(world: World) -> None:
    client = world.clients["operator"]  # reads every run of a graph that names no operators
    for _ in range(3):
        world.waiting_run()
    parked_run()
    client.get("/api/v1/runs/")  # warm caches (graph specs, auth)
    with CaptureQueriesContext(connection) as page:
        body = client.get("/api/v1/runs/").json()
    assert sorted(r["waiting_for"] for r in body["results"]) == ["approval"] * 3 + ["decision"]
    run_queries = [q["sql"] for q in page.captured_queries if 'FROM "runs_run"' in q["sql"] and "COUNT(" not in q["sql"]]
    assert len(run_queries) == 1, run_queries
    # The one read of steps apart is the page's running steps (whether their workers are
    # alive: the runs' ``interrupted``), one query for the page, not one per run.
    step_queries = [q["sql"] for q in page.captured_queries if 'FROM "runs_step"' in q["sql"] and 'FROM "runs_run"' not in q["sql"]]
    assert len(step_queries) <= 1 and all('"runs_step"."run_id" IN' in q for q in step_queries), step_queries


def _step_view(client, run: Run, step: Step) -> tuple[dict, dict, dict]:
    listed = {s["id"]: s for s in client.get(f"/api/v1/runs/{run.pk}/steps/").json()["results"]}[step.pk]
    detail = client.get(f"/api/v1/steps/{step.pk}/").json()
    in_run = {s["id"]: s for s in client.get(f"/api/v1/runs/{run.pk}/").json()["steps"]}[step.pk]
    return listed, detail, in_run


def test_a_running_step_whose_worker_was_killed_shows_stale_before_recovery(world: World) -> None:
    client = world.clients["operator"]  # reads every run of a graph that names no operators
    run, pay = run_at_pay()
    proc = subprocess.Popen(["sleep", "60"])
    try:
        owner = workers.worker_id(proc.pid)
        assert engine.step_claim(pay.pk, owner) is not None
        for view in _step_view(client, run, pay):
            assert view["status"] == "running" and view["lease_owner"] == owner
            assert view["worker_alive"] is True
            expires = view["lease_expires_at"]
            assert expires is not None and expires > timezone.now().isoformat().replace("+00:00", "Z")
    finally:
        proc.kill()
        proc.wait()
    # No recovery pass ran: the step is still running under a lease that has not expired,
    # yet its worker is visibly gone.
    for view in _step_view(client, run, pay):
        assert view["status"] == "running" and view["lease_owner"] == owner
        assert view["worker_alive"] is False
    assert Step.objects.get(pk=pay.pk).status == "running"
    # A finished step holds no lease: nothing to be alive.
    start = Step.objects.get(run=run, node_id="start")
    for view in _step_view(client, run, start):
        assert view["lease_owner"] == "" and view["lease_expires_at"] is None and view["worker_alive"] is None


def test_liveness_of_an_owner_on_another_host_follows_its_lease_and_its_hosts_heartbeats(world: World) -> None:
    client = world.clients["operator"]  # reads every run of a graph that names no operators
    run, pay = run_at_pay()
    assert engine.step_claim(pay.pk, "elsewhere:4242:777") is not None

    def alive() -> bool | None:
        return client.get(f"/api/v1/steps/{pay.pk}/").json()["worker_alive"]

    assert alive() is True  # no cluster row for that host: cannot tell, the lease decides
    now = timezone.now()
    Worker.objects.create(name="elsewhere:4000:1", host="elsewhere", pid=4000, started_at=now, heartbeat_at=now)
    assert alive() is True
    Worker.objects.filter(host="elsewhere").update(heartbeat_at=now - timedelta(minutes=5))
    assert alive() is False  # every cluster on that host stopped heartbeating
    Worker.objects.create(name="elsewhere:4001:1", host="elsewhere", pid=4001, started_at=now, heartbeat_at=now)
    assert alive() is True  # one cluster there still beats: cannot tell which holds the step
    Step.objects.filter(pk=pay.pk).update(lease_expires_at=now - timedelta(seconds=1))
    assert alive() is False  # an expired lease: its heartbeats stopped


def test_a_step_list_reads_the_workers_once_whatever_its_length(world: World) -> None:
    client = world.clients["operator"]  # reads every run of a graph that names no operators
    branches = ["a", "b", "c", "d", "e", "f"]
    spec = graph(
        [node("start", "start"), *[effect(b) for b in branches], node("join", "join"), node("end", "end")],
        [edge("start", b) for b in branches] + [edge(b, "join") for b in branches] + chain("join", "end"),
        settings={"max_parallelism": 10},
    )
    with engine.local_mode():
        run = run_start(version=publish(spec), run_input={})
    start = engine.step_claim(Step.objects.get(run=run, node_id="start").pk, "tester:1:1")
    engine.step_commit(start, NodeResult(), keep_next=False)
    for i, branch in enumerate(branches):
        assert engine.step_claim(Step.objects.get(run=run, node_id=branch).pk, f"host-{i % 2}:{100 + i}:1") is not None
    now = timezone.now()
    Worker.objects.create(name="host-0:1:1", host="host-0", pid=1, started_at=now, heartbeat_at=now - timedelta(minutes=5))
    Worker.objects.create(name="host-1:1:1", host="host-1", pid=1, started_at=now, heartbeat_at=now)
    client.get(f"/api/v1/runs/{run.pk}/steps/")  # warm caches
    with CaptureQueriesContext(connection) as ctx:
        listed = client.get(f"/api/v1/runs/{run.pk}/steps/").json()["results"]
        in_run = client.get(f"/api/v1/runs/{run.pk}/").json()["steps"]
    for steps in (listed, in_run):
        alive = {s["node_id"]: s["worker_alive"] for s in steps if s["status"] == "running"}
        assert alive == {b: i % 2 == 1 for i, b in enumerate(branches)}  # host-0's clusters are silent
    worker_queries = [q for q in ctx.captured_queries if 'FROM "runs_worker"' in q["sql"]]
    assert len(worker_queries) == 2  # one per list of six running steps, not one per step
