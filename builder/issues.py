"""Validation issues of a graph spec: where each points (node, field, path from the spec root),
the result of a validation, and pydantic errors turned into issues (pure: no database)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from core.fields import field_path
from graphs.spec import GraphSpec, NodeSpec
from runs.nodes.base import Issue, NodeConfig
from runs.sandbox.values import non_finite_locations, non_finite_message


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


def index_of_nodes(nodes: Any) -> dict[str, int]:
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


def located(issues: Iterable[Issue], node_index: dict[str, int]) -> list[LocatedIssue]:
    return [
        LocatedIssue(i.node_id, i.field, i.message, i.code, issue_path(i, node_index)) for i in issues
    ]


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


def spec_issues(exc: ValidationError, data: dict[str, Any]) -> list[Issue]:
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


def non_finite_issues(data: dict[str, Any]) -> list[Issue]:
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


def config_issues(node_id: str, exc: ValidationError) -> list[Issue]:
    """Issues for a node config that does not match its kind's Config (field config.<path>)."""
    return [
        Issue(node_id, field_path(err.get("loc", ()), "config"), _message(err), "invalid_config") for err in exc.errors()
    ]


def _natural(text: str) -> list[Any]:
    """Sort key that orders embedded numbers by value (edges[2] before edges[10])."""
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", text))]


def sorted_issues(issues: Iterable[Issue]) -> list[Issue]:
    """Unique issues in a stable order: graph-level first, then by node id, field, code, message."""
    unique = dict.fromkeys(issues)
    return sorted(
        unique,
        key=lambda i: (i.node_id is not None, _natural(i.node_id or ""), _natural(i.field), i.code, i.message),
    )


