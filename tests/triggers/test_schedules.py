"""Schedule triggers: the API (refusals with the field named, next fire times, pause, resume, Run now), firing by the engine's claim (once per tick, missed and overlap policies) and the doorbell."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from audit.models import AuditEntry
from graphs.models import GraphVersion
from runs.models import Run, RunStatus
from tests.support import engine
from tests.support.schedules import YEARLY, create, daily_cron_at, make_due, make_due_now
from tests.support.specs import publish
from tests.support.webhooks import order_spec
from triggers import firing, schedules
from triggers.models import Schedule, ScheduleTick

pytestmark = pytest.mark.usefixtures("fast_passwords")


@pytest.fixture
def version(world: Any) -> GraphVersion:
    """A published graph whose input needs an integer ``x``; the builder operates it."""
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    return version


def _url(version: GraphVersion, schedule_id: int | None = None, action: str = "") -> str:
    base = f"/api/v1/graphs/{version.graph_id}/schedules/"
    return base if schedule_id is None else f"{base}{schedule_id}/{action + '/' if action else ''}"


def _claim_until_idle(worker: str) -> None:
    """Call the engine's claim by due time until no schedule is due (it claims the started
    runs' steps too; they stay leased: nothing here executes them)."""
    for _ in range(200):
        if firing.schedule_earliest_due(engine.db_now()) is None:
            return
        engine.step_claim_due(worker)
    raise AssertionError("schedules stayed due after 200 claims")


# The API --------------------------------------------------------------------------------


def test_create_shows_next_fire_times_in_the_zone_and_audits(world: Any, version: GraphVersion) -> None:
    body = create(world, version.graph_id, cron="30 2 * * *", timezone="Europe/Paris")
    assert body["source"] == "schedule nightly"
    assert body["run_as"] == "builder" and body["version"] is None and body["paused"] is False
    times = body["next_fire_times"]
    assert len(times) == schedules.NEXT_FIRE_TIMES and times == sorted(times)
    assert times[0] == body["next_fire_at"].replace("+00:00", "Z")
    assert all(t.endswith(("00:30:00Z", "01:30:00Z", "01:00:00Z")) for t in times)  # 02:30 Paris (03:00 on a DST day)
    read = world.clients["builder"].get(_url(version, body["id"])).json()
    assert read["next_fire_times"] == times
    assert AuditEntry.objects.filter(action="schedule.create", object_id=str(body["id"])).count() == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "every day"}, "cron"),
        ({"cron": ""}, "cron"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"input": {"x": "two"}}, "input.x"),
        ({"input": {}}, "input"),
        ({"overlap_policy": "sometimes"}, "overlap_policy"),
        ({"catch_up_window_seconds": 0}, "catch_up_window_seconds"),
        ({"version": 9}, "version"),
        ({"run_as": "nobody"}, "run_as"),
    ],
)
def test_bad_settings_are_refused_at_save_with_the_field_named(world: Any, version: GraphVersion, fields: dict[str, Any], field: str) -> None:
    response = world.clients["builder"].post(_url(version), {"name": "n", "cron": "0 3 * * *", "input": {"x": 1}, **fields}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert any(key == field or key.startswith(field + ".") or key.startswith(field + "[") for key in error["fields"]), error
    assert not Schedule.objects.exists()


def test_a_bad_change_is_refused_and_a_good_one_re_times(world: Any, version: GraphVersion) -> None:
    body = create(world, version.graph_id)
    bad = world.clients["builder"].patch(_url(version, body["id"]), {"timezone": "Nowhere/Land"}, format="json")
    assert bad.status_code == 400 and "timezone" in bad.json()["error"]["fields"]
    good = world.clients["builder"].patch(_url(version, body["id"]), {"cron": "15 * * * *", "input": {"x": 5}}, format="json")
    assert good.status_code == 200, good.content
    assert good.json()["next_fire_at"] != body["next_fire_at"] and good.json()["input"] == {"x": 5}
    assert all(":15:00" in t for t in good.json()["next_fire_times"])


def test_only_builders_manage_schedules(world: Any, version: GraphVersion) -> None:
    response = world.clients["operator"].post(_url(version), {"name": "n", "cron": "0 3 * * *", "input": {"x": 1}}, format="json")
    assert response.status_code == 403


def test_pause_stops_firing_and_resume_skips_the_paused_ticks(world: Any, version: GraphVersion) -> None:
    body = create(world, version.graph_id, cron=YEARLY)
    paused = world.clients["builder"].post(_url(version, body["id"], "pause")).json()
    assert paused["paused"] is True and paused["next_fire_at"] is None and paused["next_fire_times"] == []
    _claim_until_idle("w")
    assert not Run.objects.exists()
    resumed = world.clients["builder"].post(_url(version, body["id"], "resume")).json()
    assert resumed["paused"] is False
    assert datetime.fromisoformat(resumed["next_fire_at"]) > engine.db_now()
    actions = list(AuditEntry.objects.filter(object_id=str(body["id"]), action__startswith="schedule.").values_list("action", flat=True).order_by("id"))
    assert actions == ["schedule.create", "schedule.pause", "schedule.resume"]


def test_run_now_starts_a_run_with_the_input_and_the_source(world: Any, version: GraphVersion) -> None:
    body = create(world, version.graph_id)
    response = world.clients["builder"].post(_url(version, body["id"], "run-now"))
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["run"])
    assert (run.source, run.input, run.created_by) == ("schedule nightly", {"x": 2}, world.users["builder"])
    detail = world.clients["builder"].get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["source"] == "schedule nightly"
    listed = world.clients["builder"].get("/api/v1/runs/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert any(r["id"] == run.pk and r.get("source") == "schedule nightly" for r in rows)
    tick = ScheduleTick.objects.get(schedule_id=body["id"])
    assert (tick.manual, tick.outcome, tick.run_id) == (True, "started", run.pk)
    assert AuditEntry.objects.filter(action="schedule.run_now", actor="builder").count() == 1
    ticks = world.clients["builder"].get(_url(version, body["id"], "ticks")).json()
    assert ticks["results"][0]["run"] == run.pk


def test_runs_act_as_a_named_service_user(world: Any, version: GraphVersion) -> None:
    version.graph.operators.add(world.users["operator"])
    body = create(world, version.graph_id, run_as="operator")
    run = Run.objects.get(pk=world.clients["builder"].post(_url(version, body["id"], "run-now")).json()["run"])
    assert run.created_by == world.users["operator"]


def test_a_publish_that_refuses_a_schedules_input_warns_and_names_it(world: Any, version: GraphVersion) -> None:
    create(world, version.graph_id, name="follows")
    create(world, version.graph_id, name="pinned", version=1)
    graph = version.graph
    graph.refresh_from_db()
    spec = dict(graph.draft)
    spec["input_schema"] = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    saved = world.clients["builder"].patch(f"/api/v1/graphs/{graph.pk}/", {"spec": spec, "base_revision": graph.draft_revision}, format="json")
    assert saved.status_code == 200, saved.content
    published = world.clients["builder"].post(f"/api/v1/graphs/{graph.pk}/versions/", {"message": "x is text now"}, format="json")
    assert published.status_code in (200, 201), published.content
    warnings = [w for w in published.json()["warnings"] if w["subject"]["kind"] == "schedule"]
    assert [w["subject"]["name"] for w in warnings] == ["follows"]
    assert "input.x" in warnings[0]["fields"]


# Firing ---------------------------------------------------------------------------------


def test_a_due_tick_fires_one_run_and_advances(world: Any, version: GraphVersion) -> None:
    body = create(world, version.graph_id, cron=YEARLY)
    due = make_due_now(body["id"])
    with engine.local_mode():
        claimed = engine.step_claim_due("w1")
    run = Run.objects.get()
    assert (run.source, run.input, run.created_by) == ("schedule nightly", {"x": 2}, world.users["builder"])
    assert claimed is not None and claimed.run_id == run.pk  # the claim went on to the run's start step
    schedule = Schedule.objects.get(pk=body["id"])
    assert schedule.next_fire_at > engine.db_now() - timedelta(seconds=1) and schedule.last_run_id == run.pk
    tick = ScheduleTick.objects.get(schedule=schedule)
    assert (tick.tick_at, tick.outcome, tick.run_id, tick.missed, tick.worker) == (due, "started", run.pk, 0, "w1")
    assert run.idempotency_key == f"schedule:{schedule.pk}:{due.strftime('%Y%m%dT%H%M%SZ')}"
    assert AuditEntry.objects.filter(action="schedule.tick", actor="schedule nightly").count() == 1
    with engine.local_mode():
        engine.step_claim_due("w2")  # nothing due any more: no second run
    assert Run.objects.count() == 1 and ScheduleTick.objects.count() == 1


def _outage(world: Any, version: GraphVersion, **fields: Any) -> tuple[Schedule, Any]:
    """A daily schedule whose latest tick was two hours ago and whose due row is three days
    older (the cluster was down): fired once now."""
    now = engine.db_now().replace(second=0, microsecond=0)
    latest = now - timedelta(hours=2)
    body = create(world, version.graph_id, cron=daily_cron_at(latest), **fields)
    make_due(body["id"], at=latest - timedelta(days=3))
    with engine.local_mode():
        _claim_until_idle("w")
    return Schedule.objects.get(pk=body["id"]), latest


def test_missed_ticks_are_skipped_by_default(world: Any, version: GraphVersion) -> None:
    schedule, latest = _outage(world, version)
    assert not Run.objects.exists()
    tick = ScheduleTick.objects.get(schedule=schedule)
    assert (tick.tick_at, tick.outcome, tick.missed) == (latest, "skipped_missed", 4)
    assert schedule.next_fire_at == latest + timedelta(days=1)


def test_catch_up_runs_once_for_the_latest_missed_tick_within_the_window(world: Any, version: GraphVersion) -> None:
    schedule, latest = _outage(world, version, missed_policy="catch_up", catch_up_window_seconds=3 * 3600)
    run = Run.objects.get()
    tick = ScheduleTick.objects.get(schedule=schedule)
    assert (tick.tick_at, tick.outcome, tick.run_id, tick.missed) == (latest, "started", run.pk, 3)
    assert schedule.next_fire_at == latest + timedelta(days=1)


def test_catch_up_outside_the_window_skips(world: Any, version: GraphVersion) -> None:
    schedule, _latest = _outage(world, version, missed_policy="catch_up", catch_up_window_seconds=3600)
    assert not Run.objects.exists()
    assert ScheduleTick.objects.get(schedule=schedule).outcome == "skipped_missed"


@pytest.mark.parametrize(("policy", "runs", "second"), [("skip", 1, "skipped_overlap"), ("allow", 2, "started")])
def test_overlap_policy_while_the_previous_run_is_active(world: Any, version: GraphVersion, policy: str, runs: int, second: str) -> None:
    body = create(world, version.graph_id, cron=YEARLY, overlap_policy=policy)
    make_due_now(body["id"])
    with engine.local_mode():
        _claim_until_idle("w")
        assert Run.objects.get().status in (RunStatus.QUEUED, RunStatus.RUNNING)  # active: nothing executes it
        make_due_now(body["id"])
        _claim_until_idle("w")
    assert Run.objects.count() == runs
    outcomes = list(ScheduleTick.objects.filter(schedule_id=body["id"]).order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["started", second]


def test_overlap_skip_fires_again_once_the_previous_run_ended(world: Any, version: GraphVersion) -> None:
    body = create(world, version.graph_id, cron=YEARLY)
    make_due_now(body["id"])
    with engine.local_mode():
        _claim_until_idle("w")
    Run.objects.update(status=RunStatus.SUCCEEDED)  # as if it ran: what the policy reads
    make_due_now(body["id"])
    with engine.local_mode():
        _claim_until_idle("w")
    assert Run.objects.count() == 2


def test_a_tick_that_cannot_start_is_recorded_and_does_not_block_the_others(world: Any, version: GraphVersion) -> None:
    broken = create(world, version.graph_id, name="broken", cron=YEARLY)
    fine = create(world, version.graph_id, name="fine", cron=YEARLY)
    Schedule.objects.filter(pk=broken["id"]).update(input={"x": "not a number"})  # as if the schema changed under it
    make_due(broken["id"], ago=3)
    make_due(fine["id"], ago=2)
    with engine.local_mode():
        _claim_until_idle("w")
    failed = ScheduleTick.objects.get(schedule_id=broken["id"])
    assert failed.outcome == "failed" and failed.error["code"] == "input_invalid" and "input.x" in failed.error["fields"]
    assert Run.objects.get().source == "schedule fine"
    assert Schedule.objects.get(pk=broken["id"]).next_fire_at > engine.db_now() - timedelta(seconds=1)


def test_a_due_row_set_back_to_a_fired_tick_fires_nothing_and_moves_on(world: Any, version: GraphVersion) -> None:
    body = create(world, version.graph_id, cron=YEARLY, overlap_policy="allow")
    due = make_due_now(body["id"])
    with engine.local_mode():
        _claim_until_idle("w")
        make_due(body["id"], at=due)  # back to the tick that fired
        _claim_until_idle("w")
    assert Run.objects.count() == 1 and ScheduleTick.objects.count() == 1
    assert Schedule.objects.get(pk=body["id"]).next_fire_at > due


def test_a_due_schedule_rings_a_doorbell_once_per_due_time(world: Any, version: GraphVersion) -> None:
    body = create(world, version.graph_id, cron=YEARLY)
    with engine.local_mode() as queue:
        engine.recover_once()
        assert 0 not in queue  # nothing due yet
        make_due(body["id"])
        engine.recover_once()
        engine.recover_once()
        assert list(queue).count(0) == 1  # a schedule's doorbell (hint 0), rung once for this due time
        engine.step_execute_due(0, worker="w")
    assert Run.objects.get().source == "schedule nightly"


# Concurrency: never twice for one tick -------------------------------------------------


SCHEDULES = 12
ROUNDS = 2


def _race_claims(workers: int) -> None:
    """``workers`` threads, each on its own database connection, start the claim by due
    time at once (a barrier) and claim until no schedule is due."""
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def claim(worker: str) -> None:
        try:
            barrier.wait(timeout=10)
            with engine.local_mode():
                _claim_until_idle(worker)
        except BaseException as exc:  # reported below: a crash in a thread must fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(f"w{n}",)) for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors


def test_concurrent_claims_fire_each_tick_exactly_once(world: Any, version: GraphVersion) -> None:
    ids = [create(world, version.graph_id, name=f"s{i}", cron=YEARLY, overlap_policy="allow")["id"] for i in range(SCHEDULES)]
    for round_ in range(ROUNDS):
        for pk in ids:
            make_due_now(pk)  # every round a new tick time
        _race_claims(2)
        assert ScheduleTick.objects.count() == SCHEDULES * (round_ + 1)
    ticks = list(ScheduleTick.objects.values_list("schedule_id", "tick_at", "run_id", "outcome"))
    assert len({(s, t) for s, t, _r, _o in ticks}) == len(ticks) == SCHEDULES * ROUNDS
    assert all(o == "started" for *_rest, o in ticks), ticks
    assert Run.objects.count() == SCHEDULES * ROUNDS
    assert len(set(Run.objects.values_list("idempotency_key", flat=True))) == SCHEDULES * ROUNDS
    assert not Schedule.objects.filter(next_fire_at__lte=engine.db_now() - timedelta(seconds=1)).exists()
