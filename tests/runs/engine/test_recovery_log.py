"""Recovery logs each step once: one line when a step is taken back from a dead worker
(re-queued or parked), none again on later passes that re-dispatch it, and a step taken
back in a pass that also re-dispatches everything is handed to the queue once."""
from __future__ import annotations

import logging

import pytest
from django.utils import timezone

from runs.engine import recovery
from runs.models import Step, Worker
from tests.support import engine
from tests.support.leases import begun, dead_owner, pay_version, run_at_pay

pytestmark = pytest.mark.django_db(transaction=True)


def naming(caplog, step_id: int) -> list[str]:
    """Recovery log lines at INFO or above that name step ``step_id``."""
    lines = []
    for record in caplog.records:
        if record.name != "ballast.recovery" or record.levelno < logging.INFO:
            continue
        text = record.getMessage()
        words = text.replace("[", " ").replace("]", " ").replace(",", " ").split()
        if str(step_id) in words:
            lines.append(text)
    return lines


def test_a_step_taken_back_is_logged_once_over_repeated_passes(caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="ballast.recovery")
    # Nobody claims the re-queued step, so every pass finds its queue entry stale and
    # hands it over again (a lost Redis entry looks the same).
    monkeypatch.setattr(recovery, "STALE_DISPATCH_SECONDS", 0.0)
    run, pay = run_at_pay()
    owner = dead_owner()
    assert engine.step_claim(pay.pk, owner) is not None
    # The dead worker's cluster row is still there: the first pass also re-dispatches
    # every pending step, the one it just took back included.
    now = timezone.now()
    Worker.objects.create(name=owner, host=owner.rsplit(":", 2)[0], pid=int(owner.rsplit(":", 2)[1]), started_at=now, heartbeat_at=now)
    handed: list[list[int]] = []
    with engine.local_mode() as queue:
        for _ in range(4):
            handed.append(engine.recover_once())
            queue.clear()
    assert handed[0] == [pay.pk]  # once, though both the take-back and the re-dispatch chose it
    assert all(ids == [pay.pk] for ids in handed[1:])  # re-dispatched on every pass
    lines = naming(caplog, pay.pk)
    assert len(lines) == 1, lines
    assert f"run {run.pk}" in lines[0] and "node pay" in lines[0] and owner in lines[0] and "re-queued" in lines[0]
    assert Step.objects.get(pk=pay.pk).status == "pending"


def test_a_parked_step_is_logged_once(caplog):
    caplog.set_level(logging.INFO, logger="ballast.recovery")
    run, pay = run_at_pay(pay_version(unsafe=True))
    begun(engine.step_claim(pay.pk, dead_owner()))
    with engine.local_mode():
        for _ in range(3):
            engine.recover_once()
    assert Step.objects.get(pk=pay.pk).status == "parked"
    lines = naming(caplog, pay.pk)
    assert len(lines) == 1, lines
    assert "parked for a decision" in lines[0] and f"run {run.pk}" in lines[0]


def test_an_unsafe_step_leased_but_never_begun_is_requeued_and_one_begun_is_parked():
    run, pay = run_at_pay(pay_version(unsafe=True))
    assert engine.step_claim(pay.pk, dead_owner()) is not None  # leased; its worker died before the node ran
    with engine.local_mode():
        engine.recover_once()
    pay.refresh_from_db()
    assert pay.status == "pending" and pay.effect_attempt is None
    begun(engine.step_claim(pay.pk, dead_owner()))  # the next attempt got as far as its call
    with engine.local_mode():
        engine.recover_once()
    pay.refresh_from_db()
    assert pay.status == "parked" and pay.effect_attempt == pay.attempt == 2


def test_a_worker_whose_lease_was_taken_back_does_not_begin_the_step():
    from runs.engine.store import claims

    run, pay = run_at_pay(pay_version(unsafe=True))
    stale = engine.step_claim(pay.pk, dead_owner())
    with engine.local_mode():
        engine.recover_once()
    assert not claims.mark_effect_begun(stale)
    error = engine.execute_node(stale)
    assert error.code == "lease_lost"
    assert Step.objects.get(pk=pay.pk).status == "pending"
