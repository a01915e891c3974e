"""The end node kind: finishes a run and selects the state keys returned as its result."""

from __future__ import annotations

import copy
from typing import ClassVar

from pydantic import Field

from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeKind, NodeResult


class EndConfig(NodeConfig):
    """``output``: state keys returned as the run's result, in this order; None returns the
    whole state."""

    output: list[str] | None = Field(
        default=None,
        title="Output state keys",
        description="State keys returned as the run's result. Leave empty to return the whole state.",
    )


class EndNode(NodeKind[EndConfig]):
    """A terminal node (no outgoing edges). Its recorded output is the run's result."""

    kind: ClassVar[str] = "end"
    config_model = EndConfig
    uses_repeat_safe: ClassVar[bool] = False  # nothing outside the run: always safe to repeat
    does_work: ClassVar[bool] = False  # no timeout, retry or test run in the builder
    description: ClassVar[str] = "Finish the run and return selected state keys as its result."
    title, category = "End", "flow"  # builder palette (builder.selectors.node_kind_catalogue)

    def check(self, node_id: str, config: EndConfig, known_names: set[str]) -> list[Issue]:
        """Every selected key must be a known state name (else it would always be None)."""
        issues: list[Issue] = []
        seen: set[str] = set()
        for i, key in enumerate(config.output or []):
            field = f"config.output[{i}]"
            if key in seen:
                issues.append(Issue(node_id, field, f"state key '{key}' is listed twice", "duplicate_output"))
            elif key not in known_names:
                issues.append(Issue(node_id, field, f"unknown variable '{key}'", "unknown_variable"))
            seen.add(key)
        return issues

    def execute(self, config: EndConfig, ctx: NodeContext) -> NodeResult:
        """Return the selected keys (a missing key gives None) or a copy of the whole state."""
        if config.output is None:
            result = copy.deepcopy(dict(ctx.state))
        else:
            result = {key: copy.deepcopy(ctx.state.get(key)) for key in config.output}
        return NodeResult(output=result)
