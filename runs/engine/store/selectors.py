"""Reads of run and step rows the orchestration above the store needs (a status, a flag, a row)."""
from __future__ import annotations

from runs.models import Run, Step


def run_status(run_id: int) -> str:
    """Run ``run_id``'s status as committed. Raises Run.DoesNotExist."""
    return str(Run.objects.values_list("status", flat=True).get(pk=run_id))


def run_status_or_none(run_id: int) -> str | None:
    """Run ``run_id``'s status as committed, or None when there is no such run."""
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).first()


def run_is_test(run_id: int) -> bool | None:
    """Whether run ``run_id`` is a node-test run (``is_test`` never changes after the run
    is created, so no lock is needed); None when there is no such run."""
    return Run.objects.filter(pk=run_id).values_list("is_test", flat=True).first()


def step_or_none(step_id: int) -> Step | None:
    """Step row ``step_id``, or None."""
    return Step.objects.filter(pk=step_id).first()
