"""Crash tests with REAL django-q2 clusters whose process groups are killed with SIGKILL.

Every test starts ``manage.py qcluster`` subprocesses (tests/support/cluster.py) on the
test database, arms a named crash point (runs/engine/faults.py) for one node, waits until
a worker reports reaching it, SIGKILLs the whole process group, starts a fresh cluster
without the fault and checks what the design promises (DESIGN.md, "Consequences"):
committed steps never run again, in-flight steps run again with the same idempotency
key, successors committed as rows are found by recovery, parked unsafe steps wait for a
person, approval gates survive a full stop, and a live worker takes over a dead one's
lease at once.

Side effects are counted in the effects file the ``record_effect`` tools append to (one
JSON line per execution, with the step's idempotency key).

Run them (they are also part of the default run; ``-m crash`` selects only them)::

    DATABASE_URL=sqlite:///var/test-run.sqlite3 .venv/bin/pytest -m crash -q
    DATABASE_URL=postgres://root@127.0.0.1:5432/postgres .venv/bin/pytest -m crash -q

Twenty times in a row, stopping at the first failure (pytest-repeat is not installed)::

    for i in $(seq 20); do .venv/bin/pytest -m crash -q || break; done

Add ``-s`` to see the measured takeover times. Afterwards ``pgrep -af qcluster`` must
show no cluster of this suite: every process group is SIGKILLed at teardown.

``test_h``, ``test_i`` and test_worker_liveness.py guard three fixed engine gaps: a
zombie lease owner counted as alive, queue entries a killed cluster had prefetched
waiting 30 s, and a cleanly stopped cluster never deregistering.
"""
from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from django.utils import timezone as dj_timezone
from django_q.models import OrmQ

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.models import RunEvent, Step, StepAttempt, Worker
from runs.services import run_start
from tests.support.bounded import assert_took_under
from tests.support.cluster import describe_db, wait_for_status, wait_until
from tests.support.specs import chain, edge, effect, graph, node, publish
from tests.support.tools import read_effects

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.timeout(400)]

RUN_TIMEOUT = 30.0


# --------------------------------------------------------------------------- helpers


def effect_counts(path) -> Counter:
    """How many times each label's effect executed."""
    return Counter(e["label"] for e in read_effects(str(path)))


def effect_keys(path) -> dict[str, set[str]]:
    """The idempotency keys each label's effect executed with."""
    keys: dict[str, set[str]] = defaultdict(set)
    for e in read_effects(str(path)):
        keys[e["label"]].add(e["key"])
    return keys


def attempts(run, node_id: str) -> list[tuple[int, str]]:
    return list(StepAttempt.objects.filter(step__run=run, step__node_id=node_id).order_by("number").values_list("number", "status"))


def step(run, node_id: str) -> Step:
    return Step.objects.get(run=run, node_id=node_id)


def start_run(spec: dict):
    """Publish ``spec`` and start a run; its start step goes to the django-q2 ORM queue."""
    version = publish(spec)
    return run_start(version=version, run_input={})


def linear_effects_spec() -> dict:
    # start -> e1 -> x -> e2 -> end: every node after start is a recorded side effect.
    return graph(
        [node("start", "start"), effect("e1"), effect("x"), effect("e2"), node("end", "end")],
        chain("start", "e1", "x", "e2", "end"),
    )


def crash_and_restart(cluster_factory, run, fault: str, *, at_kill=None, workers: int | None = None):
    """Run with ``fault`` armed until a worker hangs there, SIGKILL the group, check
    ``at_kill(report)`` on the frozen database, then restart clean and wait for the end.
    ``workers``: the crashed cluster's worker processes (the factory's default when None)."""
    crashed = (cluster_factory("crashed") if workers is None else cluster_factory("crashed", workers=workers)).start(fault=fault)
    report = crashed.wait_for_fault()
    crashed.kill()
    if at_kill is not None:
        at_kill(report)
    fresh = cluster_factory("fresh").start()
    return wait_for_status(run, ("succeeded", "failed", "cancelled"), timeout=RUN_TIMEOUT, clusters=[crashed, fresh])


# --------------------------------------------------------------------------- a, b, c: one crash point each


def test_a_killed_during_execute_reruns_only_the_in_flight_step(cluster_factory, effects_file):
    run = start_run(linear_effects_spec())

    def at_kill(report):
        assert report["point"] == "during_execute" and report["node_id"] == "x"
        assert step(run, "e1").status == "succeeded"
        assert step(run, "x").status == "running"  # lease held by a dead process
        assert effect_counts(effects_file) == {"e1": 1}

    run = crash_and_restart(cluster_factory, run, "during_execute:x", at_kill=at_kill)
    assert run.status == "succeeded", describe_db(run.pk)
    # The fault point is reached before the node's tool call, so x's effect ran once.
    assert effect_counts(effects_file) == {"e1": 1, "x": 1, "e2": 1}
    assert attempts(run, "x") == [(1, "lost"), (2, "succeeded")]
    assert effect_keys(effects_file)["x"] == {step(run, "x").idempotency_key}
    for committed in ("start", "e1"):
        assert attempts(run, committed) == [(1, "succeeded")]
    assert RunEvent.objects.filter(run=run, kind="step_recovered", step__node_id="x").count() == 1


def test_b_killed_before_commit_repeats_the_step_with_the_same_key(cluster_factory, effects_file):
    run = start_run(linear_effects_spec())

    def at_kill(report):
        assert report["point"] == "before_commit"
        assert step(run, "x").status == "running"
        assert effect_counts(effects_file) == {"e1": 1, "x": 1}  # x's effect happened, its commit did not

    run = crash_and_restart(cluster_factory, run, "before_commit:x", at_kill=at_kill)
    assert run.status == "succeeded", describe_db(run.pk)
    assert effect_counts(effects_file) == {"e1": 1, "x": 2, "e2": 1}  # at-least-once for in-flight work
    x = step(run, "x")
    assert effect_keys(effects_file)["x"] == {x.idempotency_key}
    assert sorted(e["attempt"] for e in read_effects(str(effects_file)) if e["label"] == "x") == [1, 2]
    assert attempts(run, "x") == [(1, "lost"), (2, "succeeded")]
    assert attempts(run, "e1") == [(1, "succeeded")]


def test_c_killed_after_commit_recovery_hands_over_the_successor_rows(cluster_factory, effects_file):
    # x fans out to p and q: one successor is leased to x's worker in x's commit (it
    # never started), the other is a pending row that was never handed to the queue.
    spec = graph(
        [node("start", "start"), effect("x"), effect("p"), effect("q"), node("join", "join"), node("end", "end")],
        chain("start", "x") + [edge("x", "p"), edge("x", "q"), edge("p", "join"), edge("q", "join")] + chain("join", "end"),
    )
    run = start_run(spec)

    def at_kill(report):
        assert report["point"] == "after_commit"
        assert step(run, "x").status == "succeeded"
        successors = dict(Step.objects.filter(run=run, node_id__in=("p", "q")).values_list("node_id", "status"))
        assert set(successors) == {"p", "q"}, successors
        assert set(successors.values()) <= {"pending", "running"}
        assert effect_counts(effects_file) == {"x": 1}

    # One worker: a second one may rightly claim a successor, due since x's commit, before
    # the kill (its claim by due time needs no doorbell): no rows would be left to hand over.
    run = crash_and_restart(cluster_factory, run, "after_commit:x", at_kill=at_kill, workers=1)
    assert run.status == "succeeded", describe_db(run.pk)
    assert effect_counts(effects_file) == {"x": 1, "p": 1, "q": 1}
    assert attempts(run, "x") == [(1, "succeeded")]
    assert Step.objects.filter(run=run, node_id="join").count() == 1
    assert attempts(run, "join") == [(1, "succeeded")]


def test_c2_unsafe_successors_that_never_started_run_after_a_crash_not_parked(cluster_factory, effects_file):
    # As c, with successors not safe to repeat: the one leased to x's worker in x's commit
    # never began (no effect_attempt mark), so recovery re-queues it rather than parking it.
    spec = graph(
        [node("start", "start"), effect("x"), effect("p", unsafe=True), effect("q", unsafe=True), node("join", "join"), node("end", "end")],
        chain("start", "x") + [edge("x", "p"), edge("x", "q"), edge("p", "join"), edge("q", "join")] + chain("join", "end"),
    )
    run = start_run(spec)

    def at_kill(report):
        assert report["point"] == "after_commit"
        leased = Step.objects.filter(run=run, node_id__in=("p", "q"), status="running")
        assert leased.count() == 1 and leased.get().effect_attempt is None  # leased, never begun
        assert effect_counts(effects_file) == {"x": 1}

    # One worker: a second one may rightly claim a successor, due since x's commit, before
    # the kill (its claim by due time needs no doorbell): no rows would be left to hand over.
    run = crash_and_restart(cluster_factory, run, "after_commit:x", at_kill=at_kill, workers=1)
    assert run.status == "succeeded", describe_db(run.pk)
    assert effect_counts(effects_file) == {"x": 1, "p": 1, "q": 1}
    assert not ApprovalRequest.objects.filter(run=run, purpose="recovery").exists()
    assert not RunEvent.objects.filter(run=run, kind="step_parked").exists()


# --------------------------------------------------------------------------- d: parallel branches


def test_d_fan_out_keeps_committed_branches_and_reruns_the_unfinished_one(cluster_factory, effects_file):
    spec = graph(
        [node("start", "start"), effect("a"), effect("b"), effect("c"), node("join", "join"), node("end", "end")],
        [edge("start", n) for n in "abc"] + [edge(n, "join") for n in "abc"] + chain("join", "end"),
    )
    run = start_run(spec)
    crashed = cluster_factory("crashed").start(fault="during_execute:c")
    crashed.wait_for_fault()
    # c hangs in one worker; the other worker commits a and b meanwhile.
    wait_until(
        lambda: Step.objects.filter(run=run, node_id__in=("a", "b"), status="succeeded").count() == 2,
        RUN_TIMEOUT,
        "branches a and b to commit",
        clusters=[crashed],
        run_id=run.pk,
    )
    crashed.kill()
    frozen = dict(Step.objects.filter(run=run).values_list("node_id", "status"))
    assert frozen["a"] == frozen["b"] == "succeeded" and frozen["c"] == "running", frozen
    assert "join" not in frozen or frozen["join"] == "pending", frozen
    assert effect_counts(effects_file) == {"a": 1, "b": 1}

    fresh = cluster_factory("fresh").start()
    run = wait_for_status(run, ("succeeded", "failed"), timeout=RUN_TIMEOUT, clusters=[crashed, fresh])
    assert run.status == "succeeded", describe_db(run.pk)
    assert effect_counts(effects_file) == {"a": 1, "b": 1, "c": 1}
    assert attempts(run, "a") == attempts(run, "b") == [(1, "succeeded")]
    assert attempts(run, "c") == [(1, "lost"), (2, "succeeded")]
    assert Step.objects.filter(run=run, node_id="join").count() == 1
    assert attempts(run, "join") == [(1, "succeeded")]


# --------------------------------------------------------------------------- e: approval across a full stop


def test_e_approval_gate_survives_a_full_stop(cluster_factory, effects_file):
    spec = graph(
        [node("start", "start"), effect("before"), node("gate", "approval", config={"prompt": "Ship it?"}), effect("after"), node("end", "end")],
        chain("start", "before", "gate") + [edge("gate", "after", "approved"), edge("after", "end")],
    )
    run = start_run(spec)
    first = cluster_factory("first").start()
    run = wait_for_status(run, "waiting", timeout=RUN_TIMEOUT, clusters=[first])
    first.kill()
    assert not Step.objects.filter(run=run, status="running").exists()
    assert not Step.objects.filter(run=run).exclude(lease_owner="").exists()
    assert not Step.objects.filter(run=run, lease_expires_at__isnull=False).exists()
    assert step(run, "gate").status == "waiting"
    request = ApprovalRequest.objects.get(run=run, purpose="gate", status="pending")

    second = cluster_factory("second").start()
    second.wait_ready()
    second.wait_recovery_passes(3)  # a few recovery passes: nothing to recover
    run.refresh_from_db()
    assert run.status == "waiting" and effect_counts(effects_file) == {"before": 1}

    approval_decide(approval_id=request.pk, decision="approve", actor="tester")
    run = wait_for_status(run, ("succeeded", "failed"), timeout=RUN_TIMEOUT, clusters=[first, second])
    assert run.status == "succeeded", describe_db(run.pk)
    assert run.state["approval"]["decision"] == "approved"
    assert effect_counts(effects_file) == {"before": 1, "after": 1}
    assert attempts(run, "before") == [(1, "succeeded")]
    # A graceful stop (SIGTERM to the qcluster main process) of an idle cluster is quick
    # (to the whole group as well: test_graceful_stop.py).
    took = second.stop(grace=10)
    print(f"\n[stop] SIGTERM -> process group gone {took:.1f} s")
    assert_took_under(took, 5, "a graceful stop of an idle cluster")


# --------------------------------------------------------------------------- f: not safe to repeat


@pytest.mark.parametrize("point", ["during_execute", "before_commit"])
def test_f_unsafe_step_is_parked_not_repeated_until_a_person_retries(cluster_factory, effects_file, point):
    spec = graph([node("start", "start"), effect("pay", unsafe=True), effect("after"), node("end", "end")], chain("start", "pay", "after", "end"))
    run = start_run(spec)
    crashed = cluster_factory("crashed").start(fault=f"{point}:pay")
    crashed.wait_for_fault()
    crashed.kill()
    ran_before_crash = effect_counts(effects_file)["pay"]
    assert ran_before_crash == (1 if point == "before_commit" else 0)

    fresh = cluster_factory("fresh").start()
    run = wait_for_status(run, "waiting", timeout=RUN_TIMEOUT, clusters=[crashed, fresh])
    wait_until(lambda: step(run, "pay").status == "parked", RUN_TIMEOUT, "pay to be parked", clusters=[fresh], run_id=run.pk)
    request = ApprovalRequest.objects.get(run=run, purpose="recovery", status="pending")
    assert request.node_id == "pay"
    fresh.wait_recovery_passes(3)  # recovery passes leave a parked step alone
    assert effect_counts(effects_file)["pay"] == ran_before_crash  # not run again on its own
    assert attempts(run, "pay") == [(1, "lost")]

    approval_decide(approval_id=request.pk, decision="retry", actor="tester")
    run = wait_for_status(run, ("succeeded", "failed"), timeout=RUN_TIMEOUT, clusters=[crashed, fresh])
    assert run.status == "succeeded", describe_db(run.pk)
    assert effect_counts(effects_file) == {"pay": ran_before_crash + 1, "after": 1}
    assert effect_keys(effects_file)["pay"] == {step(run, "pay").idempotency_key}
    assert attempts(run, "pay") == [(1, "lost"), (2, "succeeded")]


# --------------------------------------------------------------------------- g: takeover by a live worker


def _pgid_of_worker(owner: str) -> int | None:
    try:
        return os.getpgid(int(owner.rsplit(":", 2)[1]))
    except (ProcessLookupError, ValueError):
        return None


def test_g_live_cluster_takes_over_a_dead_workers_lease_at_once(cluster_factory, effects_file):
    # The lease must be clearly longer than the takeover: A's last heartbeat may be up to
    # lease/3 old at the kill, so its lease can lapse 2/3 * lease after it; the takeover
    # here is bounded by how soon the killed worker's zombie is reaped (see
    # test_worker_liveness.py: a zombie counts as alive), about 2 s on this machine kind.
    lease = 6.0
    run = start_run(linear_effects_spec())
    a = cluster_factory("A", lease_seconds=lease).start(fault="during_execute:x")
    a.wait_for_fault()  # A's worker holds x's lease (heartbeats keep extending it)
    first_expiry = step(run, "x").lease_expires_at
    b = cluster_factory("B", lease_seconds=lease).start()
    b.wait_ready()
    # B's recovery passes run all along; a live worker's lease is never stolen, not even
    # after the lease it was first claimed with has run out.
    wait_until(lambda: dj_timezone.now() > first_expiry + timedelta(seconds=0.5), RUN_TIMEOUT, "the first lease to run out", clusters=[a, b])
    x = step(run, "x")
    assert x.status == "running" and x.attempt == 1, describe_db(run.pk)
    assert _pgid_of_worker(x.lease_owner) == a.pgid
    assert x.lease_expires_at > first_expiry  # extended by A's heartbeat

    a.kill()
    wait_until(
        lambda: StepAttempt.objects.filter(step=x, number=2).exists(), RUN_TIMEOUT, "x's re-run to start", clusters=[a, b], run_id=run.pk
    )
    rerun = StepAttempt.objects.get(step=x, number=2)
    recovered = RunEvent.objects.get(run=run, kind="step_recovered", step=x)
    to_recovery = recovered.created_at.timestamp() - a.killed_at
    to_rerun = rerun.started_at.timestamp() - a.killed_at
    print(f"\n[takeover] kill -> step_recovered event {to_recovery * 1000:.0f} ms; kill -> re-run attempt start {to_rerun * 1000:.0f} ms")
    assert _pgid_of_worker(rerun.worker) == b.pgid  # B's worker re-ran it
    assert recovered.data["lease_expired"] is False  # taken back because the owner died, not by expiry
    assert_took_under(to_rerun, lease, "the takeover (kill -> re-run attempt start), not faster than lease expiry")

    run = wait_for_status(run, ("succeeded", "failed"), timeout=RUN_TIMEOUT, clusters=[a, b])
    assert run.status == "succeeded", describe_db(run.pk)
    assert effect_counts(effects_file) == {"e1": 1, "x": 1, "e2": 1}
    assert attempts(run, "x") == [(1, "lost"), (2, "succeeded")]


# --------------------------------------------------------------------------- h: queue entries held by a dead cluster


class SlowTakeover(AssertionError):
    """The live cluster did not finish the dead cluster's queued work in time."""


def test_h_steps_prefetched_by_a_killed_cluster_are_taken_over_promptly(cluster_factory, effects_file):
    """A live cluster takes over the queued work a killed cluster had prefetched.

    django-q2 locks a task in the ORM queue for ``retry`` seconds when a cluster pulls it
    into its prefetch buffer (queue_limit); a SIGKILL loses the buffer and the entries stay
    locked. B listens on another queue name so that it cannot race A for the start task;
    it only runs what its own recovery hands to the queue.
    """
    spec = graph(
        [node("start", "start"), effect("a"), effect("b"), effect("c"), node("join", "join"), node("end", "end")],
        [edge("start", n) for n in "abc"] + [edge(n, "join") for n in "abc"] + chain("join", "end"),
    )
    b = cluster_factory("B", extra_env={"BALLAST_Q_NAME": "ballast-b"}).start()
    b.wait_ready()  # B's start-up pass (which re-dispatches every pending step) is over
    run = start_run(spec)
    # One worker of one step thread: it hangs in branch a, b and c sit in A's prefetch buffer.
    a = cluster_factory("A", workers=1, extra_env={"BALLAST_WORKER_STEP_THREADS": "1"}).start(fault="during_execute:a")
    a.wait_for_fault()  # A's only worker hangs in branch a; b and c sit in A's prefetch buffer
    wait_until(
        # the start task (its worker hangs in a, kept in the same task) and b's and c's tasks
        lambda: OrmQ.objects.filter(key="ballast", lock__gt=dj_timezone.now()).count() >= 3,
        RUN_TIMEOUT,
        "A to prefetch b and c",
        clusters=[a, b],
        run_id=run.pk,
    )
    assert effect_counts(effects_file) == {}
    a.kill()
    try:
        run = wait_for_status(run, ("succeeded", "failed"), timeout=10, clusters=[a, b])
    except AssertionError as exc:
        raise SlowTakeover(str(exc)) from None
    print(f"\n[prefetched takeover] kill -> run finished {time.time() - a.killed_at:.1f} s")
    assert run.status == "succeeded", describe_db(run.pk)
    assert effect_counts(effects_file) == {"a": 1, "b": 1, "c": 1}
    assert attempts(run, "a") == [(1, "lost"), (2, "succeeded")]


# --------------------------------------------------------------------------- i: graceful stop


def test_i_graceful_stop_deregisters_the_cluster(cluster_factory):
    cluster = cluster_factory("graceful").start()
    cluster.wait_ready()
    took = cluster.stop(grace=10)
    assert_took_under(took, 5, "a graceful stop")
    # Until its heartbeat ages out, engine.workers_alive() still reports this cluster
    # as live (run_graph then hands runs to a queue nobody serves), and rows pile up.
    assert not Worker.objects.filter(pid=cluster.pid).exists()
