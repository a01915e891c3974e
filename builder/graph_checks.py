"""The graph checks of a parsed spec: node kinds and configs, start and end, edges and
handles, reachability, joins, loops, parallel branches and names (pure: no database).

The codes each check reports are listed in builder.validation's docstring."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations
from typing import Any

from django.conf import settings
from pydantic import ValidationError

from builder.issues import ValidationResult, config_issues, index_of_nodes, located, sorted_issues
from graphs.spec import EdgeSpec, GraphSpec
from graphs.topology import Topology
from runs.nodes import UnknownNodeKind, get_kind
from runs.nodes.base import Issue, NodeConfig, NodeKind
from runs.nodes.shared import INPUT_KEY_PREFIX, INPUT_KEYS_MARK
from runs.sandbox import schemas
from runs.sandbox.expressions import FUNCTION_NAMES

# Names an expression always sees besides state keys: the run input and the functions.
# A node or state key with one of these names would shadow it.
INPUT_NAME = "input"
# Codes the kinds use for "this name is not a known variable" (the llm and tool kinds say
# unknown_name for template names).
UNKNOWN_NAME_CODES = frozenset({"unknown_variable", "unknown_name"})
# Codes a kind's check returns that are warnings (never block a run), not errors.
WARNING_CODES = frozenset({"undeclared_input_key"})


def node_handles(kind_name: Any, raw_config: Any) -> dict[str, Any]:
    """The handles a node of kind ``kind_name`` with config ``raw_config`` (a JSON dict)
    shows on the canvas: ``{"inputs": [names], "outputs": [names], "default_output": bool,
    "optional": [names]}``.

    ``inputs`` is ``["in"]`` (``[]`` for a start node). ``outputs`` are the named source
    handles an edge must name (condition: ``true``/``false``, or each case's handle and
    ``default``; approval: ``approved``/``rejected``), ``[]`` for a plain node, whose one
    unnamed output (``default_output`` true; false for an end node, which has none)
    fires every edge. ``optional`` handles may stay unwired. A config that does not
    parse falls back to the kind's handles for a default config (see
    :func:`kind_handles`); an unknown kind to a plain node. Never raises.
    """
    inputs = [] if kind_name == "start" else ["in"]
    plain = {"inputs": inputs, "outputs": [], "default_output": kind_name != "end", "optional": []}
    if not isinstance(kind_name, str):
        return plain
    try:
        kind = get_kind(kind_name)
    except UnknownNodeKind:
        return plain
    try:
        config = kind.config_model.model_validate(raw_config if isinstance(raw_config, dict) else {})
    except ValidationError:
        fixed = kind_handles(kind)
        names = fixed["names"]
        return {**plain, "outputs": list(names or []), "default_output": names is None and plain["default_output"], "optional": fixed["optional"]}
    names = kind.output_handles(config)
    optional = sorted(kind.optional_handles(config)) if names else []
    return {**plain, "outputs": list(names or []), "default_output": names is None and plain["default_output"], "optional": optional}


def all_handles(raw_nodes: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`node_handles` of every node dict with a string id (first one per id)."""
    out: dict[str, dict[str, Any]] = {}
    for raw in raw_nodes:
        node_id = raw.get("id")
        if isinstance(node_id, str) and node_id not in out:
            out[node_id] = node_handles(raw.get("kind"), raw.get("config"))
    return out


def kind_handles(kind: NodeKind) -> dict[str, Any]:
    """Handle facts of a kind for the palette (see :func:`export_schemas`): ``{"names":
    [..] | None, "optional": [..], "dynamic": bool}`` for a default config."""
    dynamic = kind.dynamic_handles
    try:
        try:
            config = kind.config_model()
        except ValidationError:
            # Required fields: handles usually do not depend on them (approval), and a
            # kind whose handles do depends on defaults that model_construct fills in.
            config = kind.config_model.model_construct()
        names = kind.output_handles(config)
        optional = sorted(kind.optional_handles(config))
    except Exception:  # noqa: BLE001 - a kind that cannot answer without a real config
        return {"names": None, "optional": [], "dynamic": True}
    return {"names": names, "optional": optional, "dynamic": dynamic}


# --- graph checks -------------------------------------------------------------------------


class GraphCheck:
    """One validation pass over a parsed spec; collects issues, then :meth:`run` sorts them."""

    def __init__(self, spec: GraphSpec, *, quiet_nodes: set[str] | None = None, edges_dropped: bool = False):
        self.spec = spec
        # Nodes whose own fields did not parse (their issues are already reported): they
        # take part in the graph checks as nodes of unknown kind, with nothing to say.
        self.quiet_nodes = quiet_nodes or set()
        # Edges that did not parse were left out: reachability, wiring, joins, loops and
        # parallel checks would report what the missing edges may well provide.
        self.edges_dropped = edges_dropped
        self.topo = Topology(spec)
        self.issues: list[Issue] = []
        self.warnings: list[Issue] = []
        self.kinds: dict[str, NodeKind] = {}
        self.configs: dict[str, NodeConfig] = {}
        # node id -> handle names (None = plain). Absent when the kind or config is invalid:
        # then handle checks on that node's edges are skipped (they would only add noise).
        self.handles: dict[str, list[str] | None] = {}
        self.writes: dict[str, set[str]] = {}

    def error(self, node_id: str | None, fld: str, message: str, code: str) -> None:
        self.issues.append(Issue(node_id, fld, message, code))

    def run(self) -> ValidationResult:
        self.check_input_schema()
        self.check_nodes()
        self.check_start_end()
        self.check_edges()
        if not self.edges_dropped:
            self.check_handles_wired()
            self.check_reachability()
            self.check_joins()
            self.check_loops()
        self.check_names()
        if not self.edges_dropped:
            self.check_parallel()
        self.check_reducers()
        index = index_of_nodes(self.spec.nodes)
        return ValidationResult(
            spec=self.spec,
            issues=located(sorted_issues(self.issues), index),
            warnings=located(sorted_issues(self.warnings), index),
            configs=self.configs,
            handles=all_handles({"id": n.id, "kind": n.kind, "config": n.config} for n in self.spec.nodes),
        )

    # -- document-level ---------------------------------------------------------------
    def check_input_schema(self) -> None:
        schema = self.spec.input_schema
        problems = schemas.schema_problems(schema)  # not valid, or a remote or dangling $ref
        for where, why in problems:
            self.error(None, f"input_schema.{where}" if where else "input_schema", why, "invalid_input_schema")
        if problems:
            return
        # A run's input is a dict of named values (they become state keys).
        declared = schema.get("type")
        if declared is not None and declared != "object":
            self.error(
                None,
                "input_schema.type",
                f"the input schema must describe an object, not {declared!r}",
                "invalid_input_schema",
            )

    def check_nodes(self) -> None:
        first_index: dict[str, int] = {}
        for index, node in enumerate(self.spec.nodes):
            if node.id in first_index:
                self.error(
                    node.id,
                    "id",
                    f"duplicate node id (nodes[{first_index[node.id]}] and nodes[{index}])",
                    "duplicate_node_id",
                )
                continue
            first_index[node.id] = index
            if node.id in self.quiet_nodes:
                continue
            try:
                kind = get_kind(node.kind)
            except UnknownNodeKind:
                known = ", ".join(settings.BALLAST_NODE_KINDS)
                self.error(node.id, "kind", f"unknown node kind '{node.kind}' (known: {known})", "unknown_kind")
                continue
            self.kinds[node.id] = kind
            if node.repeat_safe is not None and not kind.uses_repeat_safe:
                self.error(node.id, "repeat_safe", _unused_repeat_safe(kind, node.kind), "repeat_safe_unused")
            try:
                config = kind.config_model.model_validate(node.config)
            except ValidationError as exc:
                self.issues.extend(config_issues(node.id, exc))
                continue
            self.configs[node.id] = config
            self.handles[node.id] = kind.output_handles(config)
            self.writes[node.id] = set(kind.writes(config))
            if node.retry.max_attempts > 1 and node.timeout_seconds and not kind.is_step_repeat_safe(config, node.repeat_safe):
                self.warnings.append(
                    Issue(
                        node.id,
                        "retry",
                        "this step is not safe to repeat, so a timeout parks it for a decision instead of retrying it "
                        "(its side effect may have happened); only errors that say nothing was sent are retried. "
                        "Set repeat_safe: true if the service deduplicates by the Idempotency-Key",
                        "unsafe_retry",
                    )
                )

            if node.retry.max_attempts > 1 and not kind.retries_wait:
                self.warnings.append(
                    Issue(
                        node.id,
                        "retry",
                        "the retry policy is not applied to a failed child run: the child is called once per step and its "
                        "failure fails this step; resuming the run resumes that child from its failed step",
                        "retry_not_applied",
                    )
                )

    def check_start_end(self) -> None:
        starts = list(dict.fromkeys(self.topo.start_ids))
        if not starts:
            self.error(None, "nodes", "the graph has no start node", "missing_start")
        elif len(starts) > 1:
            for node_id in starts:
                self.error(
                    node_id,
                    "kind",
                    f"more than one start node ({', '.join(starts)}); keep exactly one",
                    "multiple_start",
                )
        if not self.topo.end_ids:
            self.error(None, "nodes", "the graph has no end node", "missing_end")

    # -- edges and handles --------------------------------------------------------------
    def check_edges(self) -> None:
        nodes = self.topo.nodes
        seen: dict[tuple[str, str | None, str], int] = {}
        seen_ids: dict[str, int] = {}
        for i, edge in enumerate(self.spec.edges):
            if edge.id is not None:
                if edge.id in seen_ids:
                    self.error(
                        None,
                        f"edges[{i}].id",
                        f"edge id '{edge.id}' is also used by edges[{seen_ids[edge.id]}]",
                        "duplicate_edge_id",
                    )
                seen_ids.setdefault(edge.id, i)
            source, target = nodes.get(edge.source), nodes.get(edge.target)
            if source is None:
                self.error(None, f"edges[{i}].source", f"edge source '{edge.source}' is not a node", "dangling_edge")
            if target is None:
                self.error(None, f"edges[{i}].target", f"edge target '{edge.target}' is not a node", "dangling_edge")
            if target is not None and target.kind == "start":
                self.error(
                    None,
                    f"edges[{i}].target",
                    f"edge into start node '{edge.target}': a start node has no incoming edges",
                    "edge_into_start",
                )
            if source is not None and source.kind == "end":
                self.error(
                    None,
                    f"edges[{i}].source",
                    f"edge out of end node '{edge.source}': an end node has no outgoing edges",
                    "edge_out_of_end",
                )
            if source is None or target is None:
                continue
            key = (edge.source, edge.source_handle, edge.target)
            if key in seen:
                self.error(
                    None, f"edges[{i}]", f"duplicate of edges[{seen[key]}] ({_edge_text(edge)})", "duplicate_edge"
                )
            seen.setdefault(key, i)
            self.check_edge_handle(i, edge)

    def check_edge_handle(self, i: int, edge: EdgeSpec) -> None:
        if edge.source not in self.handles:
            return
        handles = self.handles[edge.source]
        kind = self.topo.nodes[edge.source].kind
        where = f"edges[{i}].source_handle"
        if handles is None:
            if edge.source_handle is not None:
                self.error(
                    None,
                    where,
                    f"'{edge.source}' ({kind}) has no named handles: remove source_handle '{edge.source_handle}' (every edge of a plain node fires)",
                    "handle_on_plain_node",
                )
        elif edge.source_handle is None:
            self.error(
                None,
                where,
                f"edge from '{edge.source}' ({kind}) must name one of its handles: {', '.join(handles)}",
                "missing_handle",
            )
        elif edge.source_handle not in handles:
            self.error(
                None,
                where,
                f"'{edge.source}' ({kind}) has no handle '{edge.source_handle}' (handles: {', '.join(handles)})",
                "unknown_handle",
            )

    def check_handles_wired(self) -> None:
        for node_id, handles in self.handles.items():
            if not handles:
                continue
            optional = self.kinds[node_id].optional_handles(self.configs[node_id])
            wired = {e.source_handle for e in self.spec.edges if e.source == node_id}
            for handle in handles:
                if handle not in wired and handle not in optional:
                    self.error(
                        node_id,
                        f"handles.{handle}",
                        f"handle '{handle}' is not connected to any node",
                        "unwired_handle",
                    )

    # -- reachability, joins, loops ------------------------------------------------------
    def check_reachability(self) -> None:
        topo = self.topo
        starts = list(dict.fromkeys(topo.start_ids))
        if starts:
            reached = set(starts)
            for start in starts:
                reached |= topo.reachable_from(start)
            for node_id in topo.nodes:
                if node_id not in reached:
                    self.error(node_id, "incoming", "not reachable from the start node", "unreachable")
        ends = set(topo.end_ids)
        if ends:
            for node_id in topo.nodes:
                if node_id in ends or topo.reachable_from(node_id) & ends:
                    continue
                if topo.successors(node_id):
                    message = "no path from this node reaches an end node"
                else:
                    message = "this node has no outgoing edges and is not an end node"
                self.error(node_id, "outgoing", message, "dead_end")

    def check_joins(self) -> None:
        for node_id, node in self.topo.nodes.items():
            if node.kind == "join":
                count = len(self.topo.in_edges.get(node_id, ()))
                if count < 2:
                    self.error(
                        node_id, "incoming", f"a join needs at least 2 incoming edges (has {count})", "join_inputs"
                    )

    def check_loops(self) -> None:
        for cycle in self.topo.cycles:
            if not any(self.topo.nodes[n].max_iterations for n in cycle):
                self.error(
                    cycle[0],
                    "max_iterations",
                    f"unbounded loop through {', '.join(cycle)}: set max_iterations on at least one of these nodes",
                    "unbounded_loop",
                )

    # -- names and expressions -----------------------------------------------------------
    def check_names(self) -> None:
        reserved = {INPUT_NAME, *FUNCTION_NAMES}
        for name in sorted(self.spec.input_names() & reserved):
            self.error(
                None,
                f"input_schema.properties.{name}",
                f"'{name}' is reserved (the run input or a function); rename the input property",
                "reserved_name",
            )
        for name in sorted(set(self.spec.state) & reserved):
            self.error(
                None,
                f"state.{name}",
                f"'{name}' is reserved (the run input or a function); rename the state key",
                "reserved_name",
            )
        for node_id, keys in self.writes.items():
            for name in sorted(keys & reserved):
                self.error(
                    node_id,
                    f"writes.{name}",
                    f"'{name}' is reserved (the run input or a function); write another key",
                    "reserved_name",
                )

        written = set().union(*self.writes.values()) if self.writes else set()
        known = self.spec.input_names() | set(self.spec.state) | written | {INPUT_NAME} | set(FUNCTION_NAMES)
        # A node whose kind or config is invalid has unknown writes: names it would write
        # would be reported as unknown elsewhere, pointing away from the real error. Hold
        # unknown_variable back until those nodes are fixed.
        writes_known = len(self.writes) == len(self.topo.nodes)
        # The input schema's declared keys, for the undeclared_input_key warning (see shared.py).
        known |= {INPUT_KEYS_MARK, *(INPUT_KEY_PREFIX + key for key in self.spec.input_names())}
        for node_id, config in self.configs.items():
            for issue in self.kinds[node_id].check(node_id, config, set(known)):
                if issue.code in WARNING_CODES:
                    self.warnings.append(issue)
                elif writes_known or issue.code not in UNKNOWN_NAME_CODES:
                    self.issues.append(issue)

    # -- concurrency -----------------------------------------------------------------------
    def fan_outs(self) -> list[tuple[str, str | None, list[str]]]:
        """(node id, handle, distinct targets fired together) for every fan-out, in spec
        order; handle is None for a plain node.

        A plain node fires all its edges; a routing node fires the edges of the one handle
        it takes, so only several edges on one handle are a fan-out.
        """
        result: list[tuple[str, str | None, list[str]]] = []
        for node_id in self.topo.nodes:
            if node_id not in self.handles:
                continue
            groups: dict[str | None, list[str]] = {}
            plain = self.handles[node_id] is None
            for edge in self.topo.out_edges.get(node_id, ()):
                group = groups.setdefault(None if plain else edge.source_handle, [])
                if edge.target not in group:
                    group.append(edge.target)
            result.extend((node_id, handle, targets) for handle, targets in groups.items() if len(targets) >= 2)
        return result

    def branch_labels(self, fork: str, targets: list[str]) -> dict[str, set[frozenset[int]]]:
        """Node id -> the labels (sets of branch indexes of ``fork``) its tokens may carry.

        Branch i starts at ``targets[i]`` with label {i}. A join's label is the set of every
        branch that can reach it (it fires once for all of them). The walk does not pass
        through ``fork`` (a loop back to the fork starts a new generation).
        """
        topo = self.topo
        reaches = [topo.reachable_from(t, avoid=fork) | {t} for t in targets]

        def join_label(node_id: str) -> frozenset[int]:
            return frozenset(i for i, region in enumerate(reaches) if node_id in region)

        def label_at(node_id: str, incoming: frozenset[int]) -> frozenset[int]:
            return join_label(node_id) if topo.nodes[node_id].kind == "join" else incoming

        labels: dict[str, set[frozenset[int]]] = {}
        work = [(t, label_at(t, frozenset({i}))) for i, t in enumerate(targets)]
        while work:
            node_id, label = work.pop()
            bucket = labels.setdefault(node_id, set())
            if label in bucket:
                continue
            bucket.add(label)
            if node_id == fork:
                continue
            for successor in topo.successors(node_id):
                work.append((successor, label_at(successor, label)))
        return labels

    def check_parallel(self) -> None:
        fan_outs = self.fan_outs()
        if not fan_outs:
            return
        merge_reported: set[str] = set()
        # (key, node) -> (other writers, forks) for parallel_writes.
        conflicts: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
        unsafe_keys = {
            key
            for keys in self.writes.values()
            for key in keys
            if key not in self.spec.state or self.spec.state[key].reducer == "replace"
        }
        writers = {k: sorted(n for n, keys in self.writes.items() if k in keys) for k in unsafe_keys}
        for fork, handle, targets in fan_outs:
            labels = self.branch_labels(fork, targets)
            self.check_merges(fork, handle, targets, labels, merge_reported)
            for key, nodes in writers.items():
                for a, b in combinations(nodes, 2):
                    if _disjoint(labels.get(a, ()), labels.get(b, ())):
                        for this, other in ((a, b), (b, a)):
                            others, forks = conflicts.setdefault((key, this), (set(), set()))
                            others.add(other)
                            forks.add(fork)
        for (key, node_id), (others, forks) in conflicts.items():
            names = ", ".join(f"'{o}'" for o in sorted(others))
            self.error(
                node_id,
                f"writes.{key}",
                f"state key '{key}' is also written by {names} on a parallel branch (fan-out at "
                f"{', '.join(sorted(forks))}); declare a reducer for '{key}' under state "
                "(append, extend, add, merge, max or min) or write different keys",
                "parallel_writes",
            )

    def check_merges(
        self,
        fork: str,
        handle: str | None,
        targets: list[str],
        labels: dict[str, set[frozenset[int]]],
        reported: set[str],
    ) -> None:
        """parallel_merge: a non-join node whose incoming edges can carry different branches."""
        plain = self.handles.get(fork) is None
        for node_id, edges in self.topo.in_edges.items():
            if node_id in reported or len(edges) < 2 or self.topo.nodes[node_id].kind == "join":
                continue
            carried: list[tuple[str, set[frozenset[int]]]] = []
            for edge in edges:
                if edge.source == fork:
                    # The fork's own edge is branch i itself; edges on its other handles are
                    # not part of this fan-out (a routing node takes one handle).
                    if (plain or edge.source_handle == handle) and edge.target in targets:
                        carried.append((edge.source, {frozenset({targets.index(edge.target)})}))
                else:
                    carried.append((edge.source, labels.get(edge.source, set())))
            for (src_a, lab_a), (src_b, lab_b) in combinations(carried, 2):
                if src_a != src_b and _disjoint(lab_a, lab_b):
                    self.error(
                        node_id,
                        "incoming",
                        f"incoming edges from '{src_a}' and '{src_b}' can carry parallel branches of the "
                        f"fan-out at '{fork}', so this node would run once per branch; merge them with a join node",
                        "parallel_merge",
                    )
                    reported.add(node_id)
                    break

    def check_reducers(self) -> None:
        written = set().union(*self.writes.values()) if self.writes else set()
        for key, state in self.spec.state.items():
            if state.reducer != "replace" and key not in written:
                self.warnings.append(
                    Issue(
                        None,
                        f"state.{key}.reducer",
                        f"reducer '{state.reducer}' is declared on '{key}' but no node writes '{key}'",
                        "unused_reducer",
                    )
                )


def _unused_repeat_safe(kind: NodeKind, name: str) -> str:
    """Why ``repeat_safe`` is refused on a node of ``kind`` (its ``uses_repeat_safe`` is
    False), and where to say it instead when the kind has such a place."""
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if kind.repeat_safe_instead:
        return (
            f"{article} {name} node's own step is always safe to repeat, so repeat_safe here would have no effect; "
            f"set it in {kind.repeat_safe_instead}"
        )
    return f"{article} {name} node does nothing outside the run and is always safe to repeat; remove repeat_safe"


def _disjoint(a: Iterable[frozenset[int]], b: Iterable[frozenset[int]]) -> bool:
    """Whether some label of ``a`` and some label of ``b`` share no branch (two tokens)."""
    b = list(b)
    return any(not (la & lb) for la in a for lb in b)


def _edge_text(edge: EdgeSpec) -> str:
    handle = f".{edge.source_handle}" if edge.source_handle else ""
    return f"{edge.source}{handle} -> {edge.target}"


