"""The start node kind: the single entry of a graph; the run's input is already in state."""

from __future__ import annotations

from typing import ClassVar

from runs.nodes.base import NodeConfig, NodeContext, NodeKind, NodeResult


class StartNode(NodeKind[NodeConfig]):
    """Entry point of every run. Exactly one per graph, with no incoming edges (checked by
    ``builder.validation``). It writes nothing: the engine seeds state from the run input
    before the start step, so the start step only opens the graph's outgoing edges (all of
    them: several edges from start are a parallel fan-out)."""

    kind: ClassVar[str] = "start"
    config_model = NodeConfig
    uses_repeat_safe: ClassVar[bool] = False  # nothing outside the run: always safe to repeat
    does_work: ClassVar[bool] = False  # no timeout, retry or test run in the builder
    description: ClassVar[str] = "Where a run begins; its input becomes the first state."
    title, category = "Start", "flow"  # builder palette (builder.selectors.node_kind_catalogue)

    def execute(self, config: NodeConfig, ctx: NodeContext) -> NodeResult:
        """Do nothing and fire every outgoing edge."""
        return NodeResult()
