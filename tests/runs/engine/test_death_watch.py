"""A dead same-host worker's step is taken back as soon as the process exits, not at the next recovery interval."""
from __future__ import annotations

import subprocess
import threading
import time

import pytest

from runs.engine import recovery
from runs.engine.workers import worker_id
from tests.support.bounded import TIME_SLACK, assert_took_at_least, assert_took_under, stopwatch, wait_until

pytestmark = pytest.mark.skipif(not recovery.DeathWatch.supported(), reason="pidfds are Linux's")


def test_wait_returns_when_a_watched_process_exits():
    proc = subprocess.Popen(["sleep", "60"])
    watch = recovery.DeathWatch()
    try:
        watch.watch({proc.pid})
        threading.Timer(0.2, proc.kill).start()
        began = stopwatch()
        exited = watch.wait(30)
        assert exited == [proc.pid]
        assert_took_under(began.elapsed, 2 * TIME_SLACK, "the wait ended by the death")  # not the 30 s timeout
        # Exited pids are not watched again (a zombie's pidfd stays readable: no spin).
        watch.watch({proc.pid})
        began = stopwatch()
        assert watch.wait(0.2) == []
        assert_took_at_least(began.elapsed, 0.15, "a 0.2 s wait with only a reaped pid watched")
    finally:
        proc.kill()
        proc.wait()
        watch.close()


def test_wake_interrupts_a_wait():
    watch = recovery.DeathWatch()
    try:
        threading.Timer(0.1, watch.wake).start()
        began = stopwatch()
        assert watch.wait(30) == []
        assert_took_under(began.elapsed, 2 * TIME_SLACK, "the wait ended by wake()")
    finally:
        watch.close()


@pytest.mark.django_db(transaction=True)
def test_supervisor_takes_a_dead_owners_step_back_within_a_fraction_of_its_interval(settings):
    from runs.models import Step, Worker
    from runs.services import run_start
    from tests.support import engine
    from tests.support.specs import chain, graph, node, publish, transform

    # An interval far longer than the test may take: only the death can wake the pass.
    settings.BALLAST_RECOVERY_INTERVAL = 60.0
    version = publish(graph([node("start", "start"), transform("t0", x="x + 1"), node("end", "end")], chain("start", "t0", "end"),
                            state={"x": {"default": 0}}))
    owner_proc = subprocess.Popen(["sleep", "60"])
    supervisor = recovery.Supervisor(wait_for_children=False)
    try:
        with engine.local_mode() as queue:
            run = run_start(version=version, run_input={})
            claimed = engine.step_claim(queue.popleft(), worker_id(owner_proc.pid))
        assert claimed is not None
        # A pass ends by watching the pids that hold leases here: the first such call is
        # the end of the first pass.
        passed, watch = threading.Event(), supervisor.deaths.watch

        def watch_and_tell(pids: set[int]) -> None:
            watch(pids)
            passed.set()

        supervisor.deaths.watch = watch_and_tell
        supervisor.start()
        assert passed.wait(30), "the supervisor's first pass never ended"
        assert Worker.objects.exists()
        assert Step.objects.get(pk=claimed.step_id).status == "running"  # the owner is alive: its lease stays
        owner_proc.kill()
        killed = stopwatch()
        wait_until(lambda: Step.objects.get(pk=claimed.step_id).status != "running", 10, "the dead owner's step to be taken back", poll=0.01)
        took = killed.elapsed
        step = Step.objects.get(pk=claimed.step_id)
        assert step.status == "pending", step.status
        assert_took_under(took, 2 * TIME_SLACK, "taking back a dead owner's step")  # the pass ran on the death, not 60 s later
    finally:
        owner_proc.kill()
        owner_proc.wait()
        supervisor.stop()
        supervisor.join(timeout=10)
    assert not supervisor.is_alive()
    assert run.pk


def test_a_failing_pass_waits_its_interval_instead_of_spinning(monkeypatch, settings):
    # The database unreachable (a cut network): the heartbeat raised before the next beat
    # was set, so the pass's wait got a timeout of 0 and the thread retried at once,
    # logging a traceback each time, as fast as connections failed.
    from django.db import OperationalError
    from django.utils import timezone

    settings.BALLAST_RECOVERY_INTERVAL = 60.0
    beats: list[float] = []

    def unreachable(*args: object) -> None:
        beats.append(time.monotonic())
        raise OperationalError("connection timeout expired")

    monkeypatch.setattr(recovery.recovery_queries, "worker_heartbeat", unreachable)
    # No database in this test: the clock too (on PostgreSQL it reads the database's).
    monkeypatch.setattr(recovery.clock, "now", timezone.now)
    monkeypatch.setattr(recovery.recovery_queries, "worker_remove", lambda name: None)
    supervisor = recovery.Supervisor(wait_for_children=False)
    waits: list[float] = []
    waited = threading.Event()
    real_wait = supervisor.deaths.wait

    def wait(timeout: float) -> list[int]:
        waits.append(timeout)
        waited.set()
        return real_wait(timeout)

    monkeypatch.setattr(supervisor.deaths, "wait", wait)
    supervisor.start()
    try:
        assert waited.wait(30), "the supervisor never waited after its failed pass"
    finally:
        supervisor.stop()
        supervisor.join(timeout=10)
    assert not supervisor.is_alive()
    assert len(beats) == 1
    assert waits[0] > 50, waits  # the interval (60 s) less the pass's time, not 0
