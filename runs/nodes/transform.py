"""The transform node kind: computes state keys from expressions over the current state."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field, field_validator

from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeKind, NodeResult
from runs.nodes.shared import STATE_KEY_PATTERN, check_expression, expression_names
from runs.sandbox.expressions import ExpressionError, evaluate
from runs.vocabulary import NodeError


class TransformConfig(NodeConfig):
    """``set``: state key -> expression. Every expression sees the state as it was before
    this node ran, so the order of keys never changes the result."""

    set: dict[str, str] = Field(
        min_length=1,
        title="State keys to set",
        description="Each state key gets the value of its expression; every expression sees the state from before this node.",
    )

    @field_validator("set")
    @classmethod
    def _keys_are_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [key for key in value if not re.match(STATE_KEY_PATTERN, key)]
        if bad:
            raise ValueError(
                f"state key {bad[0]!r} is not a valid name (letters, digits and _, not starting with a digit)"
            )
        return value


class TransformNode(NodeKind[TransformConfig]):
    """Writes each key of ``config.set`` with the value of its expression."""

    kind: ClassVar[str] = "transform"
    config_model = TransformConfig
    uses_repeat_safe: ClassVar[bool] = False  # nothing outside the run: always safe to repeat
    description: ClassVar[str] = "Compute state values from expressions over the current state."
    title, category = "Transform", "data"  # builder palette (builder.selectors.node_kind_catalogue)

    def writes(self, config: TransformConfig) -> set[str]:
        return set(config.set)

    def check(self, node_id: str, config: TransformConfig, known_names: set[str]) -> list[Issue]:
        """Each expression parses and names only known variables (field ``config.set.<key>``)."""
        issues: list[Issue] = []
        for key, source in config.set.items():
            issues.extend(check_expression(node_id, f"config.set.{key}", source, known_names))
        return issues

    def execute(self, config: TransformConfig, ctx: NodeContext) -> NodeResult:
        """Evaluate every expression against the state before this node; return the updates.

        Raises NodeError(code="expression", retryable=False) naming the key whose
        expression failed: the same state would fail the same way on every retry.
        """
        names: Mapping[str, Any] = expression_names(ctx)
        updates: dict[str, Any] = {}
        for key, source in config.set.items():
            try:
                updates[key] = evaluate(source, names)
            except ExpressionError as exc:
                raise NodeError(
                    f"expression for '{key}' failed: {exc.message}",
                    code="expression",
                    retryable=False,
                    details={"key": key, "expression": source, "error_code": exc.code},
                ) from exc
        return NodeResult(updates=updates)
