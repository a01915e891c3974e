"""The chaos suite's schedule-fires-once and child-runs-once checks (tests/chaos/suite.py) catch what they claim to: a lost tick, a tick's second run, a stray run, a missing child, a parent without its child's output.

No root and no hosts: these run the suite's figure functions on rows made by the engine
in this process (a tick fired by the claim, a parent and child run driven locally), then
break the rows as a defect would and watch the figure move. Collected by every pass of
``make test`` (no ``chaos`` marker).
"""
from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from runs.models import Run, Step
from runs.services import run_start
from tests.chaos.suite import Cycle, child_figures, parked_for_person, schedule_figures
from tests.support import engine
from tests.support.schedules import YEARLY, create, make_due, make_due_now
from tests.support.specs import publish, run_local
from tests.support.subgraphs import call_spec, child_of, child_spec, waiting_child
from tests.support.webhooks import order_spec
from triggers.models import ScheduleTick

pytestmark = pytest.mark.usefixtures("fast_passwords")


def _fire_all() -> None:
    """Fire every due schedule by the engine's claim (the runs' steps stay leased: nothing executes them)."""
    with engine.local_mode():
        for _ in range(20):
            engine.step_claim_due("w1")


def test_schedule_figures_count_a_lost_tick_a_second_run_and_a_stray_run_once(world: Any) -> None:
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    fired, unfired = (create(world, version.graph_id, name=f"chaos-{i}", cron=YEARLY, overlap_policy="allow")["id"] for i in (1, 2))
    at = make_due_now(fired)
    _fire_all()
    late = make_due(unfired, at=engine.db_now().replace(microsecond=0) + timedelta(days=1))  # due tomorrow: not fired
    suite = SimpleNamespace(schedule_ids=[fired, unfired], stray_schedule_runs=set())

    ok = schedule_figures(Cycle("sigkill", ticks=[(fired, at)]), suite)
    assert (ok["ticks_due"], ok["ticks_not_once"], len(ok["tick_lag"])) == (1, 0, 1)

    lost = schedule_figures(Cycle("sigkill", ticks=[(fired, at), (unfired, late)]), suite)
    assert (lost["ticks_lost"], lost["ticks_not_once"]) == (1, 1)

    # A second run of the tick, started under another key: stray, and the tick row no
    # longer names the run its key started.
    tick = ScheduleTick.objects.get(schedule_id=fired)
    second = run_start(version=version, run_input={"x": 1}, source="schedule chaos-1")
    stray = schedule_figures(Cycle("sigkill", ticks=[(fired, at)]), suite)
    assert (stray["ticks_stray_runs"], stray["ticks_not_once"]) == (1, 1)
    assert schedule_figures(Cycle("sigkill", ticks=[(fired, at)]), suite)["ticks_not_once"] == 0  # counted once
    ScheduleTick.objects.filter(pk=tick.pk).update(run=second)
    twice = schedule_figures(Cycle("sigkill", ticks=[(fired, at)]), suite)
    # The key's own run is now the one no row names: a stray as well.
    assert (twice["ticks_fired_twice"], twice["ticks_stray_runs"], twice["ticks_not_once"]) == (1, 1, 2)
    ScheduleTick.objects.filter(pk=tick.pk).update(outcome="skipped_missed", run=None)
    assert schedule_figures(Cycle("sigkill", ticks=[(fired, at)]), suite)["ticks_not_started"] == 1


@pytest.mark.django_db(transaction=True)
def test_child_figures_count_a_missing_child_and_a_parent_without_its_output() -> None:
    child = publish(child_spec())
    parent = run_local(call_spec(child.graph_id, input={"n": "{{ input.x }}"}), {"x": 3})
    kid = child_of(parent, "call")
    assert parent.status == "succeeded" and parent.output["result"] == kid.output == {"doubled": 6}

    def figures() -> dict[str, Any]:
        steps = list(Step.objects.filter(run=parent).values("id", "run_id", "node_id", "status", "attempt", "idempotency_key"))
        runs = dict(Run.objects.filter(pk=parent.pk).values_list("pk", "status"))
        return child_figures(Cycle("sigkill", run_ids=[parent.pk]), steps, runs)

    assert figures() == {"subgraph_steps": 1, "child_runs_extra": 0, "child_runs_missing": 0, "parent_output_wrong": 0, "child_not_once": 0}
    Run.objects.filter(pk=parent.pk).update(output={"result": {"doubled": 7}})
    assert (figures()["parent_output_wrong"], figures()["child_not_once"]) == (1, 1)
    Run.objects.filter(pk=kid.pk).update(parent_step=None)
    assert (figures()["child_runs_missing"], figures()["child_not_once"]) == (1, 2)


@pytest.mark.django_db(transaction=True)
def test_a_parent_waiting_for_a_parked_child_is_parked_for_a_person() -> None:
    parent, kid = waiting_child()
    assert parked_for_person({parent.pk, kid.pk}) == set()
    Step.objects.filter(run=kid, node_id="review").update(status="parked")
    assert parked_for_person({parent.pk, kid.pk}) == {parent.pk, kid.pk}
