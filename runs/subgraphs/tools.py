"""Published graphs as an agent's tools (``AgentConfig.graph_tools``): each call a durable child run, as a subgraph step's.

The agent node (runs.nodes.agent) offers each graph tool to the model with the version's
input schema as its parameters. A call by the model is a tool-call child step of the
agent's step: it resolves the version ("latest": the newest published one now, pinned for
this call), checks the model's arguments against that version's input schema (an invalid
call fails the child step with ``subgraph_input``, which the model is told, and creates
nothing), and returns a Wait. The engine commits the child step waiting and, in that same
transaction, :meth:`GraphToolCalls.start` creates the child run (runs.subgraphs.calls.
child_start: one child per child step, found again by its unique key after a resume).
The child's end hands its output back to the waiting child step as the tool's result
(runs.subgraphs.calls.fire_next), or fails it with the child's error, which the model
sees as an error result, as for any tool that fails; the agent then replays.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runs.nodes.base import NodeContext, NodeResult, Wait
from runs.nodes.graph_tools import GraphTool, register_graph_calls
from runs.providers.base import ToolDefinition
from runs.subgraphs import calls
from runs.vocabulary import NodeError

# The Wait reason of a tool-call child step waiting for its child run (the subgraph node's).
WAIT_REASON = "subgraph"


class GraphToolCalls:
    """The agent node's :class:`runs.nodes.agent.GraphCalls`, registered by runs.wiring."""

    def definition(self, tool: GraphTool) -> ToolDefinition:
        """``tool`` as the model is shown it: its name, its description (else the graph's,
        else a sentence naming it) and the input schema of the version a call would run
        now. Raises NodeError ``subgraph_missing`` (not retryable)."""
        version = calls.published_version(tool.graph, tool.version)
        if version is None:
            what = "a published version" if tool.version == "latest" else f"a published version {tool.version}"
            raise NodeError(f"graph tool {tool.name!r}: graph {tool.graph} has no {what}", code="subgraph_missing", retryable=False)
        description = tool.description or version.graph.description or f"Runs the graph {version.graph.name!r} and returns its output."
        schema = version.spec.get("input_schema") or {"type": "object", "properties": {}}
        return ToolDefinition(name=tool.name, description=description, parameters=schema)

    def call(self, tool: GraphTool, arguments: Mapping[str, Any], ctx: NodeContext) -> NodeResult:
        """Resolve and check the call (reads only: nothing is pinned or created until the
        waiting child step commits) and wait. Raises NodeError, none retryable:
        ``subgraph_missing``, ``subgraph_forbidden``, ``subgraph_too_deep``,
        ``subgraph_input`` (``details.fields``), as the subgraph node."""
        target = calls.target_resolve(graph_id=tool.graph, version=tool.version, run_id=ctx.run_id)
        child_input = dict(arguments)
        calls.input_check(target, child_input)
        payload = {**target.as_dict(), "input": child_input}
        output = {"graph": target.graph_id, "graph_name": target.graph_name, "version": target.number}
        return NodeResult(output=output, wait=Wait(WAIT_REASON, payload))

    def start(self, *, run: Any, step: Any, wait: Wait) -> None:
        """Create (or find) the child run of the waiting tool-call step, in its commit."""
        calls.child_start(run=run, step=step, payload=wait.payload)


def register() -> None:
    """Give the agent node its graph tools (runs.wiring, once per process)."""
    register_graph_calls(GraphToolCalls())
