"""One due step whose claim raises (a run row the database cannot read back, as a budget
past its column left on SQLite) must not fail every doorbell and leave every run queued:
it is set aside like a backoff and the next due step is claimed."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

import pytest
from django.db import connection
from django.utils import timezone

from runs.engine import api as engine
from runs.engine import loop as engine_loop
from runs.engine.store import claims
from runs.models import Step
from runs.services import run_start
from tests.support.specs import chain, graph, node, publish, transform

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_step_whose_claim_raises_does_not_block_the_steps_due_after_it(monkeypatch):
    version = publish(graph([node("start", "start"), transform("t", x="1"), node("end", "end")], chain("start", "t", "end")))
    with engine.local_mode():  # queued, not run: both start steps stay pending and due
        # Budgets keep PostgreSQL's one-statement claim out: the portable claim decides.
        poisoned = run_start(version=version, budget_usd=Decimal("1"))
        healthy = run_start(version=version, budget_usd=Decimal("1"))
    real = claims.budget_refusal

    def unreadable(run, step, state):
        if run.pk == poisoned.pk:
            raise InvalidOperation("[<class 'decimal.InvalidOperation'>]")  # what SQLite's row gave
        return real(run, step, state)

    monkeypatch.setattr(claims, "budget_refusal", unreadable)
    claimed = engine_loop.step_claim_due("worker-1")
    assert claimed is not None and claimed.run_id == healthy.pk
    stuck = Step.objects.get(run=poisoned)
    assert stuck.status == "pending" and stuck.attempt == 0 and stuck.available_at > timezone.now()
    assert engine_loop.step_claim_due("worker-1") is None  # set aside, not retried at once


def test_a_run_row_sqlite_cannot_read_back_does_not_block_other_runs():
    # What a budget past the column left behind before specs were bounded: SQLite stores
    # 10**13 as given and Django's read of the row raises decimal.InvalidOperation.
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL's numeric column refuses such a value when it is written")
    version = publish(graph([node("start", "start"), transform("t", x="1"), node("end", "end")], chain("start", "t", "end")))
    with engine.local_mode():
        poisoned = run_start(version=version, budget_usd=Decimal("1"))
        healthy = run_start(version=version, budget_usd=Decimal("1"))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE runs_run SET budget_usd = %s WHERE id = %s", [1e13, poisoned.pk])
    claimed = engine_loop.step_claim_due("worker-1")
    assert claimed is not None and claimed.run_id == healthy.pk
    assert Step.objects.get(run=poisoned).status == "pending"
