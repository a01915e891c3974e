"""The transform node kind: computes state keys from expressions over the current state."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field, field_validator

from runs.expressions import ExpressionError, evaluate, parse_expression
from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeError, NodeKind, NodeResult

# A key written by a node must be usable as a name in later expressions.
STATE_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def check_expression(node_id: str, field: str, source: str, known_names: set[str]) -> list[Issue]:
    """Issues of one expression: ``invalid_expression`` when it does not parse (or breaks a
    static limit), else one ``unknown_variable`` per name outside ``known_names`` (sorted).

    Shared by the kinds that hold expressions (transform, condition).
    """
    try:
        parsed = parse_expression(source)
    except ExpressionError as exc:
        return [Issue(node_id, field, f"invalid expression: {exc.message}", "invalid_expression")]
    return [
        Issue(node_id, field, f"unknown variable '{name}'", "unknown_variable")
        for name in sorted(parsed.names - known_names)
    ]


def expression_names(ctx: NodeContext) -> dict[str, Any]:
    """The names an expression sees: the committed state plus ``input`` (the run input).

    ``ctx.state`` is already a private copy, so expressions cannot change the run's state.
    """
    names: dict[str, Any] = dict(ctx.state)
    names.setdefault("input", dict(ctx.run_input))
    return names


class TransformConfig(NodeConfig):
    """``set``: state key -> expression. Every expression sees the state as it was before
    this node ran, so the order of keys never changes the result."""

    set: dict[str, str] = Field(
        min_length=1,
        description="State key -> expression; all expressions see the state from before this node.",
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


class TransformNode(NodeKind):
    """Writes each key of ``config.set`` with the value of its expression."""

    kind: ClassVar[str] = "transform"
    Config: ClassVar[type[NodeConfig]] = TransformConfig
    description: ClassVar[str] = "Compute state values from expressions over the current state."
    title, category = "Transform", "data"  # builder palette (builder.selectors.node_kind_catalogue)

    def writes(self, config: NodeConfig) -> set[str]:
        assert isinstance(config, TransformConfig)
        return set(config.set)

    def check(self, node_id: str, config: NodeConfig, known_names: set[str]) -> list[Issue]:
        """Each expression parses and names only known variables (field ``config.set.<key>``)."""
        assert isinstance(config, TransformConfig)
        issues: list[Issue] = []
        for key, source in config.set.items():
            issues.extend(check_expression(node_id, f"config.set.{key}", source, known_names))
        return issues

    def execute(self, config: NodeConfig, ctx: NodeContext) -> NodeResult:
        """Evaluate every expression against the state before this node; return the updates.

        Raises NodeError(code="expression", retryable=False) naming the key whose
        expression failed: the same state would fail the same way on every retry.
        """
        assert isinstance(config, TransformConfig)
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
