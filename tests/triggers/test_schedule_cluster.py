"""Schedules fired by real qclusters: an idle cluster wakes for a due tick within about a second, and two clusters fire each tick of many schedules exactly once."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from runs.models import Run, RunStatus
from tests.support import engine
from tests.support.bounded import TIME_SLACK, assert_took_under
from tests.support.cluster import WAIT_CEILING, wait_until
from tests.support.schedules import YEARLY, create
from tests.support.specs import publish
from tests.support.webhooks import order_spec
from triggers.models import Schedule, ScheduleTick

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

# How late a tick may be fired by an idle cluster (database clock: fired_at - tick_at):
# the recovery pass (every 0.2 s here) rings the doorbell, a worker answers it. About a
# second is expected; the bound allows a loaded machine.
LAG_BOUND = 2.0 * TIME_SLACK


def _due_soon(ids: list[int], seconds: float) -> Any:
    """Make every schedule of ``ids`` due ``seconds`` from the database's now (whole seconds); returns that time."""
    at = (engine.db_now() + timedelta(seconds=seconds)).replace(microsecond=0)
    Schedule.objects.filter(pk__in=ids).update(next_fire_at=at)
    return at


def test_an_idle_cluster_fires_a_due_tick_about_a_second_late_at_most(world: Any, cluster_factory: Any) -> None:
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    body = create(world, version.graph_id, cron=YEARLY)
    Schedule.objects.filter(pk=body["id"]).update(next_fire_at=engine.db_now() + timedelta(days=1))  # not before the cluster is up
    cluster = cluster_factory("sched", workers=1).start()
    cluster.wait_ready()
    at = _due_soon([body["id"]], 1.0)
    wait_until(lambda: Run.objects.filter(source="schedule nightly", status=RunStatus.SUCCEEDED).exists(), WAIT_CEILING,
               "the schedule's run to succeed", clusters=[cluster])
    tick = ScheduleTick.objects.get(schedule_id=body["id"])
    assert tick.tick_at == at and tick.outcome == "started"
    run = Run.objects.get(pk=tick.run_id)
    assert run.output.get("y") == 4 and run.source == "schedule nightly"
    assert_took_under((tick.fired_at - tick.tick_at).total_seconds(), LAG_BOUND, "the tick's fire lag (database clock)")
    assert Schedule.objects.get(pk=body["id"]).next_fire_at > at


SCHEDULES = 20


def test_two_clusters_fire_each_tick_of_many_schedules_once(world: Any, cluster_factory: Any) -> None:
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    ids = [create(world, version.graph_id, name=f"s{i}", cron=YEARLY, overlap_policy="allow")["id"] for i in range(SCHEDULES)]
    Schedule.objects.filter(pk__in=ids).update(next_fire_at=engine.db_now() + timedelta(days=1))
    clusters = [cluster_factory(name, workers=2).start() for name in ("a", "b")]
    for cluster in clusters:
        cluster.wait_ready()
    at = _due_soon(ids, 1.0)
    wait_until(lambda: Run.objects.filter(status=RunStatus.SUCCEEDED).count() >= SCHEDULES, WAIT_CEILING,
               "every schedule's run to succeed", clusters=clusters)
    for cluster in clusters:
        cluster.wait_recovery_passes(3)  # time for a second firing, were one possible
    ticks = list(ScheduleTick.objects.values_list("schedule_id", "tick_at", "outcome", "fired_at", "worker"))
    assert sorted(s for s, *_ in ticks) == sorted(ids), ticks  # one tick per schedule
    assert {t for _s, t, *_ in ticks} == {at} and {o for _s, _t, o, *_ in ticks} == {"started"}
    assert Run.objects.count() == SCHEDULES
    lags = sorted((fired - tick).total_seconds() for _s, tick, _o, fired, _w in ticks)
    assert_took_under(lags[-1], LAG_BOUND * 2, f"the slowest of {SCHEDULES} ticks' fire lag")
