"""Pre-run cost estimate of a graph: each node's worst case and the costliest path (pure: no database).

Shared by ``manage.py validate_graph --estimate`` and the API's validation response.
"""
from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

from graphs.spec import GraphSpec
from graphs.topology import Topology
from runs.nodes import UnknownNodeKind, get_kind
from runs.nodes.base import NodeConfig

log = logging.getLogger("ballast.builder")


def _node_cost(
    kind_name: str, raw_config: dict[str, Any], config: NodeConfig | None, state: dict[str, Any]
) -> tuple[Decimal | None, int] | None:
    """(USD or None, tokens) of one execution, or None when the node cannot be estimated
    (unknown kind or invalid config)."""
    try:
        kind = get_kind(kind_name)
    except UnknownNodeKind:
        return None
    if config is None:
        try:
            config = kind.config_model.model_validate(raw_config)
        except ValueError:  # pydantic's ValidationError is a ValueError
            return None
    try:
        return kind.estimate_cost(config, state)
    except Exception:  # noqa: BLE001 - an estimate must never break validation of a draft
        log.exception("estimate_cost of a %s node failed", kind_name)
        return None


def node_costs(spec: GraphSpec, configs: dict[str, NodeConfig] | None = None, state: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each node's worst-case cost of one execution with ``state`` (default empty, so
    prompts count as their template source): ``[{"node_id", "kind", "model", "tokens",
    "usd" (str, or None when unknown)}]`` in the spec's order (one per node id). A node whose kind or config
    is invalid counts as unknown (``usd`` None, ``tokens`` 0)."""
    configs = configs or {}
    nodes: list[dict[str, Any]] = []
    for node in Topology(spec).nodes.values():
        found = _node_cost(node.kind, node.config, configs.get(node.id), state or {})
        usd, tokens = found if found is not None else (None, 0)
        nodes.append(
            {
                "node_id": node.id,
                "kind": node.kind,
                "model": node.config.get("model") if node.kind in ("llm", "agent") else None,
                "tokens": tokens,
                "usd": None if usd is None else str(usd),
            }
        )
    return nodes


def estimate_spec(spec: GraphSpec, configs: dict[str, NodeConfig] | None = None) -> dict[str, Any]:
    """Pre-run worst-case cost of a graph: each node's ``estimate_cost`` (an empty state,
    so prompts count as their template source) and the costliest path from the start to
    an end.

    ``configs``: already parsed node configs by node id (``ValidationResult.configs``);
    the others are parsed here. The graph need not be valid: a node whose kind or config
    is invalid counts as unknown (``usd`` None, ``tokens`` 0, listed in ``unpriced``), and
    without a start node the path is empty.

    Returns ``{"nodes": [{"node_id", "kind", "model", "tokens", "usd" (str|None)}],
    "costliest_path": {"nodes", "tokens", "usd" (str), "unpriced", "loops"}}``. The path is
    chosen by USD (ties and unknown prices by tokens); a cycle (a bounded loop) counts
    each of its nodes ``max(max_iterations) + 1`` times, an upper bound.
    """
    topology = Topology(spec)
    nodes = node_costs(spec, configs)
    empty = {"nodes": [], "tokens": 0, "usd": "0", "unpriced": [], "loops": []}
    if not topology.start_ids:
        return {"nodes": nodes, "costliest_path": empty}
    return {"nodes": nodes, "costliest_path": costliest_path(topology, nodes, topology.start_ids[0])}


def _walk_order(topology: Topology, cycle: list[str]) -> list[str]:
    """The members of one loop (``Topology.cycles`` gives them sorted by id) in the order a
    run walks them: from the member entered from outside the loop, then along its edges
    (depth first, spec order), so the costliest path reads start, lookup, count, found."""
    inside = set(cycle)
    entered = {t for n in topology.nodes if n not in inside for t in topology.successors(n) if t in inside}
    entry = next((n for n in cycle if n in entered), cycle[0])
    order: list[str] = []
    seen: set[str] = set()
    stack = [entry]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        order.append(n)
        stack.extend(reversed([t for t in topology.successors(n) if t in inside and t not in seen]))
    return order + [n for n in cycle if n not in seen]


def costliest_path(topology: Topology, nodes: list[dict[str, Any]], start_id: str) -> dict[str, Any]:
    """The costliest path from node ``start_id`` to an end, from per-node costs ``nodes``
    (:func:`node_costs`): ``{"nodes", "tokens", "usd" (str), "unpriced", "loops"}``, as
    :func:`estimate_spec` describes it (also the tail of a run that goes on from a step:
    a resume, a retry, a fork)."""
    cost: dict[str, tuple[Decimal | None, int]] = {
        n["node_id"]: (None if n["usd"] is None else Decimal(n["usd"]), n["tokens"]) for n in nodes
    }
    for node_id in topology.nodes:
        cost.setdefault(node_id, (None, 0))

    # Condense cycles (bounded loops) into one vertex each; the rest is a DAG.
    component = {node_id: node_id for node_id in topology.nodes}
    members: dict[str, list[str]] = {node_id: [node_id] for node_id in topology.nodes}
    repeat: dict[str, int] = {node_id: 1 for node_id in topology.nodes}
    for cycle in topology.cycles:
        head = cycle[0]
        bound = max((topology.nodes[n].max_iterations or 1) for n in cycle) + 1
        for n in cycle:
            component[n] = head
            members.pop(n, None)
        members[head], repeat[head] = _walk_order(topology, cycle), bound

    def weight(comp: str) -> tuple[Decimal, int, list[str]]:
        usd, tokens, unpriced = Decimal(0), 0, []
        for n in members[comp]:
            n_usd, n_tokens = cost[n]
            tokens += n_tokens * repeat[comp]
            if n_usd is None:
                unpriced.append(n)
            else:
                usd += n_usd * repeat[comp]
        return usd, tokens, unpriced

    ends = {component[e] for e in topology.end_ids}

    def successors(comp: str) -> list[str]:
        return sorted({component[t] for n in members[comp] for t in topology.successors(n)} - {comp})

    # The costliest tail from each component, computed children first with an explicit
    # stack: a recursion would overflow on a long chain (a 300-node chain is 300 frames).
    best: dict[str, tuple[Decimal, int, tuple[str, ...], tuple[str, ...]] | None] = {}
    ancestors: set[str] = set()
    start = component[start_id]
    stack: list[tuple[str, bool]] = [(start, False)]
    while stack:
        comp, children_done = stack.pop()
        if comp in best or (not children_done and comp in ancestors):
            continue
        if not children_done:
            ancestors.add(comp)
            stack.append((comp, True))
            stack.extend((s, False) for s in reversed(successors(comp)) if s not in best and s not in ancestors)
            continue
        ancestors.discard(comp)
        usd, tokens, unpriced = weight(comp)
        options = [b for b in (best.get(s) for s in successors(comp)) if b is not None]
        if not options:
            best[comp] = (usd, tokens, (comp,), tuple(unpriced)) if comp in ends else None
            continue
        tail = max(options, key=lambda b: (b[0], b[1]))
        best[comp] = (usd + tail[0], tokens + tail[1], (comp, *tail[2]), tuple(unpriced) + tail[3])

    found = best.get(start) or (Decimal(0), 0, (start,), ())
    path_nodes = [n for comp in found[2] for n in members[comp]]
    loops = [f"{'+'.join(members[c])} x{repeat[c]}" for c in found[2] if repeat[c] > 1]
    return {"nodes": path_nodes, "tokens": found[1], "usd": str(found[0]), "unpriced": list(found[3]), "loops": loops}




def estimate_by_node(report: dict[str, Any]) -> dict[str, Any]:
    """:func:`estimate_spec`'s report keyed by node id, as the API answers it:
    ``{"nodes": {node_id: {"usd", "tokens", "kind", "model"}}, "costliest_path": {...}}``."""
    return {
        "nodes": {
            n["node_id"]: {"usd": n["usd"], "tokens": n["tokens"], "kind": n["kind"], "model": n["model"]}
            for n in report["nodes"]
        },
        "costliest_path": report["costliest_path"],
    }
