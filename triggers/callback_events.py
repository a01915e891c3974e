"""Completion callbacks' deliveries, written in the transaction that commits the run's event (its end, a gate, a park); sending them is triggers.callback_sending's.

The engine sends ``run_finished`` and ``step_parked`` inside the transaction that writes
the run's ``run_succeeded`` / ``run_failed`` / ``step_parked`` event, and an approval node
creates its ApprovalRequest (``post_save``) inside the transaction that puts its step at
the gate. The receivers here add one :class:`CallbackDelivery` per matching callback in
that same transaction: a delivery exists exactly when the run's event committed, and the
unique (callback, ``event_key``) makes a second one for the same event impossible.
``event_key`` is ``event:<RunEvent id>`` (the committed event, read back in the
transaction), or ``approval:<ApprovalRequest id>`` for a gate (its ``step_waiting`` event
is written after the request).

Worker processes load this module (the engine's signals fire there), so it imports
nothing of the web stack. A graph without callbacks costs one indexed query per run end,
gate and park.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.db.models.signals import post_save
from django.dispatch import receiver

from approvals.models import ApprovalRequest
from graphs.models import GraphVersion
from runs.engine import api as engine
from runs.models import Run, RunEvent
from runs.signals import run_finished, step_parked
from triggers.models import CallbackDelivery, CallbackEvent, CompletionCallback

# A succeeded run's output larger than this (JSON bytes) is left out of the body
# (``output_omitted``): receivers fetch it with GET /api/v1/runs/<id>/.
MAX_OUTPUT_BYTES = 64 * 1024


def callbacks_for(run: Run) -> list[CompletionCallback]:
    """The enabled callbacks that hear about ``run``: its own (``callback_url`` at start)
    and its graph's, unless the run is a test snapshot's (a builder's draft run)."""
    published = GraphVersion.objects.filter(pk=run.graph_version_id, is_test=False).values("graph_id")
    return list(CompletionCallback.objects.filter(enabled=True).filter(Q(run_id=run.pk) | Q(run__isnull=True, graph_id__in=published)))


def _body(run_id: int, event: str, now: Any, detail: dict[str, Any]) -> dict[str, Any]:
    """The body sent (Standard Webhooks' ``{type, timestamp, data}``), read inside the event's transaction."""
    row = Run.objects.filter(pk=run_id).values("status", "output", "error", "source", "graph_version__graph_id",
                                                  "graph_version__graph__name", "graph_version__number").get()
    data: dict[str, Any] = {
        "run": run_id, "graph": row["graph_version__graph_id"], "graph_name": row["graph_version__graph__name"],
        "version": row["graph_version__number"], "status": row["status"], "source": row["source"],
        "url": f"{settings.BALLAST_PUBLIC_URL}/runs/{run_id}/", **detail,
    }
    if event == CallbackEvent.SUCCEEDED:
        if len(json.dumps(row["output"], separators=(",", ":"))) <= MAX_OUTPUT_BYTES:
            data["output"] = row["output"]
        else:
            data["output_omitted"] = True
    elif event == CallbackEvent.FAILED:
        data["error"] = row["error"]
    return {"type": f"run.{event}", "timestamp": now.isoformat().replace("+00:00", "Z"), "data": data}


def deliveries_create(*, run: Run, event: str, event_key: str, detail: dict[str, Any] | None = None) -> int:
    """Add a pending delivery of ``event`` (a CallbackEvent value) for each callback of
    ``run`` that asked for it, due now (database clock), inside the caller's transaction.
    A (callback, ``event_key``) that has one already gets none. Returns how many were added."""
    wanted = [cb for cb in callbacks_for(run) if event in cb.events]
    if not wanted:
        return 0
    now = engine.db_now()
    body = _body(run.pk, event, now, detail or {})
    rows = [
        CallbackDelivery(callback=cb, run_id=run.pk, event=event, event_key=event_key, message_id=f"msg_{uuid.uuid4().hex}",
                         payload=body, next_due_at=now)
        for cb in wanted
    ]
    # ignore_conflicts: the unique (callback, event_key) is the guard of "once per event".
    CallbackDelivery.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _latest_event_id(run_id: int, kind: str, step_id: int | None = None) -> int | None:
    events = RunEvent.objects.filter(run_id=run_id, kind=kind)
    if step_id is not None:
        events = events.filter(step_id=step_id)
    return events.order_by("-seq").values_list("id", flat=True).first()


@receiver(run_finished, dispatch_uid="ballast_callbacks_run_finished")
def _on_run_finished(sender: Any, run: Any, status: str, **kwargs: Any) -> None:
    if status not in (CallbackEvent.SUCCEEDED, CallbackEvent.FAILED):
        return  # a cancelled run: someone asked for it
    if not callbacks_for(run):
        return
    event_id = _latest_event_id(run.pk, f"run_{status}")
    deliveries_create(run=run, event=str(status), event_key=f"event:{event_id}")


@receiver(step_parked, dispatch_uid="ballast_callbacks_step_parked")
def _on_step_parked(sender: Any, run: Any, step: Any, **kwargs: Any) -> None:
    if not callbacks_for(run):
        return
    event_id = _latest_event_id(run.pk, "step_parked", step.pk)
    deliveries_create(run=run, event=CallbackEvent.PARKED, event_key=f"event:{event_id}",
                      detail={"node_id": step.node_id, "step": step.pk, "attempt": step.attempt})


@receiver(post_save, sender=ApprovalRequest, dispatch_uid="ballast_callbacks_gate")
def _on_gate(sender: Any, instance: ApprovalRequest, created: bool, **kwargs: Any) -> None:
    if not created or instance.purpose != "gate":
        return
    run = Run.objects.only("id", "graph_version_id").get(pk=instance.run_id)
    deliveries_create(run=run, event=CallbackEvent.WAITING, event_key=f"approval:{instance.pk}",
                      detail={"node_id": instance.node_id, "step": instance.step_id, "approval": instance.pk})
