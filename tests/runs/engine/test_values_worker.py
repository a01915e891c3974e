"""A result that cannot be stored, executed by a REAL qcluster worker: the step fails at once.

Before values were checked ahead of the commit, the database's refusal escaped the
worker's task, the step stayed running under its lease, recovery took it back as a lost
worker and ran it again, five times, until the run failed as ``worker_lost`` with the
cause only in the log. Now the run fails on the first attempt with ``invalid_output``
(or ``state_too_large``) naming the key path, and no attempt is marked lost.
"""
from __future__ import annotations

import pytest

from runs.models import AttemptStatus, RunEvent, RunEventKind, Step, StepAttempt
from runs.services import run_start
from tests.support.cluster import wait_for_status
from tests.support.specs import chain, graph, node, publish

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

# Long enough that a lease lapse and recovery cannot happen within the wait below.
LEASE_SECONDS = 20


def one_step(step_node: dict):
    return graph([node("start", "start"), step_node, node("end", "end")], chain("start", step_node["id"], "end"))


def test_a_worker_fails_the_step_at_once_instead_of_losing_it(cluster_factory):
    cluster = cluster_factory(
        "values",
        lease_seconds=LEASE_SECONDS,
        extra_env={"BALLAST_EXTRA_NODE_KINDS": "emit=tests.support.kinds.EmitNode", "BALLAST_MAX_STATE_BYTES": "1000"},
    ).start()
    cluster.wait_ready()
    cases = {
        "nan": (node("a", "emit", config={"value": "nan"}), "invalid_output", "output.result.items[1].price"),
        "nul": (node("a", "emit", config={"value": "nul", "where": "output"}), "invalid_output", "output.text"),
        "tool": (node("a", "tool", config={"tool": "not_json", "args": {"value": "set"}, "output_key": "tags"}), "invalid_output", "output.tags"),
        "big": (node("a", "emit", config={"value": "big", "size": 2000}), "state_too_large", None),
    }
    runs = {name: run_start(version=publish(one_step(spec)), run_input={}) for name, (spec, _, _) in cases.items()}
    healthy = run_start(version=publish(one_step(node("a", "emit", config={"value": "tuple"}))), run_input={})

    for name, run in runs.items():
        _, code, path = cases[name]
        # Well within one lease: the failure is the step's own, not a lapsed lease.
        run = wait_for_status(run, ("failed", "succeeded"), timeout=LEASE_SECONDS - 5, clusters=[cluster])
        assert run.status == "failed", (name, run.error)
        step = Step.objects.get(run=run, node_id="a")
        assert step.error["code"] == code and step.error["retryable"] is False, (name, step.error)
        if path is not None:
            assert step.error["details"]["path"] == path and path in step.error["message"], (name, step.error)
        else:
            assert step.error["details"]["limit"] == 1000 and step.error["details"]["size"] > 1000
        assert run.error["code"] == code
        attempts = list(StepAttempt.objects.filter(step=step).values_list("status", flat=True))
        assert attempts == [AttemptStatus.FAILED], (name, attempts)  # one attempt, never "lost"
        assert not StepAttempt.objects.filter(step__run=run, status=AttemptStatus.LOST).exists()
        assert not RunEvent.objects.filter(run=run, kind__in=(RunEventKind.STEP_RECOVERED, RunEventKind.STEP_RETRYING)).exists()

    # The same worker goes on running other runs.
    healthy = wait_for_status(healthy, ("failed", "succeeded"), timeout=LEASE_SECONDS - 5, clusters=[cluster])
    assert healthy.status == "succeeded" and healthy.state["result"] == {"pair": [1, [2, 3]]}
