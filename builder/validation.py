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

Warnings (``ValidationResult.warnings``) never block a run. There are four:
``unused_reducer``: a non-replace reducer declared on a state key that no node writes. It
changes nothing at run time, so it is not an error; it is usually a typo of a key name,
which the builder should point out. ``undeclared_input_key``: an expression reads
``input.x`` (or ``input["x"]``) but the input schema does not declare ``x``; a run whose
input has no ``x`` fails at that node, but a caller may still pass it. ``unsafe_retry``:
a node not safe to repeat with both a retry policy and ``timeout_seconds``: a timeout
parks it for a person rather than retrying it (runs.engine.store.commit.step_fail), which a
builder who set the policy may not expect. ``retry_not_applied``: a retry policy on a node
kind whose wait it does not cover (``NodeKind.retries_wait``: a call-graph node's failed
child run fails the step).

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
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from builder.graph_calls import call_issues
from builder.graph_checks import INPUT_NAME, GraphCheck, all_handles, kind_handles
from builder.issues import (
    LocatedIssue,
    ValidationResult,
    index_of_nodes,
    located,
    non_finite_issues,
    sorted_issues,
    spec_issues,
)
from graphs.spec import GraphSpec, content_hash, spec_json_schema
from runs.nodes import all_kinds
from runs.nodes.shared import unknown_variable_message
from runs.reports.estimate import estimate_by_node, estimate_spec
from runs.sandbox.expressions import FUNCTION_NAMES, ExpressionError, parse_expression
from runs.sandbox.templating import template_names


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
        numbers = non_finite_issues(data)
        if numbers:
            # The document cannot be stored (JSON has no Infinity or NaN), so nothing else
            # is worth checking until these are fixed.
            return ValidationResult(spec=None, issues=located(sorted_issues(numbers), index_of_nodes(data.get("nodes"))))
        try:
            spec = GraphSpec.model_validate(data)
        except ValidationError as exc:
            raw_nodes = data.get("nodes")
            raw_nodes = [n for n in raw_nodes if isinstance(n, dict)] if isinstance(raw_nodes, list) else []
            index = index_of_nodes(data.get("nodes"))
            issues = spec_issues(exc, data)
            repaired = _repaired_spec(data, exc)
            if repaired is not None:
                # Report the graph's other errors in the same pass (a malformed node id
                # must not hide them); the result still has spec None: it cannot run.
                spec, quiet, edges_dropped = repaired
                check = GraphCheck(spec, quiet_nodes=quiet, edges_dropped=edges_dropped)
                checked = check.run()
                issues = [*issues, *checked.issues]
                return ValidationResult(
                    spec=None, issues=located(sorted_issues(issues), index), warnings=checked.warnings,
                    handles=all_handles(raw_nodes),
                )
            return ValidationResult(spec=None, issues=located(sorted_issues(issues), index), handles=all_handles(raw_nodes))
    return GraphCheck(spec).run()


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


def validation_report(data: Any, *, user: Any = None) -> dict[str, Any]:
    """What the builder shows for a spec (the API's validation response): ``{"valid",
    "errors", "warnings"}`` as :meth:`ValidationResult.as_dict`, plus ``handles`` (node
    id -> :func:`node_handles`), ``estimate`` (``runs.reports.estimate.estimate_by_node``;
    None when the document did not parse) and ``content_hash`` (what a publish of this
    spec would store, so the builder can tell whether its draft is the published version;
    None when the spec is invalid). ``user``: who asks, for the checks of its calls to
    other graphs (builder.graph_calls, which read the database; the graph the spec names,
    when it exists, is the caller a cycle would lead back to). Never raises for a bad spec."""
    result = validate_spec(data)
    if result.spec is not None:
        calls = call_issues(result.spec, graph_id=None, user=user if getattr(user, "pk", None) is not None else None)
        if calls:
            result.issues.extend(calls)
    report = result.as_dict()
    report["handles"] = result.handles
    report["estimate"] = estimate_by_node(estimate_spec(result.spec, result.configs)) if result.spec is not None else None
    # The same normalisation graph_publish applies before hashing.
    report["content_hash"] = (
        content_hash(result.spec.model_dump(mode="json", exclude_none=False)) if result.ok and result.spec is not None else None
    )
    return report
