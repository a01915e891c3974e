"""Graph reads: lists, a graph and its versions, the diff of two versions (pure), and the builder's catalogues (node kinds, tools, models)."""
from __future__ import annotations

from typing import Any

from django.db.models import Count, IntegerField, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from builder.graph_checks import kind_handles
from graphs.models import Graph, GraphVersion
from runs.models import Run
from runs.nodes import all_kinds
from runs.providers import get_provider, provider_names
from runs.tools import all_tools
from runs.tools.mcp_servers import all_mcp_tools


def graph_list(*, search: str | None = None) -> QuerySet[Graph]:
    """Graphs by name, with ``latest_number`` (None before the first publish) and
    ``run_count`` (runs pinned to any of its versions, node test runs included: a graph
    with runs cannot be deleted, and the list says so before anyone tries)."""
    runs = (
        Run.objects.filter(graph_version__graph=OuterRef("pk"))
        .order_by()
        .values("graph_version__graph")
        .annotate(n=Count("pk"))
        .values("n")
    )
    qs = (
        Graph.objects.select_related("created_by", "draft_updated_by")
        .annotate(
            latest_number=Max("versions__number", filter=Q(versions__is_test=False)),
            run_count=Coalesce(Subquery(runs, output_field=IntegerField()), 0),
        )
        .order_by("name")
    )
    if search:
        qs = qs.filter(name__icontains=search)
    return qs


def graph_get(*, graph_id: int) -> Graph:
    """One graph with ``latest_number``, its approvers and operators. Raises Graph.DoesNotExist."""
    return graph_list().prefetch_related("approvers", "operators", "operator_groups").get(pk=graph_id)


def graph_version_list(*, graph: Graph) -> QuerySet[GraphVersion]:
    """Published versions of ``graph``, newest first (test snapshots left out)."""
    return GraphVersion.objects.filter(graph=graph, is_test=False).select_related("created_by", "graph").order_by("-number")


def graph_version_get(*, graph: Graph, number: int) -> GraphVersion:
    """Version ``number`` of ``graph``. Raises GraphVersion.DoesNotExist."""
    return graph_version_list(graph=graph).get(number=number)


def _edge_key(edge: dict[str, Any]) -> tuple[str, str, str, str]:
    return (edge.get("source") or "", edge.get("source_handle") or "", edge.get("target") or "", edge.get("target_handle") or "")


def _changed(old: dict[str, Any], new: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: {"from": old.get(k), "to": new.get(k)} for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}


# Node fields that are layout (where the node sits), not logic: a diff lists them apart.
LAYOUT_NODE_FIELDS = ("position",)


def _by_id(items: Any) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in items or [] if isinstance(n, dict) and "id" in n}


def spec_diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What changed from spec ``old`` to spec ``new`` (both JSON dicts of GraphSpec).

    Returns ``{"nodes": {"added": [ids], "removed": [ids], "changed": [{"id", "fields":
    {name: {"from", "to"}}}]}, "edges": {"added": [edge], "removed": [edge]},
    "settings": {name: {"from", "to"}}, "state": {...}, "input_schema": {"from", "to"} | None,
    "description": {...} | None, "layout": {"positions": [ids of nodes that moved],
    "notes": {"added": [ids], "removed": [ids], "changed": [{"id", "fields"}]}},
    "logic_identical": bool, "identical": bool}``.

    Layout (node positions, sticky notes) is listed under ``layout`` only: a node that
    just moved is not in ``nodes.changed``, and ``logic_identical`` ignores layout (what
    a run would do is the same). Edges are identified by (source, source_handle, target,
    target_handle); node fields compare whole values.
    """
    old_nodes, new_nodes = _by_id(old.get("nodes")), _by_id(new.get("nodes"))
    changed, moved = [], []
    for nid in sorted(set(old_nodes) & set(new_nodes)):
        fields = _changed(old_nodes[nid], new_nodes[nid])
        if any(f in fields for f in LAYOUT_NODE_FIELDS):
            moved.append(nid)
        logic = {k: v for k, v in fields.items() if k not in LAYOUT_NODE_FIELDS}
        if logic:
            changed.append({"id": nid, "fields": logic})
    old_edges = {_edge_key(e): e for e in old.get("edges") or [] if isinstance(e, dict)}
    new_edges = {_edge_key(e): e for e in new.get("edges") or [] if isinstance(e, dict)}
    old_notes, new_notes = _by_id(old.get("notes")), _by_id(new.get("notes"))
    out: dict[str, Any] = {
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
        "layout": {
            "positions": moved,
            "notes": {
                "added": sorted(set(new_notes) - set(old_notes)),
                "removed": sorted(set(old_notes) - set(new_notes)),
                "changed": [
                    {"id": nid, "fields": _changed(old_notes[nid], new_notes[nid])}
                    for nid in sorted(set(old_notes) & set(new_notes))
                    if old_notes[nid] != new_notes[nid]
                ],
            },
        },
    }
    out["logic_identical"] = not (
        any(out["nodes"].values()) or any(out["edges"].values()) or out["settings"] or out["state"]
        or out["input_schema"] or out["description"]
    )
    out["identical"] = old == new
    return out


def graph_version_diff(*, old: GraphVersion, new: GraphVersion) -> dict[str, Any]:
    """:func:`spec_diff` of two versions, with their numbers as ``from`` and ``to``."""
    return {"from": old.number, "to": new.number, **spec_diff(old.spec, new.spec)}


# --------------------------------------------------------------------------- catalogues
# What the builder's palette and forms are made from: read from the registries on every
# call (cheap), so a kind, tool or provider added by a plugin appears without front-end
# changes.

KIND_CATEGORIES = ("ai", "logic", "flow", "tools", "human", "data")


def node_kind_catalogue() -> list[dict[str, Any]]:
    """Every registered node kind, in registry order: ``{"kind", "title", "description",
    "category" (one of KIND_CATEGORIES), "config_schema" (JSON Schema of its pydantic
    config, self-contained: references point into its own ``$defs``), "inputs",
    "outputs" (fixed named output handles; [] for a node with one default output or none),
    "optional_outputs", "default_output" (bool: one unnamed output firing every edge),
    "dynamic_outputs" (bool: the handles depend on the config; the validation response
    gives each node's), "repeat_safe", "uses_repeat_safe" (bool: a node's own
    ``repeat_safe`` field applies; validation refuses it where not), "does_work" (bool: the
    step does something itself, so a timeout, retries and a test run apply; False for
    start, end and join), "can_loop" (bool: it has inputs and outputs, so it can be on a
    loop and take ``max_iterations``)}``. A kind without ``title``/``category`` class
    attributes gets its name and ``logic``."""
    out = []
    for name, kind in all_kinds().items():
        handles = kind_handles(kind)
        category = getattr(kind, "category", "") or "logic"
        out.append(
            {
                "kind": name,
                "title": getattr(kind, "title", "") or name.replace("_", " ").capitalize(),
                "description": kind.description,
                "category": category if category in KIND_CATEGORIES else "logic",
                "config_schema": kind.config_model.model_json_schema(),
                "inputs": [] if name == "start" else ["in"],
                "outputs": list(handles["names"] or []),
                "optional_outputs": list(handles["optional"]),
                "default_output": handles["names"] is None and name != "end",
                "dynamic_outputs": bool(handles["dynamic"]),
                "repeat_safe": bool(kind.repeat_safe),
                "uses_repeat_safe": bool(kind.uses_repeat_safe),
                "does_work": bool(kind.does_work),
                # A start has no way in, an end no way out: neither can be on a loop.
                "can_loop": name not in ("start", "end"),
            }
        )
    return out


def tool_catalogue() -> list[dict[str, Any]]:
    """Every registered tool, by name, then the tools of the enabled MCP servers (their
    stored lists, by server): ``{"name", "description", "args_schema" (JSON Schema of its
    arguments), "repeat_safe", "mcp_server" (None for a registered tool)}``."""
    registered = [
        {"name": t.name, "description": t.description, "args_schema": t.json_schema(), "repeat_safe": t.repeat_safe, "mcp_server": None}
        for t in all_tools().values()
    ]
    mcp = [
        {"name": t.name, "description": t.description, "args_schema": t.json_schema(), "repeat_safe": t.repeat_safe, "mcp_server": t.server}
        for t in all_mcp_tools()
    ]
    return registered + mcp


def _price_library_models(provider_id: str | None) -> list[dict[str, Any]]:
    """Current (not deprecated) models genai-prices knows at ``provider_id``."""
    if not provider_id:
        return []
    from genai_prices import data_snapshot

    for provider in data_snapshot.get_snapshot().providers:
        if provider.id == provider_id:
            return [
                {"id": m.id, "name": m.name or m.id, "priced": True}
                for m in sorted(provider.models, key=lambda m: m.id)
                if not getattr(m, "deprecated", False)
            ]
    return []


def model_catalogue() -> list[dict[str, Any]]:
    """Per registered LLM provider, the models a node form can offer: ``{"provider",
    "models": [{"id", "name", "priced"}], "source": "provider" | "price_library" |
    "none", "accepts_any_model": bool}``. ``source`` "provider": the provider lists its
    models and validation rejects others; "price_library": the models genai-prices
    prices at that provider (others are accepted, priced as unknown); "none": nothing is
    known (an OpenAI-compatible server with its own models), any name is accepted.
    A provider whose settings are broken is listed with ``error``."""
    out = []
    for name in provider_names():
        try:
            provider = get_provider(name)
            listed = provider.models()
        except Exception as exc:  # noqa: BLE001 - a misconfigured provider must not hide the others
            out.append({"provider": name, "models": [], "source": "none", "accepts_any_model": False, "error": str(exc)})
            continue
        if listed is not None:
            models = [{"id": m, "name": m, "priced": bool(provider.price_version(m))} for m in sorted(listed)]
            out.append({"provider": name, "models": models, "source": "provider", "accepts_any_model": False})
            continue
        price_provider = getattr(provider, "price_provider", None)
        models = _price_library_models(price_provider() if callable(price_provider) else None)
        out.append({"provider": name, "models": models, "source": "price_library" if models else "none", "accepts_any_model": True})
    return out
