"""Specs and helpers for graphs that call graphs (runs.subgraphs): a child graph, a caller, the child run of a step."""

from __future__ import annotations

from typing import Any

from runs.models import Run, RunStatus
from tests.support.specs import chain, edge, graph, node, publish, run_local, transform

N_INPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def child_spec(*, factor: int = 2, **extra: Any) -> dict[str, Any]:
    """start -> double (doubled = n * factor) -> end returning ``{"doubled"}``; input ``{n: integer}`` required."""
    extra.setdefault("input_schema", N_INPUT)
    return graph(
        [
            node("start", "start"),
            transform("double", doubled=f"n * {factor}"),
            node("end", "end", config={"output": ["doubled"]}),
        ],
        chain("start", "double", "end"),
        **extra,
    )


def call_spec(
    graph_id: int, *, version: int | str = "latest", input: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """start -> call (subgraph of ``graph_id``, output to ``result``) -> after (``after`` =
    result.doubled + 1 when there is one) -> end; input ``{x: integer}`` unless given."""
    extra.setdefault("input_schema", {"type": "object", "properties": {"x": {"type": "integer"}}})
    config = {"graph": graph_id, "version": version, "input": input or {}, "output_key": "result"}
    return graph(
        [
            node("start", "start"),
            node("call", "subgraph", config=config),
            transform("after", after="result['doubled'] + 1 if 'doubled' in result else 0"),
            node("end", "end"),
        ],
        chain("start", "call", "after", "end"),
        **extra,
    )


def gate_spec(**extra: Any) -> dict[str, Any]:
    """A child that waits at an approval gate: start -> review -> end; input ``{n}``."""
    return graph(
        [node("start", "start"), node("review", "approval", config={"prompt": "ok {{ n }}?"}), node("end", "end")],
        chain("start", "review") + [edge("review", "end", "approved")],
        input_schema=N_INPUT,
        **extra,
    )


def child_of(run: Run, node_id: str) -> Run:
    """The child run of ``run``'s step ``node_id`` (exactly one, or this raises)."""
    return Run.objects.get(parent_step__run=run, parent_step__node_id=node_id)


def waiting_child(**run_kwargs: Any) -> tuple[Run, Run]:
    """A parent run waiting at its ``call`` step for a child waiting at an approval gate."""
    child = publish(gate_spec())
    run = run_local(call_spec(child.graph_id, input={"n": "{{ input.x }}"}), {"x": 3}, **run_kwargs)
    kid = child_of(run, "call")
    assert kid.status == RunStatus.WAITING, (kid.status, kid.error, run.error)
    return run, kid


def tool_agent_spec(
    graph_tools: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    *,
    answer: str = "done",
    tools: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """start -> agent (mock model: turn 0 asks for ``calls`` ``{"name", "arguments", "id"?}``,
    turn 1 answers ``answer``; ``graph_tools`` offered, ``tools`` too when given) -> end
    returning ``{"answer"}``; input ``{x: integer}``."""
    script = [{"turn": 0, "reply": "", "tool_calls": calls}, {"reply": answer}]
    config = {
        "provider": "mock", "model": "mock-1", "prompt": "Work on {{ input.x }}", "max_tokens": 50,
        "tools": tools or [], "graph_tools": graph_tools, "max_turns": 3, "options": {"script": script},
    }  # fmt: skip
    extra.setdefault("input_schema", {"type": "object", "properties": {"x": {"type": "integer"}}})
    return graph(
        [
            node("start", "start"),
            node("agent", "agent", config=config),
            node("end", "end", config={"output": ["answer"]}),
        ],
        chain("start", "agent", "end"),
        **extra,
    )


def tool_children(run: Run) -> list[Run]:
    """The child runs ``run``'s agent started through graph tools, oldest first."""
    return list(Run.objects.filter(parent_step__run=run, parent_step__parent__isnull=False).order_by("id"))


def graph_tool_agent_spec() -> dict[str, Any]:
    """start -> agent (the mock asks for ``doubler`` with ``{n: 21}``, then answers) -> end."""
    script = [
        {"turn": 0, "reply": "", "tool_calls": [{"id": "c1", "name": "doubler", "arguments": {"n": 21}}]},
        {"reply": "It is 42."},
    ]
    config = {
        "provider": "mock",
        "model": "mock-1",
        "prompt": "Double 21",
        "max_tokens": 50,
        "tools": [],
        "options": {"script": script},
    }
    return {
        "name": "agent-with-graph-tool",
        "nodes": [
            {"id": "start", "kind": "start", "position": {"x": 0, "y": 100}},
            {"id": "agent", "kind": "agent", "position": {"x": 250, "y": 100}, "config": config},
            {"id": "end", "kind": "end", "position": {"x": 550, "y": 100}, "config": {"output": ["answer"]}},
        ],
        "edges": [{"source": "start", "target": "agent"}, {"source": "agent", "target": "end"}],
    }
