"""Validation of a graph's calls to other graphs (subgraph nodes and agents' graph tools) against the database: the callee exists and is published, the user may run it, its required inputs are given, and no call leads back to the caller.

validate_spec is pure (no database, no user); these checks join it wherever a spec is about
to become runnable: publish, import, the draft run and the builder's validate API. A graph
is refused when one of its calls reaches it again through the published versions those
calls run (``"latest"``: the newest published version), directly or through others: the
issue names the cycle. A cycle can still only form through two publishes racing; the run
time bound on nesting (BALLAST_SUBGRAPH_MAX_DEPTH) stops such a loop.
"""
from __future__ import annotations

from typing import Any

from accounts.policy import can_operate_graph
from builder.issues import LocatedIssue
from graphs.models import Graph, GraphVersion
from graphs.spec import GraphSpec

KIND = "subgraph"
AGENT_KIND = "agent"  # an agent's graph_tools call graphs too (runs.subgraphs.tools)
# How many graph versions the cycle search reads at most (a bound on a pathological web of calls).
MAX_VERSIONS_READ = 500


def _calls(spec: dict[str, Any] | GraphSpec) -> list[tuple[str, int, Any, int, str]]:
    """(node id, graph id, version, node index, field) of each call of a graph the spec
    makes: a subgraph node (field ``config.graph``) or an agent's graph tool (field
    ``config.graph_tools[<i>].graph``), wherever the config names a graph."""
    nodes = spec.nodes if isinstance(spec, GraphSpec) else spec.get("nodes", [])
    found = []
    for index, n in enumerate(nodes):
        kind, config, node_id = (n.kind, n.config, n.id) if not isinstance(n, dict) else (n.get("kind"), n.get("config") or {}, n.get("id"))
        if kind == KIND and isinstance(config.get("graph"), int):
            found.append((str(node_id), config["graph"], config.get("version", "latest"), index, "config.graph"))
        elif kind == AGENT_KIND and isinstance(config.get("graph_tools"), list):
            for i, tool in enumerate(config["graph_tools"]):
                if isinstance(tool, dict) and isinstance(tool.get("graph"), int):
                    found.append((str(node_id), tool["graph"], tool.get("version", "latest"), index, f"config.graph_tools[{i}].graph"))
    return found


def _version(graph_id: int, version: Any) -> GraphVersion | None:
    qs = GraphVersion.objects.filter(graph_id=graph_id, is_test=False)
    if version == "latest" or version is None:
        return qs.order_by("-number").first()
    return qs.filter(number=version).first() if isinstance(version, int) else None


def _cycle(start: GraphVersion, caller_id: int) -> list[int] | None:
    """The graph ids of a path of calls from ``start`` back to ``caller_id`` (``start``'s
    graph first, ``caller_id`` last), or None when none leads back."""
    stack: list[tuple[GraphVersion, list[int]]] = [(start, [start.graph_id])]
    seen: set[int] = set()
    while stack and len(seen) < MAX_VERSIONS_READ:
        version, path = stack.pop()
        if version.pk in seen:
            continue
        seen.add(version.pk)
        for _, graph_id, number, _, _ in _calls(version.spec):
            if graph_id == caller_id:
                return path + [caller_id]
            target = _version(graph_id, number)
            if target is not None and target.pk not in seen:
                stack.append((target, path + [graph_id]))
    return None


def call_issues(spec: GraphSpec, *, graph_id: int | None, user: Any = None) -> list[LocatedIssue]:
    """The issues of ``spec``'s subgraph nodes and agents' graph tools (``graph_id``: the graph the spec is a draft
    or version of, None for a graph not saved yet; ``user``: who publishes or runs it, None
    for the system): ``subgraph_missing`` (no such graph), ``subgraph_unpublished`` (no
    published version, or not that number), ``subgraph_forbidden`` (``user`` may not run
    it), ``subgraph_cycle`` (a call leads back to this graph: the message names the
    path, ``a -> b -> a``), ``subgraph_input`` (a required input of the callee is not
    given; subgraph nodes only: a graph tool's input is the model's). Each on
    ``config.graph`` (``config.input`` for inputs) of its node, or on
    ``config.graph_tools[<i>].graph`` of an agent."""
    issues: list[LocatedIssue] = []
    if graph_id is None:
        graph_id = Graph.objects.filter(name=spec.name).values_list("pk", flat=True).first()
    for node_id, target_id, number, index, graph_field in _calls(spec):
        where = f"nodes[{index}].{graph_field}"

        def issue(message: str, code: str, field: str = graph_field, path: str = where, node_id: str = node_id) -> LocatedIssue:
            return LocatedIssue(node_id, field, message, code, path)

        if target_id == graph_id:
            issues.append(issue(f"calls its own graph: {spec.name} -> {spec.name}", "subgraph_cycle"))
            continue
        target_graph = Graph.objects.filter(pk=target_id).first()
        if target_graph is None:
            issues.append(issue(f"graph {target_id} does not exist", "subgraph_missing"))
            continue
        version = _version(target_id, number)
        if version is None:
            what = "no published version" if number in ("latest", None) else f"no published version {number}"
            issues.append(issue(f"graph {target_graph.name!r} has {what}: publish it first", "subgraph_unpublished"))
            continue
        if user is not None and not can_operate_graph(user, target_graph):
            issues.append(issue(f"you may not run graph {target_graph.name!r}", "subgraph_forbidden"))
            continue
        if graph_id is not None:
            path = _cycle(version, graph_id)
            if path is not None:
                names = dict(Graph.objects.filter(pk__in=path).values_list("pk", "name"))
                issues.append(issue(f"calls itself through other graphs: {' -> '.join([spec.name] + [names.get(g, str(g)) for g in path])}", "subgraph_cycle"))
                continue
        if graph_field != "config.graph":
            continue  # a graph tool's input is the model's, checked at each call
        given = set(next((n.config.get("input") or {} for n in spec.nodes if n.id == node_id), {}))
        required = (version.spec.get("input_schema") or {}).get("required") or []
        missing = [name for name in required if isinstance(name, str) and name not in given]
        if missing:
            issues.append(issue(
                f"graph {target_graph.name!r} v{version.number} needs input {', '.join(missing)}", "subgraph_input",
                "config.input", f"nodes[{index}].config.input",
            ))  # fmt: skip
    return issues
