"""Run writes for interfaces (commands, API): start, cancel, resume, fork, and one-node test runs. The engine does the commits."""
from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import jsonschema
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from builder.models import GraphVersion
from runs.engine import dispatch, scheduler, store
from runs.engine.audit import audit
from runs.models import Run, RunEvent, Step
from runs.nodes.base import field_path


class RunInputInvalid(ValueError):
    """The run input does not satisfy the graph's input schema; ``errors`` lists
    ``{"field": path, "message": text}`` (``input.items[0].sku``: ``field_path``)."""

    def __init__(self, errors: list[dict[str, str]]):
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.errors = errors


MAX_INPUT_DEPTH = 64  # deeper inputs would exhaust recursion in copies and JSON encoders


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value, without recursion (1 for a flat object)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            items = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, level)
        if level > MAX_INPUT_DEPTH:
            return level
        stack.extend((child, level + 1) for child in items)
    return deepest


def input_errors(version: GraphVersion, run_input: Any) -> list[dict[str, str]]:
    """Validate ``run_input`` against the version's input JSON Schema; [] when valid."""
    if not isinstance(run_input, dict):
        return [{"field": "input", "message": "must be a JSON object"}]
    if _depth(run_input) > MAX_INPUT_DEPTH:
        return [{"field": "input", "message": f"nests deeper than {MAX_INPUT_DEPTH} levels"}]
    schema = version.spec.get("input_schema") or {"type": "object"}
    validator = jsonschema.Draft202012Validator(schema)
    return [
        {"field": field_path(err.absolute_path, "input"), "message": err.message}
        for err in sorted(validator.iter_errors(run_input), key=lambda e: list(map(str, e.absolute_path)))
    ]


def run_start(
    *,
    version: GraphVersion,
    run_input: dict[str, Any] | None = None,
    user: Any = None,
    actor: str | None = None,
    idempotency_key: str | None = None,
    budget_usd: Decimal | None = None,
    budget_tokens: int | None = None,
) -> Run:
    """Start a run of a published (hence validated) graph version.

    The run and its start step commit before anything executes; the start step is handed
    to the queue after the commit. With ``idempotency_key``, a second call with the same
    key returns the first run. Raises RunInputInvalid.
    """
    run_input = {} if run_input is None else run_input
    errors = input_errors(version, run_input)
    if errors:
        raise RunInputInvalid(errors)
    if idempotency_key:
        existing = Run.objects.filter(idempotency_key=idempotency_key).first()
        if existing:
            return existing
    name = actor or (user.get_username() if user is not None else "system")
    try:
        run, step_ids = store.run_create(
            version=version,
            run_input=run_input,
            actor=name,
            actor_type="user" if user is not None else "system",
            created_by=user,
            idempotency_key_value=idempotency_key,
            budget_usd=budget_usd,
            budget_tokens=budget_tokens,
        )
    except IntegrityError:
        if idempotency_key:
            return Run.objects.get(idempotency_key=idempotency_key)
        raise
    transaction.on_commit(lambda: dispatch.enqueue(step_ids))
    return run


def run_cancel(*, run: Run, user: Any = None, actor: str | None = None, reason: str = "") -> bool:
    """Cancel ``run`` (audited). Returns False if it had already ended."""
    name, kind = _actor(user, actor)
    return store.run_cancel(run.pk, actor=name, actor_type=kind, reason=reason)


def _actor(user: Any, actor: str | None) -> tuple[str, str]:
    if actor:
        return actor, "user" if user is not None else "system"
    return (user.get_username(), "user") if user is not None else ("system", "system")


def run_resume(
    *, run: Run, user: Any = None, actor: str | None = None, budget_usd: Decimal | None = None, budget_tokens: int | None = None
) -> Run:
    """Continue a failed run from its failed step (fresh attempts), or re-queue a parked
    run's interrupted steps. Committed steps never run again. Raises
    runs.engine.store.StepStateError when the run is neither failed nor parked."""
    name, kind = _actor(user, actor)
    step_ids = store.run_resume(run.pk, actor=name, actor_type=kind, budget_usd=budget_usd, budget_tokens=budget_tokens)
    transaction.on_commit(lambda: dispatch.enqueue(step_ids))
    run.refresh_from_db()
    return run


def run_retry(*, run: Run, user: Any = None, actor: str | None = None) -> Run:
    """Retry a failed run from the step that failed (same as resume for a failed run)."""
    if run.status != "failed":
        raise store.StepStateError(f"run {run.pk} is {run.status}; only a failed run can be retried")
    return run_resume(run=run, user=user, actor=actor)


def run_fork(*, run: Run, step_id: int, state_patch: dict[str, Any] | None = None, user: Any = None, actor: str | None = None) -> Run:
    """Start a new run from committed step ``step_id`` of ``run`` with ``state_patch``
    applied to the state as it was right after that step. Raises StepStateError."""
    name, kind = _actor(user, actor)
    new_run, step_ids = store.run_fork(run.pk, step_id=step_id, state_patch=state_patch or {}, actor=name, actor_type=kind, created_by=user)
    transaction.on_commit(lambda: dispatch.enqueue(step_ids))
    return new_run


def node_test_run(
    *,
    version: GraphVersion,
    node_id: str,
    state: dict[str, Any],
    user: Any = None,
    actor: str | None = None,
    timeout: float | None = None,
) -> Run:
    """Run node ``node_id`` of test snapshot ``version`` once, in this process, through
    the engine (claim, execute outside any transaction, fenced commit), and return the
    finished run.

    A new engine entry (the builder's "test this node"): the run is marked ``is_test``,
    its first step is ``node_id`` itself rather than the start node, with ``state`` as
    the committed state (declared state defaults first; ``state["input"]``, an object,
    is the run input). The snapshot (``builder.services.graph_node_test`` builds it)
    wires the node to an end node, so the run ends after it; an agent node's child
    steps run here too. Cost, usage, events and an audit entry (``run.test_node``) are
    recorded as for any run; budgets of the snapshot's settings apply. ``timeout``
    (seconds, default settings.BALLAST_NODE_TEST_TIMEOUT) bounds the wait between steps;
    a run still going after it is returned as it is (its steps continue on recovery).
    """
    if not version.is_test:
        raise ValueError("node_test_run needs a test snapshot version")
    graph = store.compiled_graph(version.pk)
    node = graph.topology.nodes[node_id]
    given = copy.deepcopy(state)
    run_input = given.get("input") if isinstance(given.get("input"), dict) else {}
    initial = scheduler.initial_state(graph, {})
    initial.update(given)
    initial["input"] = run_input
    name, kind = _actor(user, actor)
    limits = graph.spec.settings
    with transaction.atomic():
        run = Run.objects.create(
            graph_version=version,
            is_test=True,
            input=run_input,
            state=initial,
            scheduler={"iterations": {node_id: 1}},
            max_parallelism=limits.max_parallelism,
            max_steps=limits.max_steps,
            budget_usd=limits.budget_usd,
            budget_tokens=limits.budget_tokens,
            step_count=1,
            created_by=user if getattr(user, "pk", None) is not None else None,
        )
        step = Step.objects.create(
            run=run,
            node_id=node_id,
            kind=node.kind,
            max_attempts=1,
            idempotency_key=store.idempotency_key(run, node_id, 0),
            dispatched_at=timezone.now(),
        )
        RunEvent.objects.create(run=run, kind="run_created", data={"graph_version": version.pk, "test": True, "node_id": node_id})
        audit(name, "run.test_node", run, actor_type=kind, graph=version.graph_id, graph_version=version.pk, node_id=node_id)
    from runs.engine.loop import drive_local

    limit = timeout if timeout is not None else getattr(settings, "BALLAST_NODE_TEST_TIMEOUT", 600.0)
    with dispatch.local_mode() as queue:
        queue.append(step.pk)
        drive_local(run.pk, queue=queue, timeout=limit)
    run.refresh_from_db()
    return run
