"""Small builders for graph specs in tests, and running them in-process."""
from __future__ import annotations

from typing import Any

from builder.services import graph_import
from graphs.models import GraphVersion
from runs.engine import api as engine
from runs.models import Run
from runs.services import run_start

_counter = 0


def node(node_id: str, kind: str, **fields: Any) -> dict[str, Any]:
    """A node dict; ``config`` and engine fields (retry, timeout_seconds, ...) by keyword."""
    out: dict[str, Any] = {"id": node_id, "kind": kind, "config": fields.pop("config", {})}
    out.update(fields)
    return out


def edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    return {"source": source, "target": target, "source_handle": handle}


def graph(nodes: list[dict], edges: list[dict], **extra: Any) -> dict[str, Any]:
    """A spec with a unique name (graph names are unique)."""
    global _counter
    _counter += 1
    spec = {"name": extra.pop("name", f"test-graph-{_counter}"), "nodes": nodes, "edges": edges}
    spec.update(extra)
    return spec


def chain(*ids: str) -> list[dict[str, Any]]:
    """Edges a->b->c for consecutive ids."""
    return [edge(a, b) for a, b in zip(ids, ids[1:], strict=False)]


def transform(node_id: str, **assignments: str) -> dict[str, Any]:
    return node(node_id, "transform", config={"set": assignments})


def effect(node_id: str, label: str | None = None, *, sleep: float = 0.0, unsafe: bool = False, **fields: Any) -> dict[str, Any]:
    tool_name = "record_effect_unsafe" if unsafe else "record_effect"
    return node(node_id, "tool", config={"tool": tool_name, "args": {"label": label or node_id, "sleep": sleep}}, **fields)


def publish(spec: dict[str, Any]) -> GraphVersion:
    return graph_import(spec=spec).version


def run_local(version_or_spec: Any, run_input: dict | None = None, *, timeout: float = 60, **kwargs: Any) -> Run:
    """Start a run and drive it in this process until it ends or waits."""
    version = version_or_spec if isinstance(version_or_spec, GraphVersion) else publish(version_or_spec)
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input=run_input or {}, **kwargs)
        engine.drive_local(run.pk, queue=queue, timeout=timeout)
    run.refresh_from_db()
    return run


def continue_local(run: Run, step_ids: list[int] | None = None, *, timeout: float = 60) -> Run:
    """Drive an existing run in this process (after an approval, a recovery)."""
    with engine.local_mode() as queue:
        queue.extend(step_ids or [])
        engine.drive_local(run.pk, queue=queue, timeout=timeout)
    run.refresh_from_db()
    return run
