"""Run writes for interfaces (commands, API): start, cancel. The engine does the commits."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

import jsonschema
from django.db import IntegrityError, transaction

from builder.models import GraphVersion
from runs.engine import dispatch, store
from runs.models import Run
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
