"""Graph documents the validation tests break on purpose: a valid baseline and its broken variants."""
from __future__ import annotations

from typing import Any


def baseline() -> dict[str, Any]:
    """start -> calc -> check --true--> big -> done; check --false--> done (an OR-merge of
    exclusive branches). Edge indexes: 0 start>calc, 1 calc>check, 2 check.true>big,
    3 check.false>done, 4 big>done."""
    return graph(
        [
            node("start", "start"),
            transform("calc", total="x + 1"),
            node("check", "condition", expression="total > 10"),
            transform("big", label="'big'"),
            node("done", "end", output=["total", "label"]),
        ],
        [
            edge("start", "calc"),
            edge("calc", "check"),
            edge("check", "big", "true"),
            edge("check", "done", "false"),
            edge("big", "done"),
        ],
    )


def _no_end(g):
    """The baseline's end replaced by a join: no end node."""
    g["nodes"][-1] = node("done", "join")


def _unwired(g):
    """The baseline without its check --false--> done edge."""
    del g["edges"][3]


def _unknown_var_transform(g):
    """The baseline's calc reads a variable nothing writes."""
    g["nodes"][1]["config"]["set"]["total"] = "y + 1"


def node(node_id: str, kind: str, **config: Any) -> dict[str, Any]:
    """A node document: ``{id, kind, config}``."""
    return {"id": node_id, "kind": kind, "config": config}


def transform(node_id: str, **assignments: str) -> dict[str, Any]:
    """A transform node setting each name to its expression."""
    return node(node_id, "transform", set=assignments)


def edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    """An edge document, from ``handle`` of ``source`` when given."""
    data = {"source": source, "target": target}
    if handle is not None:
        data["source_handle"] = handle
    return data


def graph(nodes: list[dict], edges: list[dict], **extra: Any) -> dict[str, Any]:
    """A graph document named "test graph" with a number ``x`` input; ``extra`` fields override."""
    data = {
        "name": "test graph",
        "input_schema": {"type": "object", "properties": {"x": {"type": "number"}}},
        "nodes": nodes,
        "edges": edges,
    }
    data.update(extra)
    return data
