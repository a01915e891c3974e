"""The engine's public value types and errors: what a claim hands the loop and a commit returns.

Importable from outside the engine (with ``runs.engine.api``); no queries run here (a
claimed step's spec node: runs.engine.store.graphs.step_node).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

from core.errors import ConflictError, NotFoundError, ServiceError
from runs.nodes.base import ChildCall

if TYPE_CHECKING:
    from runs.models import Run


class RunNotFound(NotFoundError, LookupError):
    """No run with that id."""


class StepStateError(ConflictError, RuntimeError):
    """A step or run is not in the status an operation needs (e.g. resuming a step that is
    not waiting, deciding twice, forking at a step nothing follows): 409 ``invalid_state``."""

    code = "invalid_state"


class TestRunRefused(StepStateError):
    """Resume, retry or fork asked of a node-test run (``Run.is_test``): a test run is a
    one-off check of one node from the builder, pinned to a hidden one-node snapshot, so
    re-running it would run the harness (its internal end node), not the graph. The node is
    tested again from the builder instead. The API answers 409 ``test_run``."""

    code = "test_run"
    __test__ = False  # not a pytest class


class StateWriteRefused(ServiceError, ValueError):
    """Values offered to a run's state from outside a step (a skipped step's given output,
    a fork's state patch, a run's input or a test run's state) cannot be stored.

    ``code``: ``invalid_output`` (a value JSON cannot carry; ``path`` names it),
    ``unknown_state_key`` (a key the graph does not know) or ``state_too_large`` (the
    run's state would pass ``BALLAST_MAX_STATE_BYTES``). ``fields`` maps field paths
    (``output.total``, ``state_patch.items[2]``) to messages, as API errors carry them.
    Nothing was written.
    """

    def __init__(self, code: str, message: str, fields: dict[str, list[str]] | None = None, details: dict[str, Any] | None = None):
        super().__init__(message, fields=fields)
        if details:  # ``details`` joins the body only when there are some
            self.extra["details"] = details
        self.code = code
        self.details = details or {}


class VersionUnrunnable(ServiceError, ValueError):
    """A graph version cannot start a run: its stored spec no longer parses (stored before
    a bound it breaks existed, e.g. ``settings.budget_usd`` past 8 integer digits), or a
    limit the run would store does not fit the run's row (graphs.bounds). ``fields`` maps
    spec paths (``settings.budget_usd``) or start arguments (``budget_usd``) to messages,
    as API errors carry them (code ``version_invalid``). Nothing was written."""

    code = "version_invalid"

    def __init__(self, message: str, fields: dict[str, list[str]]):
        super().__init__(message, fields=fields)


class StateTooLarge(StateWriteRefused):
    """A write would make the run's state larger than ``BALLAST_MAX_STATE_BYTES``.

    ``details``: ``{"size", "limit"}`` (UTF-8 bytes of the state's compact JSON) and
    ``keys``: the largest keys with their sizes, biggest first."""

    def __init__(self, message: str, *, field: str, details: dict[str, Any]):
        super().__init__("state_too_large", message, {field: [message]}, details)


def spec_node_id(step_node_id: str) -> str:
    """``agent#0/turn-1`` -> ``agent``: the spec node of a (child) step's node id."""
    return step_node_id.split("#", 1)[0]


def step_idempotency_key(run_uuid: Any, node_id: str, iteration: int) -> str:
    """The key every attempt of one step shares: ``<run uuid>:<node id>:<iteration>``."""
    return f"{run_uuid}:{node_id}:{iteration}"


class ActiveStep(NamedTuple):
    """One of a run's active steps (pending, running, waiting, parked, suspended), as the
    commit reads it to decide dispatch, joins and the run's status."""

    id: int
    node_id: str
    status: str
    dispatched_at: datetime | None
    available_at: datetime | None
    parent_id: int | None


@dataclass
class BranchSnapshot:
    """The run as a parallel commit left it: ``run`` (version, status, state, bookkeeping
    with the contributions it held, size map, step count, totals, as written) and
    ``active``, the run's active steps after that commit as the commit wrote them.

    Valid while the run's version is ``run.version`` and its active steps still look like
    ``active`` to the commit's decisions (fastpath.active_fingerprint): the branch commit
    checks both in its statement and takes the locked path when either moved.
    ``contended``: a commit of this chain found the run moved (another worker commits to
    it too), so the next commits take the locked path without trying."""

    run: Run
    active: list[ActiveStep]
    contended: bool = False


@dataclass
class ClaimedStep:
    """A step this worker holds a lease on, with what executing it needs.

    ``attempt`` is the fencing token: a commit lands only while the step is running with
    this attempt and ``worker`` as lease owner. ``state`` and ``run_input`` are the run's
    committed JSON values; budgets are what remains (USD, tokens) or None when unlimited.
    ``children`` maps child keys of an agent-like parent to ``{"status", "output"|"error"}``.
    """

    step_id: int
    run_id: int
    run_uuid: str
    node_id: str
    kind: str
    iteration: int
    depth: int
    attempt: int
    max_attempts: int
    idempotency_key: str
    version_id: int
    state: dict[str, Any]
    run_input: dict[str, Any]
    budget_remaining_usd: Decimal | None
    budget_remaining_tokens: int | None
    worker: str
    parent_id: int | None = None
    child_key: str = ""
    child_input: dict[str, Any] | None = None
    children: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The run as this worker's last commit left it, when this step is the run's only
    # active step (a sequential stretch); lets the next commit skip reading the run.
    snapshot: Run | None = None
    # The run as this worker's parallel commit left it, when this step is a branch that
    # commit leased to it (fastpath.parallel_commit): lets the branch commit in one
    # statement, fenced by the run version and the run's active steps.
    branch_snapshot: BranchSnapshot | None = None
    # The run's stored W3C trace context (Run.traceparent): the attempt's span is its
    # child (core.tracing); "" for a run started before traces were kept.
    traceparent: str = ""

    @property
    def spec_node_id(self) -> str:
        """The spec node this step executes (a child step executes its parent's node)."""
        return spec_node_id(self.node_id)

    def child_call(self) -> ChildCall:
        """The ChildCall of a child step (key, label, input)."""
        return ChildCall(key=self.child_key, label=self.kind, input=self.child_input or {})


@dataclass
class CommitOutcome:
    """What a commit decided. ``committed`` is False when the lease was lost (nothing was
    written); ``dispatch`` holds step ids to hand to the queue after the commit;
    ``next_step`` is a successor already leased to this worker (no queue hop)."""

    committed: bool
    dispatch: list[int] = field(default_factory=list)
    next_step: ClaimedStep | None = None
    run_status: str = ""


@dataclass
class StartedRun:
    """A run committed with its first steps: ``step_ids`` go to the queue after commit."""

    run: Run
    step_ids: list[int]


@dataclass(frozen=True)
class ReopenedStep:
    """A step a resume or retry sends back to work: ``status`` it gets (``pending``, or
    ``suspended`` for an agent-like parent whose failed children re-run) and its new
    ``max_attempts``."""

    step_id: int
    node_id: str
    iteration: int
    parent_id: int | None
    status: str
    max_attempts: int


@dataclass(frozen=True)
class ResumePlan:
    """What :func:`runs.engine.api.run_resume` does to a run: ``mode`` ``failed`` (reopen the failed step
    and what its failure cancelled) or ``parked`` (re-queue the parked steps); ``reopen``
    the steps it sends back, in id order; ``kept`` the ids of the committed steps that
    stay facts (never run again)."""

    run_id: int
    mode: str
    reopen: list[ReopenedStep]
    kept: list[int]
