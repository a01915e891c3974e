"""Child runs of ``subgraph`` steps: resolving the callee, creating the child in the parent step's commit, handing its result back, cancelling across the pair.

How a call stays exactly-once and holds no worker while the child runs:

* **Start.** The parent step's commit (runs.engine.store.commit, the Wait path) calls
  :func:`child_start` with the parent run row locked: the child run and its start step
  are inserted in that same transaction, with ``Run.parent_step`` naming the step
  (unique). A worker killed before that commit left nothing (the step runs again, same
  idempotency key); after it, the step is waiting and is never executed again. A step
  reopened by a resume finds its child through the unique key instead of starting another.
* **Result.** The child's terminal transaction (``run_finished``, sent inside every one:
  the portable commit, both fast paths, cancel, failure) sets the child's
  ``parent_due_at`` to the database clock: it writes only the child's own row, already
  locked, so it never waits on the parent. The due source ``subgraphs`` (fired by the
  engine's claim by due time on any worker, rung for after that commit and by recovery)
  then locks the parent run, clears ``parent_due_at`` (compare-and-set) and finishes the
  waiting step in one transaction: the child's output written to ``output_key``
  (step_complete_waiting: successors, run status), or the step and its run failed with
  the child's error (``child_failed``, ``child_cancelled``). A worker killed before that
  commit leaves the row due; after it, the row is due no more.
* **Cancel.** A parent that ends (cancelled, failed elsewhere) cancels its active
  children in its own terminal transaction, the parent run locked before each child's:
  the order the result hand-off takes too (parent run, then child row), so the two never
  deadlock. Children of children follow through their own ``run_finished``. A child
  cancelled on its own fails the waiting parent step (``child_cancelled``), as an
  unhandled child cancellation fails a Temporal parent workflow.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import transaction

from accounts.policy import can_operate_graph
from graphs.models import Graph, GraphVersion
from runs.engine import api as engine
from runs.models import Run, RunStatus, Step, StepStatus
from runs.nodes.base import NodeResult
from runs.signals import run_finished
from runs.vocabulary import NodeError

log = logging.getLogger("ballast.subgraphs")

KIND = "subgraph"
AGENT_KIND = "agent"  # its graph_tools call graphs too (runs.subgraphs.tools)
ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


@dataclass(frozen=True)
class Target:
    """The graph version a call runs: ``version_id`` (pinned), its graph and number."""

    graph_id: int
    graph_name: str
    version_id: int
    number: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def max_depth() -> int:
    """How deep calls may nest (a child of a child ... counts each level)."""
    return int(getattr(settings, "BALLAST_SUBGRAPH_MAX_DEPTH", 8))


def published_version(graph_id: int, version: int | str) -> GraphVersion | None:
    """The published version ``version`` (a number, or ``"latest"``) of graph ``graph_id``
    with its graph loaded, or None when there is none."""
    qs = GraphVersion.objects.select_related("graph").filter(graph_id=graph_id, is_test=False)
    if version == "latest":
        return qs.order_by("-number").first()
    return qs.filter(number=version).first()


def run_depth(run_id: int) -> int:
    """How many parent runs run ``run_id`` has (0 for a run nobody called); stops counting
    past :func:`max_depth`."""
    depth = 0
    parent = Run.objects.filter(pk=run_id).values_list("parent_step__run_id", flat=True).first()
    while parent is not None and depth <= max_depth():
        depth += 1
        parent = Run.objects.filter(pk=parent).values_list("parent_step__run_id", flat=True).first()
    return depth


def target_resolve(*, graph_id: int, version: int | str, run_id: int) -> Target:
    """Resolve a call of ``graph_id`` at ``version`` made by run ``run_id`` (reads only).
    Raises NodeError (not retryable): ``subgraph_missing`` when the graph or that
    published version does not exist; ``subgraph_forbidden`` when the user who started
    the calling run may not run that graph (a run started by the system, a schedule or
    a webhook calls as the system, which may); ``subgraph_too_deep`` past :func:`max_depth`."""
    found = published_version(graph_id, version)
    if found is None:
        what = "a published version" if version == "latest" else f"a published version {version}"
        name = Graph.objects.filter(pk=graph_id).values_list("name", flat=True).first()
        where = f"graph {name!r}" if name else f"graph {graph_id}"
        raise NodeError(f"{where} has no {what}" if name else f"{where} does not exist", code="subgraph_missing", retryable=False)
    starter = Run.objects.select_related("created_by").only("created_by").get(pk=run_id).created_by
    if starter is not None and not can_operate_graph(starter, found.graph):
        raise NodeError(
            f"{starter.get_username()} started this run and may not run graph {found.graph.name!r}",
            code="subgraph_forbidden",
            retryable=False,
        )
    if run_depth(run_id) + 1 > max_depth():
        raise NodeError(f"graph calls nest deeper than {max_depth()} levels", code="subgraph_too_deep", retryable=False)
    return Target(found.graph_id, found.graph.name, found.pk, found.number)


def input_check(target: Target, child_input: dict[str, Any]) -> None:
    """Check a child input against the target version's input schema. Raises NodeError
    ``subgraph_input`` (not retryable) naming every field at fault, with
    ``details.fields`` = ``{"input.<path>": [messages]}``."""
    # runs.services loads jsonschema, kept out of a worker's start: imported when first called.
    from runs.services import input_errors

    version = GraphVersion.objects.get(pk=target.version_id)
    errors = input_errors(version, child_input)
    if not errors:
        return
    fields: dict[str, list[str]] = {}
    for error in errors:
        fields.setdefault(error["field"], []).append(error["message"])
    summary = "; ".join(f"{field}: {', '.join(messages)}" for field, messages in fields.items())
    raise NodeError(
        f"the input does not match the input schema of graph {target.graph_name!r} v{target.number}: {summary}",
        code="subgraph_input",
        retryable=False,
        details={"fields": fields, "graph": target.graph_id, "version": target.number},
    )


def child_start(*, run: Run, step: Step, payload: dict[str, Any]) -> Run:
    """Create the child run of waiting step ``step`` of ``run`` (inside that step's commit,
    run row locked), or find the one it already has: a step reopened by a resume of its
    failed run resumes its failed child (keeping what the child committed), and a child
    that ended otherwise owes its result again (made due). Returns the child run.

    The child gets the parent's starter, a ``source`` naming the call and, when the parent
    has a USD or token budget, what is left of it (the child's own spend then counts
    against it as it runs, and its total is rolled up into the parent's reads)."""
    existing = Run.objects.filter(parent_step_id=step.pk).first()
    if existing is not None:
        if existing.status == RunStatus.FAILED:
            engine.run_resume(existing.pk, actor=f"run:{run.pk}", actor_type="system")
        elif existing.is_terminal:
            Run.objects.filter(pk=existing.pk).update(parent_due_at=engine.db_now())
            engine.due_sources_ring_on_commit()
        return existing
    version = GraphVersion.objects.select_related("graph").get(pk=payload["version_id"])
    budget_usd = None if run.budget_usd is None else max(Decimal(0), run.budget_usd - run.cost_usd)
    budget_tokens = None if run.budget_tokens is None else max(0, run.budget_tokens - run.input_tokens - run.output_tokens)
    parent_graph = GraphVersion.objects.select_related("graph").get(pk=run.graph_version_id).graph.name
    return engine.run_start(
        version=version,
        run_input=payload["input"],
        actor=f"run:{run.pk}",
        actor_type="system",
        created_by=run.created_by,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
        source=f"graph {parent_graph} run {run.pk} step {step.node_id}"[:200],
        parent_step_id=step.pk,
    )


# --------------------------------------------------------------------------- the child's end


def run_ended(sender: Any, run: Run, status: str, **kwargs: Any) -> None:
    """``run_finished`` receiver, inside the run's terminal transaction: a child run owes
    its parent step its result (made due, a doorbell rung after the commit); a run whose
    graph calls graphs cancels its children that are still active (each in a savepoint
    of this transaction, the parent locked first)."""
    if getattr(run, "parent_step_id", None) is not None:
        now = engine.db_now()
        Run.objects.filter(pk=run.pk).update(parent_due_at=now)
        run.parent_due_at = now
        engine.due_sources_ring_on_commit()
    if calls_graphs(run.graph_version_id):
        children = Run.objects.filter(parent_step__run_id=run.pk, status__in=ACTIVE_STATUSES).values_list("pk", flat=True)
        for child_id in list(children):
            engine.run_cancel(child_id, actor=f"run:{run.pk}", actor_type="system", reason=f"its parent run {run.pk} ended ({status})")


@lru_cache(maxsize=512)
def calls_graphs(version_id: int) -> bool:
    """Whether graph version ``version_id`` has a subgraph node or an agent with graph
    tools (versions never change)."""
    spec = GraphVersion.objects.filter(pk=version_id).values_list("spec", flat=True).first() or {}
    return any(
        isinstance(n, dict) and (n.get("kind") == KIND or (n.get("kind") == AGENT_KIND and (n.get("config") or {}).get("graph_tools")))
        for n in spec.get("nodes", [])
    )


def earliest_due(now: datetime) -> datetime | None:
    """The due source's ``earliest_due``: the earliest child run whose result its parent
    step is owed, or None (one read of the ``run_parent_due`` partial index)."""
    return Run.objects.filter(parent_due_at__lte=now).order_by("parent_due_at").values_list("parent_due_at", flat=True).first()


def fire_next(now: datetime, worker: str) -> bool:
    """Hand one due child's result to its parent step, in one transaction (parent run
    locked first, then the child row). True when one was settled (or another worker had
    settled it); False when none is due."""
    row = Run.objects.filter(parent_due_at__lte=now).order_by("parent_due_at", "id").values_list("pk", "parent_step_id").first()
    if row is None:
        return False
    child_id, step_id = row
    with transaction.atomic():
        parent_run_id = None if step_id is None else Step.objects.filter(pk=step_id).values_list("run_id", flat=True).first()
        if parent_run_id is not None:
            engine.run_lock(parent_run_id)
        child = Run.objects.select_for_update().filter(pk=child_id, parent_due_at__isnull=False).first()
        if child is None:
            return True  # another worker handed it over first
        Run.objects.filter(pk=child_id).update(parent_due_at=None)
        step = None if step_id is None else Step.objects.filter(pk=step_id).first()
        if step is None or step.status != StepStatus.WAITING:
            return True  # the parent ended (its cancel cancelled this child) or was deleted
        _hand_over(child, step)
        engine.fault_point("subgraph_handover_before_commit", node_id=step.node_id, step_id=step.pk)
    return True


def _hand_over(child: Run, step: Step) -> None:
    """Finish waiting parent step ``step`` with ``child``'s outcome (parent run locked)."""
    actor = f"run:{child.pk}"
    version = GraphVersion.objects.select_related("graph").get(pk=child.graph_version_id)
    where = f"child run {child.pk} (graph {version.graph.name!r} v{version.number})"
    if step.parent_id is not None:
        _hand_over_tool_call(child, step, where)
        return
    if child.status == RunStatus.SUCCEEDED:
        parent_version = Run.objects.filter(pk=step.run_id).values_list("graph_version_id", flat=True).get()
        node = engine.compiled_graph(parent_version).topology.nodes[step.node_id]
        output_key = node.config.get("output_key") or "result"
        result = NodeResult(updates={output_key: child.output}, output={"child_run": child.pk, "output": child.output})
        try:
            with transaction.atomic():  # a savepoint: a refused write leaves nothing of it
                engine.step_complete_waiting(step.pk, result, actor=actor, reason="child_succeeded")
            return
        except engine.StateWriteRefused as exc:
            message = f"the output of {where} cannot be written to {output_key!r}: {exc}"
            engine.step_fail_parked(step.pk, actor=actor, message=message, code="child_output", details={"child_run": child.pk})
            return
    error = child.error or {}
    if child.status == RunStatus.CANCELLED:
        message, code = f"{where} was cancelled: {error.get('message') or 'cancelled'}", "child_cancelled"
    else:
        message, code = f"{where} failed: {error.get('message') or error.get('code') or 'failed'}", "child_failed"
    engine.step_fail_parked(step.pk, actor=actor, message=message, code=code, details={"child_run": child.pk, "child_error": error})


def _hand_over_tool_call(child: Run, step: Step, where: str) -> None:
    """Finish waiting tool-call child step ``step`` (an agent's graph tool) with
    ``child``'s outcome: its output is the tool's result; a failed or cancelled child
    fails the child step (``child_failed``, ``child_cancelled``, with ``child_run``),
    which the agent's replay tells the model as an error result. Either way the agent
    step is woken once no sibling is active (parent run locked)."""
    actor = f"run:{child.pk}"
    if child.status == RunStatus.SUCCEEDED:
        engine.step_complete_waiting(step.pk, NodeResult(output=child.output), actor=actor, reason="child_succeeded")
        return
    error = child.error or {}
    if child.status == RunStatus.CANCELLED:
        message, code = f"{where} was cancelled: {error.get('message') or 'cancelled'}", "child_cancelled"
    else:
        message, code = f"{where} failed: {error.get('message') or error.get('code') or 'failed'}", "child_failed"
    failure = {"code": code, "message": message, "node_id": step.node_id, "by": actor, "child_run": child.pk, "child_error": error}
    engine.step_fail_waiting_child(step.pk, actor=actor, error=failure)


def register() -> None:
    """Wire calls into this process (runs.wiring, once): the due source that hands child
    results to parent steps (fired by the in-process driver too) and the ``run_finished``
    receiver."""
    engine.register_due_source(engine.DueSource(name="subgraphs", earliest_due=earliest_due, fire_next=fire_next, in_drive_local=True))
    run_finished.connect(run_ended, dispatch_uid="ballast_subgraphs_run_ended")

