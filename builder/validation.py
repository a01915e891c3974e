"""Whole-graph validation of a spec (pydantic shape, node configs, graph checks), pure: no database.

A run can only start on a graph for which :func:`validate_spec` returns ``ok``. Problems come
back as :class:`runs.nodes.base.Issue` rows (node id, field, message, code) so the builder can
show each one on its node or edge. Every defect kind has its own ``code``:

==========================  =====================================================================
code                        meaning (node_id / field)
==========================  =====================================================================
invalid_spec                the document does not match GraphSpec (node id when inside nodes[i])
                            or holds a number that is not finite (``1e999`` reads as Infinity;
                            positions, state defaults, configs: the path names it)
invalid_input_schema        input_schema is not a valid JSON Schema of an object, or a $ref in it
                            is remote or points at nothing (-/input_schema.<path>)
duplicate_node_id           a second node uses an id (node / id)
unknown_kind                no node kind registered under ``kind`` (node / kind)
invalid_config              config does not match the kind's Config (node / config.<path>)
repeat_safe_unused          repeat_safe on a kind that does not use it (NodeKind.uses_repeat_safe
                            False: start, end, join, condition, transform, approval, agent)
                            (node / repeat_safe)
missing_start               no start node (- / nodes)
multiple_start              more than one start node (each start / kind)
missing_end                 no end node (- / nodes)
dangling_edge               edge source or target is not a node (- / edges[i].source|target)
edge_into_start             an edge targets a start node (- / edges[i].target)
edge_out_of_end             an edge leaves an end node (- / edges[i].source)
duplicate_edge              same source, handle and target twice (- / edges[i])
duplicate_edge_id           two edges share an explicit id (- / edges[i].id)
handle_on_plain_node        source_handle on an edge from a plain node (- / edges[i].source_handle)
missing_handle              edge from a routing node without source_handle (- / edges[i].source_handle)
unknown_handle              source_handle that the routing node does not have (- / edges[i].source_handle)
unwired_handle              a required handle of a routing node has no edge (node / handles.<h>)
duplicate_handle            two condition cases share a handle, or one is 'default' (node / config...)
unreachable                 no path from start reaches the node (node / incoming)
dead_end                    no path from the node reaches an end (node / outgoing)
join_inputs                 a join with fewer than 2 incoming edges (node / incoming)
unbounded_loop              a cycle without any max_iterations (first node of the cycle / max_iterations)
reserved_name               a node or state key uses 'input' or a function name (node / writes.<k>)
invalid_expression          an expression does not parse (node / config.<path>)  [from the kinds]
expression_limit            a constant part of an expression exceeds the evaluation limits, e.g.
                            ``10**10**10`` (node / config.<path>)  [from the kinds]
unknown_variable            an expression or template names an unknown variable  [from the kinds]
parallel_merge              a non-join node merges parallel branches (node / incoming)
parallel_writes             parallel nodes write one key without a reducer (node / writes.<k>)
==========================  =====================================================================

Kinds add their own codes through ``NodeKind.check`` (unknown_tool, unknown_provider,
unknown_model ... for llm and tool nodes).

Where an issue points (:class:`LocatedIssue`, every issue this module returns):

- ``node`` (also ``node_id``): the node at fault, or None for a graph-level problem;
- ``field``: relative to that node (``config.cases[0].expression``, ``kind``, or one of
  the pseudo-fields ``incoming``, ``outgoing``, ``handles.<h>``, ``writes.<key>``), or,
  for a graph-level problem, a spec path (``edges[3].target``, ``input_schema.type``);
- ``path``: always from the spec root: ``nodes[2].config.cases[0].expression`` (a
  pseudo-field's path is the node's own, ``nodes[2]``), or the graph-level field.

Sticky notes (``GraphSpec.notes``) are layout: no check looks at them.

Warnings (``ValidationResult.warnings``) never block a run. There are three:
``unused_reducer``: a non-replace reducer declared on a state key that no node writes. It
changes nothing at run time, so it is not an error; it is usually a typo of a key name,
which the builder should point out. ``undeclared_input_key``: an expression reads
``input.x`` (or ``input["x"]``) but the input schema does not declare ``x``; a run whose
input has no ``x`` fails at that node, but a caller may still pass it. ``unsafe_retry``:
a node not safe to repeat with both a retry policy and ``timeout_seconds``: a timeout
parks it for a person rather than retrying it (runs.engine.commit.step_fail), which a
builder who set the policy may not expect.

Concurrency model (for parallel_merge and parallel_writes): a fan-out is a node with two or
more distinct targets fired together (every edge of a plain node, or several edges on one
handle of a routing node; a routing node takes one handle, so its handles are exclusive).
Each branch of a fan-out carries a token labelled by the branch index; a join merges the
labels of every branch of that fan-out that can reach it. Two nodes may run concurrently
when they can carry disjoint labels of some fan-out. Walks stop at the fan-out node itself,
so a loop back to it starts a new generation rather than counting as a parallel branch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from django.conf import settings
from pydantic import ValidationError

from core.fields import field_path
from graphs.spec import EdgeSpec, GraphSpec, NodeSpec, content_hash, spec_json_schema
from graphs.topology import Topology
from runs.nodes import UnknownNodeKind, all_kinds, get_kind
from runs.nodes.base import Issue, NodeConfig, NodeKind
from runs.nodes.shared import INPUT_KEY_PREFIX, INPUT_KEYS_MARK, unknown_variable_message
from runs.reports.estimate import estimate_by_node, estimate_spec
from runs.sandbox import schemas
from runs.sandbox.expressions import FUNCTION_NAMES, ExpressionError, parse_expression
from runs.sandbox.templating import template_names
from runs.sandbox.values import non_finite_locations, non_finite_message

# Names an expression always sees besides state keys: the run input and the functions.
# A node or state key with one of these names would shadow it.
INPUT_NAME = "input"
# Codes the kinds use for "this name is not a known variable" (the llm and tool kinds say
# unknown_name for template names).
UNKNOWN_NAME_CODES = frozenset({"unknown_variable", "unknown_name"})
# Codes a kind's check returns that are warnings (never block a run), not errors.
WARNING_CODES = frozenset({"undeclared_input_key"})


@dataclass(frozen=True)
class LocatedIssue(Issue):
    """An :class:`Issue` that also knows its ``path`` from the spec root (see the module
    docstring); ``as_dict`` adds ``node`` (= ``node_id``) and ``path``."""

    path: str = ""

    def as_dict(self) -> dict[str, Any]:
        data = super().as_dict()
        data["node"] = self.node_id
        data["path"] = self.path
        return data


@dataclass
class ValidationResult:
    """Outcome of :func:`validate_spec`.

    - ``spec``: the parsed GraphSpec, or None when the document itself did not parse.
    - ``issues``: errors, sorted (graph-level first, then by node id, field, code).
    - ``warnings``: problems that do not block a run (see the module docstring).
    - ``configs``: node id -> parsed config, for every node whose kind and config are valid.
    - ``handles``: node id -> :func:`node_handles` of every node with a string id (also
      when the document did not parse, so the canvas can still draw its edges).
    """

    spec: GraphSpec | None
    issues: list[LocatedIssue] = field(default_factory=list)
    warnings: list[LocatedIssue] = field(default_factory=list)
    configs: dict[str, NodeConfig] = field(default_factory=dict)
    handles: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the graph may run: it parsed and has no errors (warnings allowed)."""
        return self.spec is not None and not self.issues

    def as_dict(self) -> dict[str, Any]:
        """``{"valid": bool, "errors": [issue dicts], "warnings": [issue dicts]}`` (JSON-ready)."""
        return {
            "valid": self.ok,
            "errors": [i.as_dict() for i in self.issues],
            "warnings": [i.as_dict() for i in self.warnings],
        }


def validate_spec(data: dict[str, Any] | GraphSpec) -> ValidationResult:
    """Validate a graph spec given as a JSON-like dict or an already parsed GraphSpec.

    Stages: pydantic parse, then each node's kind and config, then graph checks. Every
    error comes back in one pass: when the parse fails (``spec`` None), the parts that
    failed are set aside (see :func:`_repaired_spec`) and the graph checks run on the
    rest; only a broken frame (``nodes`` not a list ...) stops at the parse issues. Never raises for a bad spec; a node kind plugin that fails to
    import raises ImportError (a server fault, not a fault of the graph).
    """
    if isinstance(data, GraphSpec):
        spec = data
    elif not isinstance(data, dict):
        issue = LocatedIssue(None, "spec", f"a graph spec must be a JSON object, not {type(data).__name__}", "invalid_spec", "")
        return ValidationResult(spec=None, issues=[issue])
    else:
        numbers = _non_finite_issues(data)
        if numbers:
            # The document cannot be stored (JSON has no Infinity or NaN), so nothing else
            # is worth checking until these are fixed.
            return ValidationResult(spec=None, issues=_located(_sorted(numbers), _node_index(data.get("nodes"))))
        try:
            spec = GraphSpec.model_validate(data)
        except ValidationError as exc:
            raw_nodes = data.get("nodes")
            raw_nodes = [n for n in raw_nodes if isinstance(n, dict)] if isinstance(raw_nodes, list) else []
            index = _node_index(data.get("nodes"))
            issues = _spec_issues(exc, data)
            repaired = _repaired_spec(data, exc)
            if repaired is not None:
                # Report the graph's other errors in the same pass (a malformed node id
                # must not hide them); the result still has spec None: it cannot run.
                spec, quiet, edges_dropped = repaired
                check = _GraphCheck(spec, quiet_nodes=quiet, edges_dropped=edges_dropped)
                checked = check.run()
                issues = [*issues, *checked.issues]
                return ValidationResult(
                    spec=None, issues=_located(_sorted(issues), index), warnings=checked.warnings,
                    handles=_all_handles(raw_nodes),
                )
            return ValidationResult(spec=None, issues=_located(_sorted(issues), index), handles=_all_handles(raw_nodes))
    return _GraphCheck(spec).run()


# A placeholder that passes NODE_ID_PATTERN while a node with a malformed id is parsed;
# the node keeps its real id afterwards, so edges and issues still name it.
_ID_PLACEHOLDER = "_placeholder_id"


def _repaired_spec(data: dict[str, Any], exc: ValidationError) -> tuple[GraphSpec, set[str], bool] | None:
    """The spec with every part that failed to parse set aside, so the graph checks can run
    on the rest: ``(spec, quiet node ids, edges dropped)``, or None when the document's
    frame itself (``nodes``/``edges`` not lists, a field of the top level that is not a
    node, edge or state key) is broken and the graph checks would only add noise.

    A node with a malformed field keeps its id (even a malformed one) and is checked for
    nothing else (``quiet``: its parse issue already names it); a node without a string
    id makes it None; an edge that does not parse is left out (``edges dropped`` turns
    off the checks that need every edge).
    """
    nodes = data.get("nodes")
    edges = data.get("edges", [])
    if not isinstance(nodes, list) or not isinstance(edges, list):
        return None
    bad_nodes: set[int] = set()
    bad_edges: set[int] = set()
    bad_state: set[str] = set()
    other = set()
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
            bad_nodes.add(loc[1])
        elif len(loc) >= 2 and loc[0] == "edges" and isinstance(loc[1], int):
            bad_edges.add(loc[1])
        elif len(loc) >= 2 and loc[0] == "state" and isinstance(loc[1], str):
            bad_state.add(loc[1])
        elif loc and loc[0] in ("notes", "description", "name", "settings", "version"):
            other.add(loc[0])  # no graph check reads these: parse without them
        else:
            return None
    fixed: dict[str, Any] = {k: v for k, v in data.items() if k not in other}
    fixed["name"] = "repaired"
    quiet: set[str] = set()
    real_ids: dict[int, str] = {}
    fixed_nodes = []
    for i, raw in enumerate(nodes):
        if i not in bad_nodes:
            fixed_nodes.append(raw)
            continue
        node_id = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(node_id, str) or not node_id:
            # Edges may name the id this node was meant to have: the checks of the rest
            # would report them all as dangling, so stop at the parse issues.
            return None
        quiet.add(node_id)
        real_ids[len(fixed_nodes)] = node_id
        # Kind "start"/"end" must stay visible to the start and end checks.
        kind = raw.get("kind") if isinstance(raw.get("kind"), str) else ""
        fixed_nodes.append({"id": _ID_PLACEHOLDER, "kind": kind})
    fixed["nodes"] = fixed_nodes
    fixed["edges"] = [e for i, e in enumerate(edges) if i not in bad_edges]
    if bad_state and isinstance(data.get("state"), dict):
        fixed["state"] = {k: ({} if k in bad_state else v) for k, v in data["state"].items()}
    try:
        spec = GraphSpec.model_validate(fixed)
    except ValidationError:
        return None
    for position, node_id in real_ids.items():
        spec.nodes[position] = spec.nodes[position].model_copy(update={"id": node_id})
    return spec, quiet, bool(bad_edges)


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


def _all_handles(raw_nodes: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`node_handles` of every node dict with a string id (first one per id)."""
    out: dict[str, dict[str, Any]] = {}
    for raw in raw_nodes:
        node_id = raw.get("id")
        if isinstance(node_id, str) and node_id not in out:
            out[node_id] = node_handles(raw.get("kind"), raw.get("config"))
    return out


def _node_index(nodes: Any) -> dict[str, int]:
    """Node id -> index of its first occurrence in the spec's ``nodes`` list."""
    index: dict[str, int] = {}
    for i, raw in enumerate(nodes if isinstance(nodes, list) else []):
        node_id = raw.get("id") if isinstance(raw, dict) else getattr(raw, "id", None)
        if isinstance(node_id, str):
            index.setdefault(node_id, i)
    return index


_NODE_FIELDS = frozenset(NodeSpec.model_fields)


def issue_path(issue: Issue, node_index: dict[str, int]) -> str:
    """The spec-root path of ``issue`` (see the module docstring)."""
    if issue.node_id is None:
        return "" if issue.field == "spec" else issue.field
    index = node_index.get(issue.node_id)
    if index is None:
        return issue.field
    head = re.split(r"[.\[]", issue.field, maxsplit=1)[0]
    return f"nodes[{index}].{issue.field}" if head in _NODE_FIELDS else f"nodes[{index}]"


def _located(issues: Iterable[Issue], node_index: dict[str, int]) -> list[LocatedIssue]:
    return [
        LocatedIssue(i.node_id, i.field, i.message, i.code, issue_path(i, node_index)) for i in issues
    ]


def export_schemas() -> dict[str, Any]:
    """JSON Schemas for the builder: ``{"graph": GraphSpec schema, "nodes": {kind: {"config":
    Config schema, "description": str, "handles": {"names": [..] | None, "optional": [..],
    "dynamic": bool}}}}``. ``handles.names`` None means a plain node (one unnamed handle,
    every edge fires); ``dynamic`` means the names depend on the config (condition cases),
    and ``names`` shows those of a default config."""
    nodes: dict[str, Any] = {}
    for name, kind in all_kinds().items():
        nodes[name] = {
            "config": kind.config_model.model_json_schema(),
            "description": kind.description,
            "handles": kind_handles(kind),
        }
    return {"graph": spec_json_schema(), "nodes": nodes}


# --- pydantic errors -> issues ------------------------------------------------------------


def _message(err: Mapping[str, Any]) -> str:
    """A pydantic error message phrased for a person editing a graph."""
    kind = err.get("type")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    if kind == "too_short":
        # pydantic says "Dictionary should have at least 1 item after validation, not 0".
        n = (err.get("ctx") or {}).get("min_length", 1)
        msg = str(err.get("msg", ""))
        if msg.startswith("Dictionary"):
            return "add at least one key" if n == 1 else f"add at least {n} keys"
        if msg.startswith(("List", "Tuple", "Set")):
            return "add at least one item" if n == 1 else f"add at least {n} items"
        if msg.startswith("String"):
            return "must not be empty" if n == 1 else f"must be at least {n} characters long"
    msg = str(err.get("msg", "invalid value"))
    # Our own validators raise ValueError; pydantic prefixes it.
    return msg.removeprefix("Value error, ")


def _spec_issues(exc: ValidationError, data: dict[str, Any]) -> list[Issue]:
    """Issues for GraphSpec parse errors; errors inside nodes[i] carry that node's id."""
    nodes = data.get("nodes")
    issues = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        node_id = None
        if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int) and isinstance(nodes, list):
            raw = nodes[loc[1]] if loc[1] < len(nodes) else None
            raw_id = raw.get("id") if isinstance(raw, dict) else None
            if isinstance(raw_id, str) and raw_id:
                node_id = raw_id
                loc = loc[2:]
        fld = field_path(loc) or "spec"
        message = _message(err)
        if node_id is not None and loc == ("id",) and err.get("type") == "string_pattern_mismatch":
            message = "node id must start with a letter or _ and hold only letters, digits, _ and - (at most 64)"
        issues.append(Issue(node_id, fld, message, "invalid_spec"))
    return issues


def _non_finite_issues(data: dict[str, Any]) -> list[Issue]:
    """invalid_spec issues for every non-finite number in ``data`` (node positions, note
    positions, state defaults, configs ...); inside nodes[i] they name that node."""
    nodes = data.get("nodes")
    issues = []
    for loc, value in non_finite_locations(data):
        node_id = None
        if len(loc) >= 3 and loc[0] == "nodes" and isinstance(loc[1], int) and isinstance(nodes, list):
            raw_id = nodes[loc[1]].get("id") if isinstance(nodes[loc[1]], dict) else None
            if isinstance(raw_id, str) and raw_id:
                node_id, loc = raw_id, loc[2:]
        issues.append(Issue(node_id, field_path(loc) or "spec", non_finite_message(value), "invalid_spec"))
    return issues


def _config_issues(node_id: str, exc: ValidationError) -> list[Issue]:
    """Issues for a node config that does not match its kind's Config (field config.<path>)."""
    return [
        Issue(node_id, field_path(err.get("loc", ()), "config"), _message(err), "invalid_config") for err in exc.errors()
    ]


def _natural(text: str) -> list[Any]:
    """Sort key that orders embedded numbers by value (edges[2] before edges[10])."""
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", text))]


def _sorted(issues: Iterable[Issue]) -> list[Issue]:
    """Unique issues in a stable order: graph-level first, then by node id, field, code, message."""
    unique = dict.fromkeys(issues)
    return sorted(
        unique,
        key=lambda i: (i.node_id is not None, _natural(i.node_id or ""), _natural(i.field), i.code, i.message),
    )


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


class _GraphCheck:
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
        index = _node_index(self.spec.nodes)
        return ValidationResult(
            spec=self.spec,
            issues=_located(_sorted(self.issues), index),
            warnings=_located(_sorted(self.warnings), index),
            configs=self.configs,
            handles=_all_handles({"id": n.id, "kind": n.kind, "config": n.config} for n in self.spec.nodes),
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
                self.issues.extend(_config_issues(node.id, exc))
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


# --- one expression or template, as an editor checks it while it is typed ----------------

SOURCE_KINDS = ("expression", "template")


def _line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of character ``offset`` of ``text``."""
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def check_source(kind: str, source: str, state_keys: Iterable[str] | None = None) -> dict[str, Any]:
    """Check one expression (``kind`` "expression": conditions, transforms) or template
    (``kind`` "template": prompts, tool arguments) the way graph validation does, with
    the same parsers (``runs.sandbox.expressions.parse_expression``, ``runs.sandbox.templating.
    template_names``) and the same names known (``state_keys`` plus ``input`` and the
    expression functions; ``state_keys`` None skips the unknown-name check).

    Returns ``{"ok": bool, "errors": [{"message", "line", "column", "code"}], "names":
    [variables read, sorted]}``; line and column are 1-based in ``source`` (None when
    the parser gives no place). Raises ValueError for an unknown ``kind``.
    """
    if kind not in SOURCE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(SOURCE_KINDS)}")
    try:
        names = parse_expression(source).names if kind == "expression" else template_names(source)
    except ExpressionError as exc:
        line, column = exc.position or (None, None)
        if kind == "expression" and line is not None and column is not None:
            # The expression parser counts in the stripped text; point into the source.
            lead = source[: len(source) - len(source.lstrip())]
            lead_line, lead_column = _line_column(source, len(lead))
            line, column = (line + lead_line - 1, column + lead_column - 1) if line == 1 else (line + lead_line - 1, column)
        error = {"message": exc.message, "line": line, "column": column, "code": exc.code}
        return {"ok": False, "errors": [error], "names": []}
    errors = []
    if state_keys is not None:
        known = set(state_keys) | {INPUT_NAME, *FUNCTION_NAMES}
        for name in sorted(names - known):
            found = re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", source)
            line, column = _line_column(source, found.start()) if found else (None, None)
            errors.append({"message": unknown_variable_message(name), "line": line, "column": column, "code": "unknown_variable"})
    return {"ok": not errors, "errors": errors, "names": sorted(names)}


def validation_report(data: Any) -> dict[str, Any]:
    """What the builder shows for a spec (the API's validation response): ``{"valid",
    "errors", "warnings"}`` as :meth:`ValidationResult.as_dict`, plus ``handles`` (node
    id -> :func:`node_handles`), ``estimate`` (``runs.reports.estimate.estimate_by_node``;
    None when the document did not parse) and ``content_hash`` (what a publish of this
    spec would store, so the builder can tell whether its draft is the published version;
    None when the spec is invalid). Never raises for a bad spec."""
    result = validate_spec(data)
    report = result.as_dict()
    report["handles"] = result.handles
    report["estimate"] = estimate_by_node(estimate_spec(result.spec, result.configs)) if result.spec is not None else None
    # The same normalisation graph_publish applies before hashing.
    report["content_hash"] = (
        content_hash(result.spec.model_dump(mode="json", exclude_none=False)) if result.ok and result.spec is not None else None
    )
    return report
