"""The node-kind plugin contract: config model, validation hooks and execute().

A node kind knows nothing of the engine, the database or the queue. The engine gives
``execute`` a :class:`NodeContext` (the committed run state, the step's identity and its
idempotency key) and stores the returned :class:`NodeResult` in one commit.
"""
from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from runs.sandbox.errors import clip
from runs.vocabulary import NODE_ERROR_CHARS, CancelEvent, StepCancelled, Usage


class NodeConfig(BaseModel):
    """Base of every node kind's config model: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


# The config model of one node kind: NodeKind[ConfigT]'s methods take a ConfigT, so a kind
# types its config exactly without narrowing the base class's signatures.
ConfigT = TypeVar("ConfigT", bound=NodeConfig)


@dataclass(frozen=True)
class Issue:
    """One validation problem: which node (or edge), which field, what is wrong.

    ``node_id`` is None for graph-level problems; ``field`` is a :func:`field_path` inside
    the node (``config.cases[0].expression``) or in the spec (``edges[3].target``).
    """

    node_id: str | None
    field: str
    message: str
    code: str = "invalid"

    def __post_init__(self) -> None:
        # Messages quote spec values (a node kind, an edge's source, an expression's error)
        # that can be as long as a request body: bounded like every quotation.
        if len(self.message) > NODE_ERROR_CHARS:
            object.__setattr__(self, "message", clip(self.message, NODE_ERROR_CHARS, fold=False))

    def as_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "field": self.field, "message": self.message, "code": self.code}

    def __str__(self) -> str:
        where = f"{self.node_id}.{self.field}" if self.node_id else self.field
        return f"{where}: {self.message}"


@dataclass
class Wait:
    """A step that must wait for a person or a child run: the engine commits it as
    ``waiting``. A child step may wait too (an agent's graph tool call: its node kind's
    :meth:`NodeKind.on_wait` runs in that commit; the parent stays suspended until
    whoever finishes the waiting child wakes it).

    ``payload`` is JSON stored with the request (prompt, who may decide, the data shown).
    ``due_seconds``: when set, the waiting step is due that many seconds after its commit
    (its ``Step.due_at``); the engine's claim-by-due-time then calls
    :meth:`NodeKind.on_due` once (an approval's deadline). None: it waits for ever.
    """

    reason: str
    payload: dict[str, Any] = field(default_factory=dict)
    due_seconds: float | None = None


@dataclass
class DueOutcome:
    """What a waiting step's deadline did (:meth:`NodeKind.on_due`). ``action`` names it
    (``timeout``, ``reassign``, ``notify``: the event and audit entry say so, with
    ``details``); ``result``, when set, finishes the waiting step as if it had been
    decided (its ``route`` picks the edges that follow, e.g. ``["timeout"]``); None keeps
    it waiting, with no deadline left."""

    action: str
    result: NodeResult | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChildCall:
    """A child step a node asks the engine to run and commit on its own (an agent's model
    turn or tool call). ``key`` is unique within the parent step and stable across
    replays (``turn-0``, ``tool-0-call_abc``); ``label`` names what it is (``model_turn``,
    ``tool_call``); ``input`` is the JSON handed to :meth:`NodeKind.execute_child`."""

    key: str
    label: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass
class NodeResult:
    """What a step produced.

    - ``updates``: state keys to write (merged into run state with the graph's reducers).
    - ``sets``: keys of ``updates`` that are set rather than reduced (an approver's edited
      values): the written value replaces the key's value whatever its reducer, and later
      writes reduce onto it (runs.engine.scheduler.merge_updates).
    - ``output``: the step's recorded output (defaults to ``updates``).
    - ``route``: source handles taken; None means every outgoing edge (fan-out).
    - ``usage``/``cost_usd``: LLM usage and its price in USD (None = unknown price).
    - ``wait``: set to park the run at this step until someone decides.
    - ``spawn``: child steps to run before this node can finish. The engine commits them
      as steps of their own, suspends this step (no lease, no worker), and executes the
      node again once every child has finished, with their results in
      ``NodeContext.children`` (durable replay, as in Temporal and DBOS: a finished child
      is never executed again).
    """

    updates: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    route: list[str] | None = None
    sets: frozenset[str] = frozenset()
    usage: Usage | None = None
    cost_usd: Decimal | None = None
    wait: Wait | None = None
    spawn: list[ChildCall] | None = None

    def recorded_output(self) -> Any:
        return self.updates if self.output is None else self.output


class StateView(Mapping[str, Any]):
    """The committed run state as a node reads it: read-only, and each value a private deep
    copy made the first time the node reads that key (then the same copy on every read).

    A node that reads one key of a large state pays for that key only, and mutating what
    it read changes nothing of the run's state. ``dict(view)`` copies every value."""

    __slots__ = ("_state", "_copies")

    def __init__(self, state: Mapping[str, Any]):
        self._state = state
        self._copies: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        try:
            return self._copies[key]
        except KeyError:
            pass
        value = self._copies[key] = copy.deepcopy(self._state[key])
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._state

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)

    def __repr__(self) -> str:
        return f"StateView({sorted(self._state)!r})"


@dataclass
class NodeContext:
    """What a node may know while it executes (outside any transaction).

    - ``state``: the run state as committed before this step, read-only; the engine
      passes a :class:`StateView` (each value deep-copied on first read, so mutating what
      was read changes nothing, and a node pays only for the keys it reads).
    - ``idempotency_key``: the same on every attempt of this step; pass it to external
      systems (Idempotency-Key header, email Message-ID) so a re-run is recognised.
    - ``deadline``: ``time.monotonic()`` value after which the step has timed out.
    - ``cancel_event``: set when the run is cancelled, the lease is lost or the step's
      ``timeout_seconds`` ran out (a :class:`~runs.vocabulary.CancelEvent`: a blocked
      call can register to be aborted when it is set).
    - ``children``: results of this step's committed child steps, by key:
      ``{"status": "succeeded", "output": ...}`` or ``{"status": "failed", "error": {...}}``.
    """

    run_id: int
    run_uuid: str
    step_id: int
    node_id: str
    iteration: int
    attempt: int
    idempotency_key: str
    state: Mapping[str, Any]
    run_input: Mapping[str, Any]
    deadline: float | None = None
    budget_remaining_usd: Decimal | None = None
    budget_remaining_tokens: int | None = None
    cancel_event: threading.Event = field(default_factory=CancelEvent)
    children: dict[str, dict[str, Any]] = field(default_factory=dict)

    def time_left(self) -> float | None:
        """Seconds until the deadline (None when the step has no timeout)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def check_cancelled(self) -> None:
        """Raise :class:`StepCancelled` if the run was cancelled or the lease was lost."""
        if self.cancel_event.is_set():
            raise StepCancelled()


class NodeKind(Generic[ConfigT]):
    """Base class of a node kind plugin (one module per kind, registered by dotted path),
    generic over its config model: ``class LLMNode(NodeKind[LLMConfig])``.

    Class attributes:
    - ``kind``: the spec's ``kind`` string.
    - ``config_model``: pydantic model of the node's ``config`` (its JSON Schema is
      exported); callers parse a node's config with ``kind.config_model.model_validate``
      and hand the result to the methods below.
    - ``repeat_safe``: whether an attempt interrupted by a crash may simply run again. A
      node whose side effect must not repeat (an email, a payment) says False; recovery
      then parks the run for a person to decide instead of re-running it.
    - ``uses_repeat_safe``: whether a node's own ``repeat_safe`` field means anything for
      this kind. False for kinds whose step does nothing outside the run (start, end,
      join, condition, transform, approval) and for kinds whose step is a replay that
      spawns the real work as children with their own rule (the agent: per tool);
      validation refuses the field on them instead of ignoring it, pointing to
      ``repeat_safe_instead`` (where the kind takes it instead, e.g.
      ``config.repeat_safe_tools``) when set.
    - ``does_work``: whether the step does anything itself (calls, computes, asks a
      person). False for start, end and join, whose steps only open edges or select keys
      at once: a timeout, a retry policy or a test run of one node mean nothing there, so
      the builder does not offer them (``builder.selectors.node_kind_catalogue``).
    - ``retries_wait``: whether the node's ``retry`` policy covers what ends its wait.
      False for the call-graph kind: its child run is called once per step, and a failed
      child fails the step with no retry (validation warns, ``retry_not_applied``).
    - ``description``: one line shown in the builder palette; ``title`` and ``category``
      name and group the kind there (``builder.selectors.node_kind_catalogue``).
    - ``dynamic_handles``: whether :meth:`output_handles` depends on the config (the
      condition's cases); the exported schema says so.
    """

    kind: ClassVar[str] = ""
    config_model: type[ConfigT]
    repeat_safe: ClassVar[bool] = True
    uses_repeat_safe: ClassVar[bool] = True
    does_work: ClassVar[bool] = True
    retries_wait: ClassVar[bool] = True
    repeat_safe_instead: ClassVar[str] = ""
    description: ClassVar[str] = ""
    title: ClassVar[str] = ""
    category: ClassVar[str] = ""
    dynamic_handles: ClassVar[bool] = False

    # --- static facts used by validation and the scheduler --------------------------
    def output_handles(self, config: ConfigT) -> list[str] | None:
        """Named source handles this node routes by, or None for a plain node.

        A plain node has one unnamed handle and every outgoing edge fires (fan-out). A
        routing node (condition, approval) returns its handle names; validation requires
        every one to be wired (except those listed by :meth:`optional_handles`).
        """
        return None

    def optional_handles(self, config: ConfigT) -> set[str]:
        """Handles that may be left unwired (for example an approval's ``rejected``)."""
        return set()

    def writes(self, config: ConfigT) -> set[str]:
        """State keys this node may write (for the parallel-write and unknown-name checks)."""
        return set()

    def check(self, node_id: str, config: ConfigT, known_names: set[str]) -> list[Issue]:
        """Kind-specific validation (expressions parse, names known, tools exist ...)."""
        return []

    def is_repeat_safe(self, config: ConfigT) -> bool:
        """Whether this configured node may re-run after a crash (default: ``repeat_safe``)."""
        return self.repeat_safe

    def is_step_repeat_safe(self, config: ConfigT, override: bool | None) -> bool:
        """Whether a (top-level) step of this node may re-run after a crash: the node's
        ``repeat_safe`` field when it sets one and the kind uses it, else
        :meth:`is_repeat_safe`. Recovery and the node-test confirmation both ask this."""
        if override is not None and self.uses_repeat_safe:
            return override
        return self.is_repeat_safe(config)

    def estimate_cost(self, config: ConfigT, state: Mapping[str, Any]) -> tuple[Decimal | None, int]:
        """Worst-case (USD, tokens) of one execution, for budgets. (0, 0) for free nodes."""
        return Decimal(0), 0

    # --- execution ------------------------------------------------------------------
    def execute(self, config: ConfigT, ctx: NodeContext) -> NodeResult:
        """Run the node once. Raise :class:`NodeError` on failure. Must not touch the DB."""
        raise NotImplementedError

    def execute_child(self, config: ConfigT, call: ChildCall, ctx: NodeContext) -> NodeResult:
        """Run one child step this node spawned (outside any transaction). ``ctx`` is the
        child's context (its own idempotency key and attempt). Usage and cost returned
        here are recorded on the child step. Raise :class:`NodeError` on failure; a
        child that fails for good is reported to the parent in ``ctx.children``. A
        result with ``wait`` parks the child step (see :class:`Wait`)."""
        raise NotImplementedError(f"node kind '{self.kind}' spawns no children")

    def is_child_repeat_safe(self, config: ConfigT, call: ChildCall) -> bool:
        """Whether a child interrupted by a crash may run again (a tool call may not)."""
        return True

    def estimate_child_cost(self, config: ConfigT, call: ChildCall, state: Mapping[str, Any]) -> tuple[Decimal | None, int]:
        """Worst-case (USD, tokens) of one child step, for budgets."""
        return Decimal(0), 0

    def on_due(self, config: ConfigT, *, run: Any, step: Any, now: Any) -> DueOutcome | None:
        """Called once, inside the engine's transaction (run row locked), when a step that
        waits with ``Wait.due_seconds`` is due and still waiting: escalate (write your own
        rows: the approval kind reassigns its request or emails it again) and say what
        happened, or return a result that finishes the step. None: nothing to do."""
        return None

    def waits(self, config: ConfigT) -> bool:
        """Whether a step of this configured node may wait (for a person, a child run):
        such a node cannot be tested on its own (builder). Default: the kind has an
        :meth:`on_wait`."""
        return type(self).on_wait is not NodeKind.on_wait

    def on_wait(self, *, run: Any, step: Any, wait: Wait) -> None:
        """Called inside the commit transaction when ``execute`` (or ``execute_child``:
        ``step`` is then the child step) returned a Wait.

        The approval kind creates its approval request here, so the request, the step's
        waiting status and the run's waiting status commit together.
        """
