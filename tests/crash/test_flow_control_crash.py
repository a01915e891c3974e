"""Flow control across a crash (runs.engine.store.flow), with REAL qcluster processes SIGKILLed: a run that holds its graph's only place when its worker dies keeps the place (no slot leaks, none is given away), is resumed by recovery, and its end admits the run waiting behind it."""
from __future__ import annotations

import pytest

from graphs.models import Graph
from runs.models import Run, Step
from runs.services import run_start
from tests.support.cluster import describe_db, wait_for_status
from tests.support.specs import chain, effect, graph, node, publish
from tests.support.tools import read_effects

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]


def test_a_worker_killed_while_its_run_holds_the_place_leaks_nothing(cluster_factory, effects_file):
    version = publish(graph([node("start", "start"), effect("e1"), effect("x"), node("end", "end")], chain("start", "e1", "x", "end"), name="one at a time"))
    Graph.objects.filter(pk=version.graph_id).update(max_concurrent_runs=1)
    version.graph.refresh_from_db()  # the graph a start judges by is the one loaded with its version
    first = run_start(version=version, run_input={})
    second = run_start(version=version, run_input={})
    assert Run.objects.get(pk=second.pk).flow_held

    crashed = cluster_factory("crashed", workers=1).start(fault="during_execute:x")
    report = crashed.wait_for_fault()
    crashed.kill()
    assert report["node_id"] == "x"
    # The dead worker's run still holds the only place: the second waits, with no step.
    assert Run.objects.get(pk=first.pk).status == "running"
    assert Run.objects.get(pk=second.pk).flow_held and not Step.objects.filter(run_id=second.pk).exists()

    fresh = cluster_factory("fresh").start()
    done = wait_for_status(first, ("succeeded", "failed"), timeout=60, clusters=[crashed, fresh])
    assert done.status == "succeeded", describe_db(first.pk)
    later = wait_for_status(second, ("succeeded", "failed"), timeout=60, clusters=[crashed, fresh])
    assert later.status == "succeeded", describe_db(second.pk)
    # One run at a time: the second's first effect came after the first run's last one.
    labels = [(e["key"], e["label"]) for e in read_effects(str(effects_file))]
    first_keys = set(Step.objects.filter(run_id=first.pk).values_list("idempotency_key", flat=True))
    order = ["first" if key in first_keys else "second" for key, _ in labels]
    assert order == sorted(order), order  # every effect of the first run before any of the second
    assert Run.objects.get(pk=second.pk).started_at >= Run.objects.get(pk=first.pk).finished_at
