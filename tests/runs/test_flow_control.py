"""Flow control across runs (runs.engine.store.flow): a graph's limit and per-key limit hold under concurrent starts, runs wait in line FIFO and are admitted by the claim when one ends, a queued run can be cancelled, the settings API refuses bad values, and a schedule's overlap policy ``queue``."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from audit.models import AuditEntry
from graphs.models import Graph, GraphVersion
from runs.models import FlowGate, Run, RunStatus, Step
from runs.services import run_start
from tests.support import engine
from tests.support.schedules import YEARLY, create, make_due_now
from tests.support.specs import chain, graph, node, publish, transform
from triggers import firing
from triggers.models import ScheduleTick

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def customer_spec() -> dict[str, Any]:
    return graph(
        [node("start", "start"), transform("calc", y="1 + 1"), node("end", "end")],
        chain("start", "calc", "end"),
        name="per-customer",
        input_schema={"type": "object", "properties": {"customer_id": {"type": "string"}, "x": {"type": "integer"}}},
    )


def limited(**limits: Any) -> GraphVersion:
    version = publish(customer_spec())
    Graph.objects.filter(pk=version.graph_id).update(**limits)
    version.graph.refresh_from_db()
    return version


def held(run_ids: list[int] | None = None) -> list[int]:
    runs = Run.objects.filter(flow_held=True, status=RunStatus.QUEUED)
    return list((runs.filter(pk__in=run_ids) if run_ids else runs).order_by("id").values_list("id", flat=True))


def admitted() -> list[int]:
    """Runs with a start step: the gate let them through."""
    return sorted(set(Step.objects.values_list("run_id", flat=True)))


def admit() -> list[int]:
    """Fire every due gate (the claim's due source), as a worker's claim would."""
    fired = []
    for _ in range(50):
        if not engine.flow_fire_next(engine.db_now(), "test:1:1"):
            return fired
        fired.append(1)
    raise AssertionError("gates stayed due")


def test_the_limit_holds_with_concurrent_starts_and_the_line_is_fifo() -> None:
    version = limited(max_concurrent_runs=2)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            barrier.wait()
            with engine.local_mode():  # the start steps' doorbells go nowhere: nothing executes
                run_start(version=version, run_input={"x": 1})
        except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ids = list(Run.objects.order_by("id").values_list("id", flat=True))
    assert len(ids) == 8 and len(admitted()) == 2 and held() == sorted(set(ids) - set(admitted()))
    # On start, the gate admits in id order: the two admitted are the first two started.
    assert admitted() == ids[:2]
    # Positions follow the start order; every held run names the graph's limit.
    for position, run_id in enumerate(held(), start=1):
        place = engine.flow_queue_place(Run.objects.get(pk=run_id))
        assert place is not None and place.as_dict() == {"position": position, "limit": "max_concurrent_runs", "key": None, "max": 2}
    # One ends (cancelled): the next in line, and only it, is admitted by the claim.
    line = held()
    first = admitted()[0]
    assert engine.run_cancel(first, actor="t")
    assert FlowGate.objects.get().due_at is not None
    with engine.local_mode():
        admit()
    assert held() == line[1:] and line[0] in admitted()
    assert FlowGate.objects.get().due_at is None
    assert Run.objects.filter(flow_held=False, status__in=("queued", "running", "waiting")).count() == 2


def test_a_run_that_succeeds_admits_the_next_through_the_workers_claim() -> None:
    version = limited(max_concurrent_runs=1)
    with engine.local_mode() as queue:
        first = run_start(version=version, run_input={"x": 1})
        second = run_start(version=version, run_input={"x": 2})
        assert held() == [second.pk]
        # The worker's own loop: the first run ends, its end makes the gate due, the next
        # claim admits the second and runs it too.
        engine.drive_local(first.pk, queue=queue, timeout=30)
        assert engine.drive_local(second.pk, queue=queue, timeout=30) == "succeeded"
    first.refresh_from_db()
    assert first.status == "succeeded" and held() == []


def test_the_per_key_limit_lets_other_keys_pass() -> None:
    version = limited(concurrency_key="customer_id", concurrency_key_limit=1)
    with engine.local_mode():
        a1 = run_start(version=version, run_input={"customer_id": "a"})
        a2 = run_start(version=version, run_input={"customer_id": "a"})
        b1 = run_start(version=version, run_input={"customer_id": "b"})
        none = run_start(version=version, run_input={})  # no key: only a graph limit would hold it
    assert held() == [a2.pk] and set(admitted()) == {a1.pk, b1.pk, none.pk}
    place = engine.flow_queue_place(Run.objects.get(pk=a2.pk))
    assert place is not None and place.as_dict() == {"position": 1, "limit": "concurrency_key", "key": "a", "max": 1}
    assert engine.run_cancel(b1.pk, actor="t")  # another key's end admits nobody of "a"
    with engine.local_mode():
        admit()
    assert held() == [a2.pk]
    assert engine.run_cancel(a1.pk, actor="t")
    with engine.local_mode():
        admit()
    assert held() == [] and a2.pk in admitted()


def test_cancelling_a_queued_run_takes_it_out_of_the_line() -> None:
    version = limited(max_concurrent_runs=1)
    with engine.local_mode():
        runs = [run_start(version=version, run_input={"x": i}) for i in range(3)]
    assert held() == [runs[1].pk, runs[2].pk]
    assert engine.run_cancel(runs[1].pk, actor="t")
    cancelled = Run.objects.get(pk=runs[1].pk)
    assert cancelled.status == "cancelled" and engine.flow_queue_place(cancelled) is None
    assert FlowGate.objects.get().due_at is None  # a held run frees no place
    place = engine.flow_queue_place(Run.objects.get(pk=runs[2].pk))
    assert place is not None and place.position == 1
    assert engine.run_cancel(runs[0].pk, actor="t")
    with engine.local_mode():
        admit()
    assert held() == [] and admitted() == [runs[0].pk, runs[2].pk]
    assert not Step.objects.filter(run_id=runs[1].pk).exists()


def test_raising_the_limit_admits_the_waiting_runs(world: Any) -> None:
    version = limited(max_concurrent_runs=1)
    with engine.local_mode():
        runs = [run_start(version=version, run_input={"x": i}) for i in range(3)]
    response = world.clients["builder"].patch(f"/api/v1/graphs/{version.graph_id}/", {"max_concurrent_runs": None}, format="json")
    assert response.status_code == 200, response.content
    with engine.local_mode():
        admit()
    assert held() == [] and admitted() == [r.pk for r in runs]
    assert AuditEntry.objects.filter(action="graph.flow_control").count() == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_concurrent_runs": 0}, "max_concurrent_runs"),
        ({"max_concurrent_runs": "many"}, "max_concurrent_runs"),
        ({"max_concurrent_runs": 10**6}, "max_concurrent_runs"),
        ({"concurrency_key": "customer id"}, "concurrency_key"),
        ({"concurrency_key": "a..b"}, "concurrency_key"),
        ({"concurrency_key": "x" * 201}, "concurrency_key"),
        ({"concurrency_key_limit": 0}, "concurrency_key_limit"),
        ({"concurrency_key_limit": None}, "concurrency_key_limit"),
    ],
)
def test_bad_settings_are_refused_with_the_field_named(world: Any, fields: dict[str, Any], field: str) -> None:
    version = publish(customer_spec())
    response = world.clients["builder"].patch(f"/api/v1/graphs/{version.graph_id}/", fields, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    graph_row = Graph.objects.get(pk=version.graph_id)
    assert graph_row.max_concurrent_runs is None and graph_row.concurrency_key == "" and graph_row.concurrency_key_limit == 1


def test_the_api_shows_the_settings_and_a_queued_runs_place(world: Any) -> None:
    version = publish(customer_spec())
    version.graph.operators.add(world.users["builder"])
    client = world.clients["builder"]
    body = client.patch(
        f"/api/v1/graphs/{version.graph_id}/", {"max_concurrent_runs": 1, "concurrency_key": "customer_id", "concurrency_key_limit": 2}, format="json"
    ).json()
    assert (body["max_concurrent_runs"], body["concurrency_key"], body["concurrency_key_limit"]) == (1, "customer_id", 2)
    listed = next(g for g in client.get("/api/v1/graphs/").json()["results"] if g["id"] == version.graph_id)
    assert listed["max_concurrent_runs"] == 1
    with engine.local_mode():
        ids = [client.post("/api/v1/runs/", {"graph": version.graph_id, "input": {"customer_id": "c"}}, format="json").json()["id"] for _ in range(2)]
    first, second = (client.get(f"/api/v1/runs/{i}/").json() for i in ids)
    assert first["queue"] is None and first["status"] == "queued"
    assert second["status"] == "queued"
    assert second["queue"] == {"position": 1, "limit": "max_concurrent_runs", "key": None, "max": 1}
    page = client.get("/api/v1/runs/").json()["results"]
    assert {r["id"]: r["queue"] for r in page}[ids[1]]["position"] == 1


def test_a_schedule_with_overlap_queue_queues_a_tick_behind_the_active_run(world: Any) -> None:
    version = publish(
        graph([node("start", "start"), transform("double", y="x * 2"), node("end", "end")], chain("start", "double", "end"),
              name="sched", input_schema={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})
    )
    version.graph.operators.add(world.users["builder"])
    body = create(world, version.graph_id, cron=YEARLY, overlap_policy="queue")
    assert body["overlap_policy"] == "queue"
    with engine.local_mode():
        for _ in range(2):
            make_due_now(body["id"])
            for _ in range(20):
                if firing.schedule_earliest_due(engine.db_now()) is None:
                    break
                firing.fire_next_for_engine(engine.db_now(), "w")
    first, second = Run.objects.order_by("id")
    assert list(ScheduleTick.objects.order_by("id").values_list("outcome", flat=True)) == ["started", "started"]
    assert held() == [second.pk] and first.flow_line == f"schedule:{body['id']}"
    place = engine.flow_queue_place(second)
    assert place is not None and place.limit == "schedule_overlap" and place.key == f"schedule:{body['id']}"
    with engine.local_mode() as queue:
        assert engine.drive_local(first.pk, queue=queue, timeout=30) == "succeeded"
        assert engine.drive_local(second.pk, queue=queue, timeout=30) == "succeeded"
