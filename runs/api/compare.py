"""Two runs of one graph side by side: per node, status, output, cost and duration; their states key by key (reads only)."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from runs.engine.api import compiled_graph
from runs.models import Run, Step


def _seconds(step: Step) -> float | None:
    if step.started_at is None or step.finished_at is None:
        return None
    return round((step.finished_at - step.started_at).total_seconds(), 3)


def _node_rows(run: Run) -> dict[str, dict[str, Any]]:
    """Per node id of ``run``: its top-level steps summed up (the last iteration's status
    and output; cost and duration over every iteration, a child step's cost counted with
    its parent's node). One query."""
    steps = list(Step.objects.filter(run=run).order_by("id"))
    by_id = {s.pk: s for s in steps}
    rows: dict[str, dict[str, Any]] = {}
    cost: dict[str, Decimal] = {}
    priced: dict[str, bool] = {}
    for s in steps:
        top = s if s.parent_id is None else by_id.get(s.parent_id, s)
        node = top.node_id
        if s.cost_usd is not None:
            cost[node] = cost.get(node, Decimal(0)) + s.cost_usd
            priced[node] = True
        if s.parent_id is not None:
            continue
        row = rows.setdefault(node, {"steps": 0, "attempts": 0, "seconds": None})
        row["steps"] += 1
        row["attempts"] += s.attempt
        row.update(step=s.pk, status=s.status, output=s.output, updates=s.updates, error=s.error)
        took = _seconds(s)
        if took is not None:
            row["seconds"] = round((row["seconds"] or 0) + took, 3)
    for node, row in rows.items():
        row["cost_usd"] = str(cost[node]) if priced.get(node) else None
    return rows


def _run_summary(run: Run) -> dict[str, Any]:
    took = (run.finished_at - run.started_at).total_seconds() if run.started_at and run.finished_at else None
    return {
        "id": run.pk,
        "status": run.status,
        "version": run.graph_version.number,
        "is_test": run.is_test,  # a node test from the builder: version 0 is its hidden snapshot, no published version
        "cost_usd": str(run.cost_usd),
        "seconds": None if took is None else round(took, 3),
        "created_at": run.created_at,
        "created_by": run.created_by.get_username() if run.created_by is not None else None,  # no query when null
        "forked_from": run.forked_from_id,
        "error": run.error,
    }


def state_diff(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Key-level difference of two states, sorted by key: ``{"key", "change" (same,
    changed, only_a, only_b), "a", "b"}`` (a missing side's value is None)."""
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in b:
            change = "only_a"
        elif key not in a:
            change = "only_b"
        else:
            change = "same" if a[key] == b[key] else "changed"
        out.append({"key": key, "change": change, "a": a.get(key), "b": b.get(key)})
    return out


def run_compare(*, a: Run, b: Run) -> dict[str, Any]:
    """Runs ``a`` and ``b`` (the caller checked they are of one graph and readable) side
    by side: ``runs`` (``a``, ``b`` summaries), ``nodes`` (every node of either version,
    in ``a``'s spec order then ``b``'s extra ones: ``{"node_id", "kind", "a", "b",
    "same_output"}``, a side None when that run has no step of it; a side holds
    ``status``, ``output``, ``updates``, ``error``, ``cost_usd`` (None: unknown),
    ``seconds``, ``steps``, ``attempts``), and ``state`` (:func:`state_diff` of their
    current states) with ``state_differs`` (the changed keys)."""
    rows = {"a": _node_rows(a), "b": _node_rows(b)}
    order: dict[str, str] = {}
    for run in (a, b):
        for node in compiled_graph(run.graph_version_id).spec.nodes:
            order.setdefault(node.id, node.kind)
    for side in rows.values():  # a step of a node neither spec declares (should not happen) still shows
        for node_id in side:
            order.setdefault(node_id, "")
    nodes = []
    for node_id, kind in order.items():
        left, right = rows["a"].get(node_id), rows["b"].get(node_id)
        same = left is not None and right is not None and left["output"] == right["output"] and left["updates"] == right["updates"]
        nodes.append({"node_id": node_id, "kind": kind, "a": left, "b": right, "same_output": same})
    diff = state_diff(a.state, b.state)
    return {
        "graph": a.graph_version.graph_id,
        "graph_name": a.graph_version.graph.name,
        "runs": {"a": _run_summary(a), "b": _run_summary(b)},
        "nodes": nodes,
        "state": diff,
        "state_differs": [d["key"] for d in diff if d["change"] != "same"],
    }
