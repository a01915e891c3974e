"""The benchmark graphs, as specs published through the builder (validated like any graph).

- linear(n): start -> t1 -> ... -> tn -> end; every ``t`` is a transform ``i = i + 1``, so
  a correct run ends with ``i == n`` after n + 2 committed steps.
- fanout(n): start -> b1..bn -> join -> end; every branch writes ``hits = 1`` to a key with
  the ``add`` reducer, so a correct run ends with ``hits == n`` (every branch merged once).
- gate(): start -> draft -> review (approval) -> send -> end (approvals at rest).
"""
from __future__ import annotations

from typing import Any


def _node(node_id: str, kind: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": node_id, "kind": kind, "config": config or {}}


def _edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    return {"source": source, "target": target, "source_handle": handle}


def linear(n: int) -> dict[str, Any]:
    ids = [f"t{k}" for k in range(1, n + 1)]
    nodes = [_node("start", "start")] + [_node(i, "transform", {"set": {"i": "i + 1"}}) for i in ids] + [_node("end", "end", {"output": ["i"]})]
    chain = ["start", *ids, "end"]
    return {
        "name": f"bench-linear-{n}",
        "description": f"Benchmark: {n} no-op transform nodes in a chain.",
        "state": {"i": {"reducer": "replace", "default": 0}},
        "settings": {"max_steps": n + 10},
        "nodes": nodes,
        "edges": [_edge(a, b) for a, b in zip(chain, chain[1:], strict=False)],
    }


def fanout(n: int) -> dict[str, Any]:
    ids = [f"b{k}" for k in range(1, n + 1)]
    nodes = [_node("start", "start")] + [_node(i, "transform", {"set": {"hits": "1"}}) for i in ids]
    nodes += [_node("join", "join"), _node("end", "end", {"output": ["hits"]})]
    edges = [_edge("start", i) for i in ids] + [_edge(i, "join") for i in ids] + [_edge("join", "end")]
    return {
        "name": f"bench-fanout-{n}",
        "description": f"Benchmark: {n} parallel no-op branches and a join.",
        "state": {"hits": {"reducer": "add", "default": 0}},
        "settings": {"max_parallelism": min(n, 256), "max_steps": n + 10},
        "nodes": nodes,
        "edges": edges,
    }


def gate() -> dict[str, Any]:
    nodes = [
        _node("start", "start"),
        _node("draft", "transform", {"set": {"reply": "'Hello ' + name"}}),
        _node("review", "approval", {"prompt": "Send {{ reply }}?"}),
        _node("send", "transform", {"set": {"sent": "True"}}),
        _node("end", "end", {"output": ["reply", "sent"]}),
    ]
    edges = [_edge("start", "draft"), _edge("draft", "review"), _edge("review", "send", "approved"), _edge("send", "end")]
    return {
        "name": "bench-approval-gate",
        "description": "Benchmark: a run that waits at an approval gate.",
        "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
        "nodes": nodes,
        "edges": edges,
    }


def publish(spec: dict[str, Any]):
    """Publish ``spec`` (the same content returns the same version)."""
    from builder.services import graph_import

    return graph_import(spec=spec).version


def state_chain(n: int, blob_bytes: int) -> dict[str, Any]:
    """start -> t1 -> ... -> tn -> end where every ``t`` writes ``i = i + 1`` and the state
    also holds ``blob``, about ``blob_bytes`` of JSON no node writes (a list of small
    objects, as a chat history is): what a node costs as the state it does not touch grows."""
    item = {"id": 0, "text": "x" * 80}
    count = max(1, blob_bytes // (len(str(item)) + 4))
    spec = linear(n)
    spec["name"] = f"bench-state-{n}-{blob_bytes}"
    spec["description"] = f"Benchmark: {n} transform nodes in a chain, with a {blob_bytes}-byte state key no node writes."
    spec["state"] = {"i": {"reducer": "replace", "default": 0}, "blob": {"reducer": "replace", "default": [dict(item, id=k) for k in range(count)]}}
    return spec
