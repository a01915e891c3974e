"""Deadlines of waiting steps: a due waiting step (an approval's deadline) fires once, in one transaction.

A step that waits with a deadline keeps it as its own ``Step.due_at``; there is no timer
and no scanner of its own. The claim-by-due-time (runs.engine.loop.step_claim_due) finds it among
the due rows and calls :func:`step_fire_due`; the recovery pass rings a doorbell for it
when it falls due (recovery_queries.due_pending_steps), as it does for a retry whose
backoff ended.

Exactly once: the firing is one transaction under the run's row lock (the lock every
decision, cancel and commit of the run takes first) that clears ``due_at`` with the
escalation's own writes, its event and its audit entry. A worker that dies before the
commit leaves nothing behind (the row is still due: the next claim fires it); after the
commit the row is due no more. A decision that got there first left the step not
waiting: nothing fires.
"""
from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from audit.chain import audit
from runs.engine import faults
from runs.engine.store import clock
from runs.engine.store.events import create as create_event
from runs.engine.store.graphs import step_node
from runs.engine.store.operations import step_complete_waiting
from runs.engine.store.writes import lock_run
from runs.models import RunEventKind, Step, StepStatus
from runs.nodes import get_kind

log = logging.getLogger("ballast.engine")

# Who a deadline's writes are attributed to (events, audit, an approval's ``decided_by``).
DEADLINE_ACTOR = "deadline"


def next_due_waiting(now: datetime, *, run_id: int | None = None) -> int | None:
    """The id of the waiting step (of ``run_id``, or any run) whose deadline passed
    longest ago (ties by id), or None.

    One indexed range read of (status, due_at) (the ``step_status_due`` index): empty in
    the common case, so the claim path pays almost nothing for it."""
    qs = Step.objects.filter(status=StepStatus.WAITING, due_at__lte=clock.due_by(now))
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    return qs.order_by("due_at", "id").values_list("id", flat=True).first()


def deadline_postpone(step_id: int, until: datetime) -> None:
    """Move the deadline of waiting step ``step_id`` to ``until`` (a deadline that raised
    while firing is tried again then, so it never blocks every doorbell behind it).
    Nothing when the step is no longer waiting."""
    Step.objects.filter(pk=step_id, status=StepStatus.WAITING).update(due_at=until)


def step_fire_due(step_id: int, *, worker: str) -> list[int]:
    """Fire the deadline of waiting step ``step_id`` if it is still due; return the step
    ids to hand to the queue after commit (a ``timeout`` that followed its edge).

    One transaction: lock the run, re-read the step (still waiting, ``due_at`` passed),
    clear its ``due_at``, let its kind escalate (:meth:`NodeKind.on_due`), append a
    ``step_deadline`` event (``{node_id, action, ...details}``) and an audit entry
    ``step.deadline`` (actor ``deadline``; ``worker``, ``escalation``, the details), and, when the kind returned a
    result, finish the step with it (runs.engine.store.operations.step_complete_waiting: the
    ``run_resumed`` event, successors, run status). Anything else (decided, cancelled,
    fired by another worker in between, no such step): nothing is written, returns [].
    Raises what the kind or the commit raises; the transaction then rolls back and the
    step stays due.
    """
    now = clock.now()
    with transaction.atomic():
        run_id = Step.objects.filter(pk=step_id).values_list("run_id", flat=True).first()
        if run_id is None:
            return []
        run = lock_run(run_id)
        step = Step.objects.filter(pk=step_id, status=StepStatus.WAITING, due_at__lte=clock.due_by(now)).first()
        if step is None:
            return []
        Step.objects.filter(pk=step_id).update(due_at=None)
        node = step_node(run.graph_version_id, step.node_id)
        kind = get_kind(node.kind)
        outcome = kind.on_due(kind.config_model.model_validate(node.config), run=run, step=step, now=now)
        if outcome is None:
            return []
        details = {"node_id": step.node_id, "action": outcome.action, **outcome.details}
        create_event(run_id=run.pk, step_id=step_id, kind=RunEventKind.STEP_DEADLINE, data=details)
        audit(DEADLINE_ACTOR, "step.deadline", step, actor_type="system", worker=worker, run=run.pk, escalation=outcome.action, **outcome.details)
        faults.point("deadline_before_commit", node_id=step.node_id, step_id=step_id)
        if outcome.result is None:
            return []
        return step_complete_waiting(step_id, outcome.result, actor=DEADLINE_ACTOR, reason=outcome.action)
