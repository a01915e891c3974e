"""The join node kind: an AND-join of all incoming edges, with dead-path elimination."""

from __future__ import annotations

from typing import ClassVar

from runs.nodes.base import NodeConfig, NodeContext, NodeKind, NodeResult


class JoinNode(NodeKind[NodeConfig]):
    """Waits for every incoming branch that can still reach it, then fires once.

    The waiting is the scheduler's job (it knows which branches are still alive; a branch
    closed by a condition counts as done). When the step runs, all inputs have already
    been merged into state with the graph's reducers, so execution has nothing to do.
    Validation requires at least two incoming edges.
    """

    kind: ClassVar[str] = "join"
    config_model = NodeConfig
    uses_repeat_safe: ClassVar[bool] = False  # nothing outside the run: always safe to repeat
    does_work: ClassVar[bool] = False  # no timeout, retry or test run in the builder
    description: ClassVar[str] = "Wait for all parallel branches that can still arrive, then continue once."
    title, category = "Join", "flow"  # builder palette (builder.selectors.node_kind_catalogue)

    def execute(self, config: NodeConfig, ctx: NodeContext) -> NodeResult:
        """Do nothing: the scheduler only creates this step once every live input arrived."""
        return NodeResult()
