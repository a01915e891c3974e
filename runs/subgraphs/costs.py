"""A run's totals with its child runs' rolled up (graphs that call graphs), read when asked.

Each run keeps its own spend (``Run.cost_usd`` and tokens: the sums of its own steps'
attempts), so reports that group attempts by graph, model or day count every child's
spend once, under the child's graph. A parent's totals add its descendants' at read
time: one query per level of nesting.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from runs.models import Run
from runs.subgraphs.calls import max_depth


def descendants(run: Run) -> list[dict[str, Any]]:
    """Every run called from ``run``, directly or through its children, oldest first:
    ``{run_id, parent_run_id, step_id, node_id, status, graph_id, graph_name, version,
    cost_usd (Decimal), input_tokens, output_tokens, depth}`` (depth 1 for a child)."""
    found: list[dict[str, Any]] = []
    level, depth = [run.pk], 0
    while level and depth < max_depth() + 1:
        depth += 1
        rows = (
            Run.objects.filter(parent_step__run_id__in=level)
            .order_by("id")
            .values(
                "id", "parent_step_id", "parent_step__run_id", "parent_step__node_id", "status", "cost_usd",
                "input_tokens", "output_tokens", "graph_version__graph_id", "graph_version__graph__name", "graph_version__number",
            )
        )  # fmt: skip
        level = []
        for row in rows:
            level.append(row["id"])
            found.append({
                "run_id": row["id"], "parent_run_id": row["parent_step__run_id"], "step_id": row["parent_step_id"],
                "node_id": row["parent_step__node_id"], "status": row["status"], "graph_id": row["graph_version__graph_id"],
                "graph_name": row["graph_version__graph__name"], "version": row["graph_version__number"],
                "cost_usd": row["cost_usd"], "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"], "depth": depth,
            })  # fmt: skip
    return found


def run_totals(run: Run) -> dict[str, Any]:
    """``run``'s spend with its descendants': ``{cost_usd (Decimal), input_tokens,
    output_tokens, children: descendants(run)}``; equal to the run's own with no child."""
    children = descendants(run)
    return {
        "cost_usd": run.cost_usd + sum((c["cost_usd"] for c in children), Decimal(0)),
        "input_tokens": run.input_tokens + sum(c["input_tokens"] for c in children),
        "output_tokens": run.output_tokens + sum(c["output_tokens"] for c in children),
        "children": children,
    }
