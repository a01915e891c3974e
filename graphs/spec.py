"""The graph spec: a pydantic document for a graph (nodes, edges, state keys, settings).

The spec is what the builder saves and what a graph version freezes. Structural checks
that need the whole graph (reachability, handles, loops, reducers) live in
``builder.validation``; this module only fixes the shape.
"""
from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from graphs.bounds import BUDGET_USD_LIMIT, MAX_BIGINT

NODE_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$"

# Reducers combine writes to one state key. Order-sensitive reducers (append, extend,
# merge) apply contributions sorted by (depth, node id, iteration), never by finish
# time, so a merge is deterministic whichever parallel branch commits first.
Reducer = Literal["replace", "append", "extend", "add", "merge", "max", "min"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Position(_Model):
    """Canvas position in pixels (the builder's layout; no runtime meaning)."""

    x: float = 0
    y: float = 0


class RetryPolicy(_Model):
    """When and how a failed step is tried again.

    ``max_attempts`` counts every attempt (1 = no retry). Delay before attempt n+1 is
    ``backoff_seconds * backoff_multiplier**(n-1)`` capped at ``max_backoff_seconds``.
    ``retry_on`` lists error codes to retry (empty = every error the node marks retryable).
    """

    max_attempts: int = Field(1, ge=1, le=100)
    backoff_seconds: float = Field(1.0, ge=0, le=3600)
    backoff_multiplier: float = Field(2.0, ge=1, le=10)
    max_backoff_seconds: float = Field(300.0, ge=0, le=86400)
    retry_on: list[str] = Field(default_factory=list)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.max_backoff_seconds, self.backoff_seconds * self.backoff_multiplier ** max(0, attempt - 1))


class NodeSpec(_Model):
    """One node: its id, kind, kind-specific config and engine policies.

    - ``timeout_seconds``: wall-clock limit of one attempt (None = no limit).
    - ``max_iterations``: how many times this node may run in one run; required on
      at least one node of every cycle (a loop must be bounded).
    - ``repeat_safe``: override the kind's default; False parks the run after a crash
      interrupted this step instead of running it again. Only on kinds whose step can
      act outside the run (``tool``, ``llm``, plugin kinds); validation refuses it on
      start, end, join, condition, transform and approval (always safe to repeat) and on
      agent (set it per tool in ``config.repeat_safe_tools``).
    """

    id: str = Field(pattern=NODE_ID_PATTERN)
    kind: str
    label: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    position: Position | None = None
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout_seconds: float | None = Field(None, gt=0, le=86400)
    max_iterations: int | None = Field(None, ge=1, le=10000)
    repeat_safe: bool | None = None


class EdgeSpec(_Model):
    """A connection from ``source`` (optionally one of its named handles) to ``target``."""

    id: str | None = None
    source: str
    target: str
    source_handle: str | None = None
    target_handle: str | None = None


class StateKeySpec(_Model):
    """A declared state key: its reducer for concurrent or repeated writes, and a default."""

    reducer: Reducer = "replace"
    default: Any = None
    description: str = ""


class NoteSpec(_Model):
    """A sticky note on the canvas: layout only, like node positions.

    Validation ignores notes, the engine never reads them, and a version diff lists them
    under ``layout`` apart from the graph's logic. ``position`` is the top-left corner and
    ``width``/``height`` the size, in pixels; ``color`` whatever the builder draws with
    (a palette name, ``#rrggbb``). Only the shape is checked, loosely: a note never makes
    a graph invalid for its content.
    """

    id: str = Field(min_length=1, max_length=100)
    text: str = Field("", max_length=50_000)
    position: Position = Field(default_factory=Position)
    width: float = Field(200, gt=0, le=100_000)
    height: float = Field(120, gt=0, le=100_000)
    color: str = Field("yellow", max_length=32)


class GraphSettings(_Model):
    """Run-wide limits: parallel steps at once, steps per run, and an optional budget.

    Each lands in a column of every run (graphs.bounds): ``budget_usd`` is 0 or more and
    under 100,000,000 (8 integer digits, as the run API takes it), ``budget_tokens`` 0
    to 2**63-1.
    """

    max_parallelism: int = Field(4, ge=1, le=256)
    max_steps: int = Field(1000, ge=1, le=100000)
    budget_usd: Decimal | None = Field(None, ge=0, lt=BUDGET_USD_LIMIT, allow_inf_nan=False)
    budget_tokens: int | None = Field(None, ge=0, le=MAX_BIGINT)


class GraphSpec(_Model):
    """A whole graph. ``input_schema`` is a JSON Schema that a run's input must satisfy;
    its top-level properties become state keys, as do declared ``state`` keys."""

    version: Literal[1] = 1
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    state: dict[str, StateKeySpec] = Field(default_factory=dict)
    settings: GraphSettings = Field(default_factory=GraphSettings)
    # Bounds keep validation (quadratic in the worst case) and every run's bookkeeping
    # small; an agent graph this size is already unreadable.
    nodes: list[NodeSpec] = Field(max_length=500)
    edges: list[EdgeSpec] = Field(default_factory=list, max_length=2000)
    # Layout only (see NoteSpec): kept with the spec so a version shows its notes.
    notes: list[NoteSpec] = Field(default_factory=list, max_length=500)
    # The draft's pinned test input (a payload a webhook listen captured, say): the run
    # dialog's starting input. A draft setting, not graph logic: excluded from every dump,
    # so no version holds it and it changes no content hash.
    test_input: dict[str, Any] | None = Field(None, exclude=True)

    def node(self, node_id: str) -> NodeSpec:
        """The node with ``node_id`` (KeyError if absent)."""
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def input_names(self) -> set[str]:
        """Top-level property names of the input schema."""
        props = self.input_schema.get("properties") or {}
        return set(props) if isinstance(props, dict) else set()


def canonical_json(data: Any) -> str:
    """Stable JSON text (sorted keys, no spaces) used for content hashes."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def content_hash(spec: dict[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON of a spec dict."""
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()


def spec_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12, as pydantic emits it) of the whole graph spec."""
    return GraphSpec.model_json_schema()
