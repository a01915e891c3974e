"""Parallel branches run in parallel, and a cancel reaches running work at once.

A process runs up to BALLAST_WORKER_STEP_THREADS claimed steps at once (runs.engine.loop's
step threads), in-process and in a real qcluster's worker processes, bounded further by
each run's max_parallelism. Concurrency is proven without a clock: the ``rendezvous``
tool is a barrier that a branch running alone waits at in vain (and then fails), and it
records how many branches were running at once. A cancelled run's in-flight steps see
their cancel event (tools through their context, model calls through the SDK's
connection, shut down) and end cancelled, never as successes after ``run_cancelled``.
"""
from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest
from django.db import connections

from runs.engine import api as engine
from runs.models import RunEvent, Step, StepAttempt
from runs.providers import get_provider
from runs.providers.base import LLMRequest, Message
from runs.services import run_cancel, run_start
from runs.vocabulary import CancelEvent, StepCancelled
from tests.support.bounded import finishes_within
from tests.support.cluster import WAIT_CEILING, describe_db, wait_for_status, wait_until
from tests.support.llm_server import Fault
from tests.support.specs import edge, graph, node, publish, run_local
from tests.support.tools import read_effects

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("effects_file")]


def fan_out(branches: list[dict], *, max_parallelism: int) -> dict:
    """start -> every branch -> join -> end."""
    ids = [b["id"] for b in branches]
    return graph(
        [node("start", "start"), *branches, node("join", "join"), node("end", "end")],
        [edge("start", b) for b in ids] + [edge(b, "join") for b in ids] + [edge("join", "end")],
        settings={"max_parallelism": max_parallelism},
    )


def rendezvous(label: str, where: Path, expect: int, *, max_seconds: float = 60) -> dict:
    args = {"label": label, "dir": str(where), "expect": expect, "max_seconds": max_seconds}
    return node(label, "tool", config={"tool": "rendezvous", "args": args})


def peaks(where: Path) -> list[dict]:
    """What each rendezvous branch saw as it started: how many were running, where."""
    path = where / "peaks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def node_statuses(run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run, parent__isnull=True).values_list("node_id", "status"))


# --------------------------------------------------------------------------- in-process


def test_an_in_process_fan_out_runs_its_branches_at_once(tmp_path):
    n = 5
    run = run_local(fan_out([rendezvous(f"b{i}", tmp_path, n) for i in range(n)], max_parallelism=n))
    assert run.status == "succeeded", describe_db(run.pk)  # alone, a branch waits at the barrier and fails
    seen = peaks(tmp_path)
    assert max(p["active"] for p in seen) == n
    assert len({p["thread"] for p in seen}) == n  # each on a thread of its own
    # Every branch ran once, and the join and end after all of them.
    assert Counter(e["label"] for e in read_effects()) == {f"b{i}": 1 for i in range(n)}
    assert set(node_statuses(run).values()) == {"succeeded"}


def test_max_parallelism_caps_the_steps_of_a_run_that_run_at_once(tmp_path):
    run = run_local(fan_out([rendezvous(f"b{i}", tmp_path, 2) for i in range(6)], max_parallelism=2))
    assert run.status == "succeeded", describe_db(run.pk)
    seen = peaks(tmp_path)
    assert len(seen) == 6 and max(p["active"] for p in seen) == 2  # two at once, never three


def test_the_step_threads_setting_caps_a_process(tmp_path, settings):
    settings.BALLAST_WORKER_STEP_THREADS = 3
    run = run_local(fan_out([rendezvous(f"b{i}", tmp_path, 3) for i in range(6)], max_parallelism=6))
    assert run.status == "succeeded", describe_db(run.pk)
    seen = peaks(tmp_path)
    assert len(seen) == 6 and max(p["active"] for p in seen) == 3


def test_one_step_thread_runs_the_branches_one_after_another(tmp_path, settings):
    settings.BALLAST_WORKER_STEP_THREADS = 1
    run = run_local(fan_out([rendezvous(f"b{i}", tmp_path, 1) for i in range(3)], max_parallelism=3))
    assert run.status == "succeeded", describe_db(run.pk)
    assert [p["active"] for p in peaks(tmp_path)] == [1, 1, 1]
    assert len({p["thread"] for p in peaks(tmp_path)}) == 1  # all on the driving thread


def test_a_branch_that_cannot_meet_the_others_fails_the_run(tmp_path, settings):
    """The barrier can fail: the tests above would, had the branches run one at a time."""
    settings.BALLAST_WORKER_STEP_THREADS = 1
    run = run_local(fan_out([rendezvous(f"b{i}", tmp_path, 2, max_seconds=0.3) for i in range(2)], max_parallelism=2))
    assert run.status == "failed" and run.error["code"] == "alone", run.error


def test_cancel_in_process_ends_the_running_branches_cancelled_at_once(tmp_path):
    branches = [node(f"b{i}", "tool", config={"tool": "until_cancelled", "args": {"label": f"b{i}"}}) for i in range(3)]
    version = publish(fan_out(branches, max_parallelism=3))
    started: list = []
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            with engine.local_mode() as queue:
                started.append(run_start(version=version, run_input={}))
                engine.drive_local(started[0].pk, queue=queue, timeout=120)
        except BaseException as exc:  # re-raised by the test
            errors.append(exc)
        finally:
            connections.close_all()

    driver = threading.Thread(target=drive, name="drive")
    driver.start()
    try:
        wait_until(lambda: len(read_effects()) == 3, WAIT_CEILING, "the three branches running")
        run = started[0]
        with finishes_within(WAIT_CEILING, "a cancelled in-process drive"):
            assert run_cancel(run=run, actor="tester")
            driver.join(WAIT_CEILING)
    finally:
        driver.join(WAIT_CEILING)
    assert not errors, errors
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert_ended_cancelled(run, [f"b{i}" for i in range(3)])


def assert_ended_cancelled(run, branches: list[str]) -> None:
    """Each branch saw its cancel event and its step ended cancelled; no step succeeded
    after ``run_cancelled``; join and end never ran."""
    labels = Counter(e["label"] for e in read_effects())
    assert {b: labels[f"cancelled:{b}"] for b in branches} == dict.fromkeys(branches, 1), labels
    statuses = node_statuses(run)
    assert {b: statuses[b] for b in branches} == dict.fromkeys(branches, "cancelled"), describe_db(run.pk)
    assert "join" not in statuses and "end" not in statuses
    for b in branches:
        step = Step.objects.get(run=run, node_id=b)
        assert step.error["code"] == "cancelled" and step.output is None and step.lease_owner == ""
        assert list(StepAttempt.objects.filter(step=step).values_list("status", flat=True)) == ["failed"]
    cancelled_at = RunEvent.objects.get(run=run, kind="run_cancelled").seq
    assert not RunEvent.objects.filter(run=run, kind="step_succeeded", seq__gt=cancelled_at).exists()
    assert RunEvent.objects.filter(run=run, kind="step_failed", seq__gt=cancelled_at, data__error__code="cancelled").count() == len(branches)


# --------------------------------------------------------------------------- a real qcluster


def test_one_worker_process_runs_a_fan_out_at_once(cluster_factory, tmp_path):
    n = 4
    cluster = cluster_factory("p", workers=1).start()
    run = run_start(version=publish(fan_out([rendezvous(f"b{i}", tmp_path / "meet", n) for i in range(n)], max_parallelism=n)), run_input={})
    run = wait_for_status(run, ("succeeded", "failed"), timeout=WAIT_CEILING, clusters=[cluster])
    assert run.status == "succeeded", describe_db(run.pk)
    seen = peaks(tmp_path / "meet")
    assert max(p["active"] for p in seen) == n and len({p["pid"] for p in seen}) == 1  # one process, n at once


def test_cancel_reaches_the_running_branches_of_a_worker(cluster_factory):
    branches = [node(f"b{i}", "tool", config={"tool": "until_cancelled", "args": {"label": f"b{i}"}}) for i in range(3)]
    cluster = cluster_factory("c", workers=1, lease_seconds=30).start()
    run = run_start(version=publish(fan_out(branches, max_parallelism=3)), run_input={})
    wait_until(lambda: len(read_effects()) == 3, WAIT_CEILING, "the three branches running", clusters=[cluster], run_id=run.pk)
    assert run_cancel(run=run, actor="tester")
    # Well before a heartbeat (a third of the 30 s lease) could tell them.
    with finishes_within(8, "the running branches ending after a cancel"):
        wait_until(lambda: not Step.objects.filter(run=run, status="running").exists(), WAIT_CEILING, "no step running", clusters=[cluster])
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert_ended_cancelled(run, [f"b{i}" for i in range(3)])


def test_sigterm_lets_every_concurrent_step_finish(cluster_factory, effects_file):
    branches = [node(f"b{i}", "tool", config={"tool": "record_effect", "args": {"label": f"b{i}", "sleep": 1.5}}) for i in range(3)]
    cluster = cluster_factory("s", workers=1, extra_env={"BALLAST_STOP_GRACE_SECONDS": "12"}).start()
    run = run_start(version=publish(fan_out(branches, max_parallelism=3)), run_input={})
    wait_until(lambda: len(read_effects()) == 3, WAIT_CEILING, "the three branches running", clusters=[cluster], run_id=run.pk)
    cluster.stop(grace=30)
    for b in ("b0", "b1", "b2"):  # each finished in the grace period, none was killed
        assert list(StepAttempt.objects.filter(step__run=run, step__node_id=b).values_list("number", "status")) == [(1, "succeeded")], describe_db(run.pk)
    assert not Step.objects.filter(run=run, status="running").exists(), describe_db(run.pk)
    fresh = cluster_factory("fresh", workers=1).start()
    run = wait_for_status(run, ("succeeded", "failed"), timeout=WAIT_CEILING, clusters=[fresh])
    assert run.status == "succeeded", describe_db(run.pk)
    assert Counter(e["label"] for e in read_effects()) == {"b0": 1, "b1": 1, "b2": 1}  # nothing ran twice


def test_sigkill_mid_fan_out_runs_again_only_the_steps_in_flight(cluster_factory, tmp_path):
    release = tmp_path / "release"
    quick = [node(f"q{i}", "tool", config={"tool": "record_effect", "args": {"label": f"q{i}"}}) for i in range(2)]
    held = [node(f"h{i}", "tool", config={"tool": "held_effect", "args": {"label": f"h{i}", "release": str(release)}}) for i in range(2)]
    cluster = cluster_factory("k", workers=1).start()
    run = run_start(version=publish(fan_out(quick + held, max_parallelism=4)), run_input={})

    def quick_done_and_held_running() -> bool:
        statuses = node_statuses(run)
        labels = {e["label"] for e in read_effects()}
        return all(statuses.get(f"q{i}") == "succeeded" for i in range(2)) and {"h0", "h1"} <= labels

    wait_until(quick_done_and_held_running, WAIT_CEILING, "the quick branches committed, the held ones running", clusters=[cluster], run_id=run.pk)
    assert [node_statuses(run)[h] for h in ("h0", "h1")] == ["running", "running"]
    cluster.kill()
    release.touch()
    fresh = cluster_factory("fresh", workers=1).start()
    run = wait_for_status(run, ("succeeded", "failed"), timeout=WAIT_CEILING, clusters=[cluster, fresh])
    assert run.status == "succeeded", describe_db(run.pk)
    effects = read_effects()
    counts = Counter(e["label"] for e in effects)
    assert counts == {"q0": 1, "q1": 1, "h0": 2, "h1": 2}, counts  # committed steps never again; in-flight ones again
    for h in ("h0", "h1"):
        assert len({e["key"] for e in effects if e["label"] == h}) == 1  # with the same idempotency key
        assert list(StepAttempt.objects.filter(step__run=run, step__node_id=h).values_list("status", flat=True)) == ["lost", "succeeded"]


# --------------------------------------------------------------------------- the model call


def test_a_cancel_aborts_the_model_call_in_flight(sdk_providers):
    sdk_providers.fail(Fault(delay=60))  # the model would take a minute (the client gives up at 10 s)
    openai = get_provider("openai")
    cancel = CancelEvent()
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            outcome.append(openai.complete(LLMRequest(model="gpt-4o", messages=[Message("user", "Hello")], cancel_event=cancel)))
        except BaseException as exc:  # looked at below
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    wait_until(lambda: len(sdk_providers.calls()) == 1, WAIT_CEILING, "the request at the server")
    with finishes_within(8, "the model call after its cancel (its timeout is 10 s)"):
        cancel.set()
        caller.join(WAIT_CEILING)
    assert len(outcome) == 1 and isinstance(outcome[0], StepCancelled), outcome


def test_a_cancel_before_the_call_sends_nothing(sdk_providers):
    cancel = CancelEvent()
    cancel.set()
    with pytest.raises(StepCancelled):
        get_provider("openai").complete(LLMRequest(model="gpt-4o", messages=[Message("user", "Hello")], cancel_event=cancel))
    assert sdk_providers.calls() == []


def test_a_model_call_on_another_thread_goes_on_when_one_is_cancelled(sdk_providers):
    """Calls of one client share its connection pool, never a connection: a cancel shuts
    down only the cancelled call's."""
    sdk_providers.fail(Fault(delay=60), Fault(delay=1.5))  # both in flight when the first is cancelled
    openai = get_provider("openai")
    cancel, other = CancelEvent(), CancelEvent()
    outcomes: dict[str, object] = {}

    def call(name: str, event: CancelEvent) -> None:
        try:
            outcomes[name] = openai.complete(LLMRequest(model="gpt-4o", messages=[Message("user", name)], cancel_event=event))
        except BaseException as exc:  # looked at below
            outcomes[name] = exc

    slow = threading.Thread(target=call, args=("slow", cancel))
    slow.start()
    wait_until(lambda: len(sdk_providers.calls()) == 1, WAIT_CEILING, "the first request at the server")
    steady = threading.Thread(target=call, args=("steady", other))
    steady.start()
    wait_until(lambda: len(sdk_providers.calls()) == 2, WAIT_CEILING, "the second request at the server")
    cancel.set()
    slow.join(WAIT_CEILING)
    steady.join(WAIT_CEILING)
    assert isinstance(outcomes["slow"], StepCancelled), outcomes
    assert getattr(outcomes["steady"], "text", None) == "Echo: steady", outcomes
