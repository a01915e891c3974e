"""What several node kinds share: the state-key pattern, the names expressions and templates see, and their checks."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

from runs.nodes.base import Issue, NodeContext
from runs.sandbox.expressions import ExpressionError, check_constant_parts, parse_expression
from runs.vocabulary import NodeError

# A key written by a node must be usable as a name in later expressions.
STATE_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def expression_names(ctx: NodeContext) -> Mapping[str, Any]:
    """The names an expression or template sees: the committed state plus ``input`` (the
    run input).

    A lazy view, not a copy: ``ctx.state`` copies a value only when it is read, and the
    expression and template evaluators read only the names they use, so a large state
    key that a node does not mention costs it nothing. Reading a name gives a private
    copy: expressions cannot change the run's state.
    """
    return _Names(ctx.state, ctx.run_input)


class _Names(Mapping[str, Any]):
    """The state, plus ``input`` (the run input) unless the state has a key of that name."""

    __slots__ = ("_state", "_input")

    def __init__(self, state: Mapping[str, Any], run_input: Mapping[str, Any]):
        self._state = state
        self._input = run_input

    def __getitem__(self, key: str) -> Any:
        if key in self._state:
            return self._state[key]
        if key == "input":
            return dict(self._input)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._state or key == "input"

    def __iter__(self) -> Iterator[str]:
        yield from self._state
        if "input" not in self._state:
            yield "input"

    def __len__(self) -> int:
        return len(self._state) + (0 if "input" in self._state else 1)


def check_expression(node_id: str, field: str, source: str, known_names: set[str]) -> list[Issue]:
    """Issues of one expression: ``invalid_expression`` when it does not parse (or breaks a
    static limit), ``expression_limit`` when a part made only of constants exceeds the
    evaluation limits (``runs.sandbox.expressions.check_constant_parts``), else one
    ``unknown_variable`` per name outside ``known_names`` (sorted)."""
    try:
        parsed = parse_expression(source)
    except ExpressionError as exc:
        return [Issue(node_id, field, f"invalid expression: {exc.message}", "invalid_expression")]
    try:
        check_constant_parts(source)
    except ExpressionError as exc:
        return [Issue(node_id, field, exc.message, "expression_limit")]
    issues = unknown_variables(node_id, field, parsed.names, known_names)
    if INPUT_KEYS_MARK in known_names and "input" in parsed.names:
        declared = {name[len(INPUT_KEY_PREFIX):] for name in known_names if name.startswith(INPUT_KEY_PREFIX)}
        issues.extend(
            Issue(node_id, field, undeclared_input_key_message(key), "undeclared_input_key")
            for key in sorted(input_keys_read(parsed.tree) - declared)
        )
    return issues


# Graph validation passes the input schema's declared keys to the kinds' checks inside
# ``known_names`` (which holds only identifiers otherwise) as "input.<key>", plus this mark
# saying it did, so a check called without them (a unit test, a kind's own check) stays quiet.
INPUT_KEY_PREFIX = "input."
INPUT_KEYS_MARK = "input.*"


def input_keys_read(tree: ast.AST) -> set[str]:
    """The run-input keys an expression reads by a constant name: ``input.x`` and
    ``input["x"]`` give ``{"x"}``. A comprehension variable named ``input`` is not told
    apart (expressions that shadow it are rare, and this only feeds a warning)."""
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "input":
            keys.add(node.attr)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "input"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            keys.add(node.slice.value)
    return keys


def undeclared_input_key_message(key: str) -> str:
    """The warning for ``input.<key>`` when the input schema does not declare ``key``: a run
    started with an input that lacks it (the run form's default ``{}``) fails at that node."""
    return (
        f"reads input.{key}, but the input schema does not declare '{key}': a run whose input lacks it fails here. "
        f"Add '{key}' to the input schema (Graph settings → Input schema), as required if every run needs it"
    )


def _templating() -> ModuleType:
    """runs.sandbox.templating, imported on first use."""
    # Imported here, not at module level: Jinja2 costs a restarted worker about 0.1 s of
    # CPU at start (every node kind imports this module), and a worker checks no template.
    from runs.sandbox import templating

    return templating


def check_template(node_id: str, field: str, source: str, known_names: set[str]) -> list[Issue]:
    """Issues of one template: ``invalid_template`` when it does not parse, else one
    ``unknown_variable`` per name outside ``known_names`` (sorted)."""
    try:
        names = _templating().template_names(source)
    except ExpressionError as exc:
        return [Issue(node_id, field, exc.message, "invalid_template")]
    return unknown_variables(node_id, field, names, known_names)


def check_template_values(
    node_id: str, prefix: str, values: Mapping[str, Any], known_names: set[str]
) -> tuple[list[Issue], dict[str, set[str] | None]]:
    """Check a mapping of values that may hold templates (a tool's ``args``, a called
    graph's ``input``), each under ``{prefix}.{key}``: ``invalid_template`` for a value that
    does not parse, else one ``unknown_variable`` per name outside ``known_names``.

    Returns the issues and, per key, the names its templates read (None where it did not parse).
    """
    value_names = _templating().value_names
    issues: list[Issue] = []
    read: dict[str, set[str] | None] = {}
    for key, value in values.items():
        field = f"{prefix}.{key}"
        try:
            names = set(value_names(value))
        except ExpressionError as exc:
            issues.append(Issue(node_id, field, exc.message, code="invalid_template"))
            read[key] = None
            continue
        read[key] = names
        issues.extend(unknown_variables(node_id, field, names, known_names))
    return issues, read


def render_template_values(prefix: str, values: Mapping[str, Any], names: Mapping[str, Any]) -> dict[str, Any]:
    """Render each value of ``values`` (templates, or plain values) against ``names``, one
    key at a time so an error names its field.

    Raises NodeError ``template`` (not retryable) as ``{prefix}.{key}: message``, with
    ``details.error_code`` the expression error's code.
    """
    render_value = _templating().render_value
    rendered: dict[str, Any] = {}
    for key, value in values.items():
        try:
            rendered[key] = render_value(value, names)
        except ExpressionError as exc:
            raise NodeError(f"{prefix}.{key}: {exc.message}", code="template", retryable=False, details={"error_code": exc.code}) from exc
    return rendered


def unknown_variable_message(name: str) -> str:
    """The message for a name an expression or template uses that the graph never defines,
    saying how to fix it: expressions see the state's keys and ``input`` (the run input)."""
    return f"unknown variable '{name}': declare '{name}' in Graph settings → State keys, or use input.{name}"


def unknown_variables(node_id: str, field: str, names: Iterable[str], known_names: set[str]) -> list[Issue]:
    """One ``unknown_variable`` issue per name of ``names`` outside ``known_names`` (sorted)."""
    return [
        Issue(node_id, field, unknown_variable_message(name), "unknown_variable") for name in sorted(set(names) - known_names)
    ]
