"""An agent's graph tools: the config of one (``AgentConfig.graph_tools``) and the registry of what calls them (runs.subgraphs.tools, registered by runs.wiring).

Apart from the agent kind so that registering the caller at app start does not import the
agent, its prompt templating and Jinja2 into a worker that runs no agent (a worker's start
is what recovery waits for: tests/runs/engine/test_worker_imports.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, WithJsonSchema

from runs.nodes.base import NodeConfig, NodeContext, NodeResult, Wait
from runs.providers.base import ToolDefinition
from runs.vocabulary import NodeError

__all__ = ["GRAPH_TOOL_NAME_PATTERN", "GraphCalls", "GraphTool", "graph_calls", "register_graph_calls"]


# What the model may call a graph tool: the providers' tool-name alphabet (OpenAI and
# Anthropic both take ^[a-zA-Z0-9_-]{1,64}$).
GRAPH_TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"


class GraphTool(NodeConfig):
    """A published graph offered to the model as a tool (``AgentConfig.graph_tools``).

    - ``graph``: the id of the graph (it must have a published version).
    - ``version``: a published version number, or ``"latest"``: the newest published
      version when the model calls it, pinned for that call (its child run keeps it).
    - ``name``: the tool name the model sees (unique among the agent's tools).
    - ``description``: what the model is told the tool does (default: the graph's
      description, else its name).

    The tool's arguments are the version's input schema; a call is a child run.
    """

    graph: int = Field(ge=1, title="Graph", description="The published graph to offer as a tool.")
    version: Annotated[int | Literal["latest"], WithJsonSchema({"examples": ["latest", 1]})] = Field(
        "latest", title="Version", description="A published version number, or latest: the newest one when the model calls it (then pinned)."
    )
    name: str = Field(pattern=GRAPH_TOOL_NAME_PATTERN, title="Tool name", description="The name the model calls it by.")
    description: str = Field("", max_length=2000, title="Description", description="What the model is told it does (default: the graph's description).")


class GraphCalls(Protocol):
    """What the agent needs to call published graphs: runs.subgraphs.tools provides it
    and runs.wiring registers it (:func:`register_graph_calls`), because creating a run
    is the engine's and node kinds know nothing of the engine."""

    def definition(self, tool: GraphTool) -> ToolDefinition:
        """The tool as the model is shown it (the version's input schema as its
        parameters). Raises NodeError (``subgraph_missing``)."""
        ...

    def call(self, tool: GraphTool, arguments: Mapping[str, Any], ctx: NodeContext) -> NodeResult:
        """Resolve and pin the version, check ``arguments`` against its input schema and
        return a result waiting for the child run (reads only). Raises NodeError."""
        ...

    def start(self, *, run: Any, step: Any, wait: Wait) -> None:
        """Create (or find) the child run of waiting child step ``step``, inside its commit."""
        ...


_graph_calls: list[GraphCalls] = []


def register_graph_calls(calls: GraphCalls) -> None:
    """Give the agent node its way to call graphs (runs.wiring, once per process)."""
    _graph_calls[:] = [calls]


def graph_calls() -> GraphCalls:
    """The registered :class:`GraphCalls`. Raises NodeError ``graph_tools_unavailable``
    when none was (a process that did not load the runs app)."""
    if not _graph_calls:
        raise NodeError("graph tools are not available in this process", code="graph_tools_unavailable", retryable=False)
    return _graph_calls[0]
