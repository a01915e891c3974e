"""Run writes for interfaces (commands, API): start (idempotent by key), cancel, resume, retry, fork,
and one-node test runs.

Input checks and idempotency live here; the engine (runs.engine.api) does the commits and
the queue hand-off after them.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from core.errors import ServiceError
from core.fields import field_path
from graphs.models import GraphVersion
from runs.engine import api as engine
from runs.models import DRAFT_SOURCE, Run
from runs.sandbox import schemas, values


class RunInputInvalid(ServiceError, ValueError):
    """The run input does not satisfy the graph's input schema; ``errors`` lists
    ``{"field": path, "message": text}`` (``input.items[0].sku``: ``field_path``)."""

    code = "input_invalid"

    def __init__(self, errors: list[dict[str, str]]):
        fields: dict[str, list[str]] = {}
        for err in errors:
            fields.setdefault(err["field"], []).append(err["message"])
        super().__init__(
            "; ".join(f"{e['field']}: {e['message']}" for e in errors),
            message="The run input does not match the graph's input schema.",
            fields=fields,
        )
        self.errors = errors


class IdempotencyKeyReused(ValueError):
    """The Idempotency-Key already started ``run`` with a different request (graph,
    version or input)."""

    def __init__(self, run: Run):
        super().__init__(f"This Idempotency-Key started run {run.pk} with a different request.")
        self.run = run


@dataclass(frozen=True)
class RunStarted:
    """The outcome of an idempotent start: ``replayed`` when the key had started ``run`` before."""

    run: Run
    replayed: bool


MAX_INPUT_DEPTH = 64  # deeper inputs would exhaust recursion in copies and JSON encoders


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value, without recursion (1 for a flat object)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        items: Iterable[Any]
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
    """Validate ``run_input`` against the version's input JSON Schema; [] when valid.
    Raises VersionUnrunnable when the stored schema has a ``$ref`` that does not resolve
    inside it (runs.sandbox.schemas)."""
    if not isinstance(run_input, dict):
        return [{"field": "input", "message": "must be a JSON object"}]
    if _depth(run_input) > MAX_INPUT_DEPTH:
        return [{"field": "input", "message": f"nests deeper than {MAX_INPUT_DEPTH} levels"}]
    try:
        values.check(run_input, "input")
    except values.InvalidValue as exc:  # NaN from a lenient JSON parser, NUL characters
        return [{"field": exc.path, "message": exc.reason}]
    schema = version.spec.get("input_schema") or {"type": "object"}
    try:
        found = schemas.errors(schema, run_input)  # local $refs only: nothing is fetched
    except schemas.SchemaUnusable as exc:  # a version stored before validation refused it
        raise engine.VersionUnrunnable(
            f"Version {version.number} of this graph has an input schema that cannot be applied; publish a corrected version.",
            {"input_schema": [str(exc)]},
        ) from None
    return [{"field": field_path(err.absolute_path, "input"), "message": err.message} for err in found]


def _actor(user: Any, actor: str | None) -> tuple[str, str]:
    if actor:
        return actor, "user" if user is not None else "system"
    return (user.get_username(), "user") if user is not None else ("system", "system")


def run_start(
    *,
    version: GraphVersion,
    run_input: dict[str, Any] | None = None,
    user: Any = None,
    actor: str | None = None,
    budget_usd: Decimal | None = None,
    budget_tokens: int | None = None,
    idempotency_key: str | None = None,
    source: str = "",
    flow_line: str | None = None,
) -> Run:
    """Start a run of a published (hence validated) graph version.

    The run and its start step commit before anything executes; the start step is handed
    to the queue after the commit. ``run_input`` defaults to ``{}``. Raises RunInputInvalid;
    IntegrityError when ``idempotency_key`` is already taken (run_start_idempotent, the
    entry point for keyed starts, turns that into the earlier run). ``source`` names what
    started the run ("webhook <name>"), shown in the run API. ``flow_line``: a line of
    its own the run waits in behind the line's active run (a schedule's overlap policy
    ``queue``: "schedule:<id>"); the graph's flow control applies either way.
    """
    run_input = {} if run_input is None else run_input
    errors = input_errors(version, run_input)
    if errors:
        raise RunInputInvalid(errors)
    name, kind = _actor(user, actor)
    return engine.run_start(
        version=version,
        run_input=run_input,
        actor=name,
        actor_type=kind,
        created_by=user,
        idempotency_key=idempotency_key,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
        source=source,
        flow_line=flow_line,
    )


def run_start_idempotent(
    *,
    idempotency_key: str,
    version: GraphVersion,
    version_pinned: bool = True,
    run_input: dict[str, Any] | None = None,
    user: Any = None,
    actor: str | None = None,
    budget_usd: Decimal | None = None,
    budget_tokens: int | None = None,
    source: str = "",
    flow_line: str | None = None,
) -> RunStarted:
    """Start a run once per ``idempotency_key`` (the caller scopes keys, e.g. per user).

    A key that started a run before returns that run (``replayed``) if the request is the
    same: the same graph, the same input and, when ``version_pinned`` (the client named
    the version), the same version number. Two concurrent starts with one key race on the
    unique key; the loser returns the winner's run. Raises RunInputInvalid,
    IdempotencyKeyReused (the key started a different request).
    """
    run_input = {} if run_input is None else run_input

    def replay(run: Run) -> RunStarted:
        same = (
            run.graph_version.graph_id == version.graph_id
            and (not version_pinned or run.graph_version.number == version.number)
            and run.input == run_input
        )
        if not same:
            raise IdempotencyKeyReused(run)
        return RunStarted(run, replayed=True)

    existing = Run.objects.select_related("graph_version").filter(idempotency_key=idempotency_key).first()
    if existing is not None:
        return replay(existing)
    try:
        run = run_start(
            version=version,
            run_input=run_input,
            user=user,
            actor=actor,
            budget_usd=budget_usd,
            budget_tokens=budget_tokens,
            idempotency_key=idempotency_key,
            source=source,
            flow_line=flow_line,
        )
    except IntegrityError:
        # A concurrent request with the same key won the race: it must be the same request.
        return replay(Run.objects.select_related("graph_version").get(idempotency_key=idempotency_key))
    return RunStarted(run, replayed=False)


def run_cancel(*, run: Run, user: Any = None, actor: str | None = None, reason: str = "") -> bool:
    """Cancel ``run`` (audited). Returns False if it had already ended."""
    name, kind = _actor(user, actor)
    return engine.run_cancel(run.pk, actor=name, actor_type=kind, reason=reason)


def run_resume(
    *, run: Run, user: Any = None, actor: str | None = None, budget_usd: Decimal | None = None, budget_tokens: int | None = None
) -> Run:
    """Continue a failed run from its failed step (fresh attempts), or re-queue a parked
    run's interrupted steps. Committed steps never run again. Raises
    runs.engine.api.StepStateError when the run is neither failed nor parked."""
    name, kind = _actor(user, actor)
    engine.run_resume(run.pk, actor=name, actor_type=kind, budget_usd=budget_usd, budget_tokens=budget_tokens)
    run.refresh_from_db()
    return run


def run_retry(*, run: Run, user: Any = None, actor: str | None = None) -> Run:
    """Retry a failed run from the step that failed (same as resume for a failed run).
    Raises runs.engine.api.StepStateError when the run is not failed."""
    name, kind = _actor(user, actor)
    engine.run_retry(run.pk, actor=name, actor_type=kind)
    run.refresh_from_db()
    return run


def run_fork(*, run: Run, step_id: int, state_patch: dict[str, Any] | None = None, user: Any = None, actor: str | None = None) -> Run:
    """Start a new run from committed step ``step_id`` of ``run`` with ``state_patch``
    applied to the state as it was right after that step. Raises StepStateError."""
    name, kind = _actor(user, actor)
    return engine.run_fork(run.pk, step_id=step_id, state_patch=state_patch or {}, actor=name, actor_type=kind, created_by=user)


def draft_run_start(*, version: GraphVersion, run_input: dict[str, Any] | None = None, user: Any = None, actor: str | None = None) -> Run:
    """Start a run of a draft snapshot ``version`` (``is_test``: the whole validated draft,
    frozen by ``builder.services.graph_draft_run``) with ``run_input`` (default ``{}``).

    The run is an ordinary run through the queue (``run.start`` audited, cost and events
    recorded, budgets of the draft's settings) but marked ``is_test`` with ``source``
    :data:`DRAFT_SOURCE`: left out of run lists and reports unless tests are asked for, and
    refused for resume, retry and fork like a node test. The mark commits in the same
    transaction as the run, before its start step reaches the queue (the hand-off waits
    for the commit), so no worker sees it unmarked. Raises ValueError when ``version`` is
    not a test snapshot; RunInputInvalid (nothing started) when the input does not match
    the draft's input schema; what :func:`run_start` raises otherwise.
    """
    if not version.is_test:
        raise ValueError("draft_run_start needs a test snapshot version")
    run_input = {} if run_input is None else run_input
    errors = input_errors(version, run_input)
    if errors:
        raise RunInputInvalid(errors)
    name, kind = _actor(user, actor)
    with transaction.atomic():
        run = engine.run_start(version=version, run_input=run_input, actor=name, actor_type=kind, created_by=user, source=DRAFT_SOURCE)
        Run.objects.filter(pk=run.pk).update(is_test=True)
    run.is_test = True
    return run


def node_test_run(
    *,
    version: GraphVersion,
    node_id: str,
    state: dict[str, Any],
    user: Any = None,
    actor: str | None = None,
    timeout: float | None = None,
    known_keys: frozenset[str] | None = None,
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
    ``known_keys``: the state keys of the graph the node comes from; any other key of
    ``state`` but ``input`` is refused. Raises ValueError when ``version`` is not a test
    snapshot; StateWriteRefused (nothing written) for a key outside ``known_keys``, an
    ``input`` that is not an object, a value JSON cannot carry or a state too large.
    """
    name, kind = _actor(user, actor)
    limit = timeout if timeout is not None else getattr(settings, "BALLAST_NODE_TEST_TIMEOUT", 600.0)
    with engine.local_mode() as queue:
        started = engine.run_start_node_test(
            version=version, node_id=node_id, state=state, actor=name, actor_type=kind, created_by=user, known_keys=known_keys
        )
        queue.extend(started.step_ids)  # run here now, even inside a caller's transaction (a second hand-off finds nothing)
        engine.drive_local(started.run.pk, queue=queue, timeout=limit)
    run = started.run
    run.refresh_from_db()
    return run
