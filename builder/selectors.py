"""Graph reads: lists, a graph and its versions, and the diff of two versions (pure)."""
from __future__ import annotations

from typing import Any

from django.db.models import Max, QuerySet

from builder.models import Graph, GraphVersion


def graph_list(*, search: str | None = None) -> QuerySet[Graph]:
    """Graphs by name, with ``latest_number`` (None before the first publish)."""
    qs = Graph.objects.select_related("created_by").annotate(latest_number=Max("versions__number")).order_by("name")
    if search:
        qs = qs.filter(name__icontains=search)
    return qs


def graph_get(*, graph_id: int) -> Graph:
    """One graph with ``latest_number`` and its approvers. Raises Graph.DoesNotExist."""
    return graph_list().prefetch_related("approvers").get(pk=graph_id)


def graph_version_list(*, graph: Graph) -> QuerySet[GraphVersion]:
    """Versions of ``graph``, newest first."""
    return GraphVersion.objects.filter(graph=graph).select_related("created_by", "graph").order_by("-number")


def graph_version_get(*, graph: Graph, number: int) -> GraphVersion:
    """Version ``number`` of ``graph``. Raises GraphVersion.DoesNotExist."""
    return graph_version_list(graph=graph).get(number=number)


def _edge_key(edge: dict[str, Any]) -> tuple[str, str, str, str]:
    return (edge.get("source") or "", edge.get("source_handle") or "", edge.get("target") or "", edge.get("target_handle") or "")


def _changed(old: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: {"from": old.get(k), "to": new.get(k)} for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


def spec_diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What changed from spec ``old`` to spec ``new`` (both JSON dicts of GraphSpec).

    Returns ``{"nodes": {"added": [ids], "removed": [ids], "changed": [{"id", "fields":
    {name: {"from", "to"}}}]}, "edges": {"added": [edge], "removed": [edge]},
    "settings": {name: {"from", "to"}}, "state": {...}, "input_schema": {"from", "to"} | None,
    "description": {...} | None, "identical": bool}``. Edges are identified by
    (source, source_handle, target, target_handle); node fields compare whole values.
    """
    old_nodes = {n["id"]: n for n in old.get("nodes") or [] if isinstance(n, dict) and "id" in n}
    new_nodes = {n["id"]: n for n in new.get("nodes") or [] if isinstance(n, dict) and "id" in n}
    changed = [
        {"id": nid, "fields": _changed(old_nodes[nid], new_nodes[nid])}
        for nid in sorted(set(old_nodes) & set(new_nodes))
        if old_nodes[nid] != new_nodes[nid]
    ]
    old_edges = {_edge_key(e): e for e in old.get("edges") or [] if isinstance(e, dict)}
    new_edges = {_edge_key(e): e for e in new.get("edges") or [] if isinstance(e, dict)}
    out = {
        "nodes": {
            "added": sorted(set(new_nodes) - set(old_nodes)),
            "removed": sorted(set(old_nodes) - set(new_nodes)),
            "changed": changed,
        },
        "edges": {
            "added": [new_edges[k] for k in sorted(set(new_edges) - set(old_edges))],
            "removed": [old_edges[k] for k in sorted(set(old_edges) - set(new_edges))],
        },
        "settings": _changed(old.get("settings") or {}, new.get("settings") or {}),
        "state": _changed(old.get("state") or {}, new.get("state") or {}),
        "input_schema": None
        if old.get("input_schema") == new.get("input_schema")
        else {"from": old.get("input_schema"), "to": new.get("input_schema")},
        "description": None
        if old.get("description") == new.get("description")
        else {"from": old.get("description"), "to": new.get("description")},
    }
    out["identical"] = old == new
    return out


def graph_version_diff(*, old: GraphVersion, new: GraphVersion) -> dict[str, Any]:
    """:func:`spec_diff` of two versions, with their numbers as ``from`` and ``to``."""
    return {"from": old.number, "to": new.number, **spec_diff(old.spec, new.spec)}
