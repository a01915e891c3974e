"""The ``subgraph`` node kind: call a published graph as a durable child run and wait for its output as a row.

The step renders the child's input from the parent state, resolves and checks the child
version (pinned when this step's wait commits: "latest" is whatever was latest then), and
returns a :class:`~runs.nodes.base.Wait`. Its commit creates the child run in the same
transaction that records the step as waiting (:meth:`SubgraphNode.on_wait`,
runs.subgraphs.calls.child_start), so a worker killed at any point either left no child
or left the waiting step and its one child together. The child's terminal transaction
makes the parent step due; the subgraphs due source finishes it with the child's output
(or fails it with the child's error) and the parent run goes on (runs.subgraphs.calls).

This kind lives beside the node kinds of runs.nodes, not among them: creating a run is an
engine operation (runs.engine.api.run_start), and "node kinds know nothing of the engine"
holds for the kinds that only compute, as approvals.nodes keeps its request rows.
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, WithJsonSchema

from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeKind, NodeResult, Wait
from runs.nodes.shared import STATE_KEY_PATTERN, check_template_values, expression_names, render_template_values
from runs.subgraphs import calls

# The Wait reason of a step waiting for its child run (the step_waiting event says so).
WAIT_REASON = "subgraph"


class SubgraphConfig(NodeConfig):
    """Config of a ``subgraph`` node.

    - ``graph``: the id of the graph to call (it must have a published version).
    - ``version``: a published version number, or ``"latest"``: the newest published
      version when the step first starts, pinned for that call.
    - ``input``: the child run's input object; string values may be templates rendered
      against the parent state (``"{{ order.id }}"`` keeps the value's type), as a tool
      node's arguments. Checked against the child version's input schema before the
      child is created.
    - ``output_key``: the parent state key the child run's output is written to.
    """

    graph: int = Field(ge=1, title="Graph", description="The published graph to call.")
    # One schema with no type (not anyOf integer|"latest"): the builder edits it with one
    # picker of "latest" and the graph's version numbers; pydantic checks the value.
    version: Annotated[int | Literal["latest"], WithJsonSchema({"examples": ["latest", 1]})] = Field(
        "latest", title="Version", description="A published version number, or latest: the newest one when the step starts (then pinned)."
    )
    input: dict[str, Any] = Field(
        default_factory=dict, title="Input", description="The child run's input; text values may be templates, e.g. {{ order_id }}."
    )
    output_key: str = Field("result", pattern=STATE_KEY_PATTERN, title="Output state key", description="The state key the child run's output is written to.")


class SubgraphNode(NodeKind[SubgraphConfig]):
    """Runs a published graph as a child run (Temporal's child workflow, n8n's "Execute
    Workflow"): pinned to a version, input checked against its schema, exactly one child
    per step, its cost rolled up into the parent's, cancel propagated both ways."""

    kind = "subgraph"
    config_model = SubgraphConfig
    # The child is created in the step's commit, never twice: repeating the step is safe.
    uses_repeat_safe: ClassVar[bool] = False
    # One child per step (Run.parent_step is one-to-one): a failed child fails the step.
    retries_wait: ClassVar[bool] = False
    description = "Call another published graph as a step and wait for its output."
    title, category = "Call graph", "flow"  # builder palette (builder.selectors.node_kind_catalogue)

    def writes(self, config: SubgraphConfig) -> set[str]:
        return {config.output_key}

    def check(self, node_id: str, config: SubgraphConfig, known_names: set[str]) -> list[Issue]:
        """Templates in ``input`` parse and name only known variables. Whether the graph
        exists, is published, may be called by whoever publishes, and makes no cycle is
        checked against the database when publishing (builder.graph_calls)."""
        return check_template_values(node_id, "config.input", config.input, known_names)[0]

    def execute(self, config: SubgraphConfig, ctx: NodeContext) -> NodeResult:
        """Render the child input, resolve the version and check the input against its
        schema (reads only: nothing is pinned or created until this step's wait commits),
        then wait. Raises NodeError, none retryable: ``template``, ``subgraph_missing``
        (no such graph or version), ``subgraph_forbidden`` (the run's starter may not run
        the child graph), ``subgraph_too_deep`` (nesting past BALLAST_SUBGRAPH_MAX_DEPTH),
        ``subgraph_input`` (``details.fields``: ``{"input.<path>": [messages]}``)."""
        child_input = render_template_values("config.input", config.input, expression_names(ctx))
        target = calls.target_resolve(graph_id=config.graph, version=config.version, run_id=ctx.run_id)
        calls.input_check(target, child_input)
        payload = {**target.as_dict(), "input": child_input}
        output = {"graph": target.graph_id, "graph_name": target.graph_name, "version": target.number}
        return NodeResult(output=output, wait=Wait(WAIT_REASON, payload))

    def on_wait(self, *, run: Any, step: Any, wait: Wait) -> None:
        """Create (or find) the child run inside the commit that records this step waiting."""
        calls.child_start(run=run, step=step, payload=wait.payload)
