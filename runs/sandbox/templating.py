"""Prompt and argument templates: parse and check Jinja2 templates, render them in the bounded sandbox environment."""
from __future__ import annotations

import functools
import json
import re
import sys
from ast import literal_eval as ast_literal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import Template, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.exceptions import SecurityError, TemplateAssertionError
from jinja2.visitor import NodeTransformer

from runs.sandbox.errors import ExpressionError, Fault, clip, describe
from runs.sandbox.expressions import evaluate, parse_expression
from runs.sandbox.guard import guarded
from runs.sandbox.jinja_env import COMPARE_HOOK, CONCAT_HOOK, ENV, GLOBAL_NAMES, LOOP_HOOK
from runs.sandbox.limits import MIB, Limits, effective_limits, isolation
from runs.sandbox.process import run_isolated
from runs.sandbox.snapshot import known_names_hint, snapshot, unknown_name_message

__all__ = ["TemplateError", "TEMPLATE_LIMITS", "MAX_TEMPLATE_CHARS", "render_inline", "render_template",
           "render_value", "template_names", "value_names"]

MAX_TEMPLATE_CHARS = 50_000  # longest template source accepted

# Output is capped at string_chars (200_000); every produced string is capped the same way.
# "iterations" counts loop steps and calls together, over the whole render; memory_bytes
# is above the 10 million characters budget allows at one byte each.
TEMPLATE_LIMITS = Limits(string_chars=200_000, items=100_000, iterations=100_000, budget=10_000_000,
                         memory_bytes=64 * MIB)


class TemplateError(ExpressionError):
    """A template that cannot be parsed, is not allowed, or failed to render (same codes as ExpressionError)."""


def _as_template_error(exc: ExpressionError) -> TemplateError:
    if isinstance(exc, TemplateError):
        return exc
    return TemplateError(exc.message, exc.code, source=exc.source, position=exc.position, name=exc.name)


# ---------------------------------------------------------------------------------------
# Parsing, checks and the rewrite

_FORBIDDEN_TAGS: dict[type[nodes.Node], str] = {
    nodes.Macro: "macros are not allowed",
    nodes.CallBlock: "call blocks are not allowed",
    nodes.Include: "include is not allowed",
    nodes.Import: "import is not allowed",
    nodes.FromImport: "import is not allowed",
    nodes.Extends: "extends is not allowed",
    nodes.Block: "blocks are not allowed",
    # Both collect output in a buffer that never reaches the streamed output count.
    nodes.FilterBlock: "filter blocks are not allowed; apply the filter to an expression",
    nodes.AssignBlock: "block assignments ({% set x %}...{% endset %}) are not allowed; use {% set x = ... %}",
}

# Output of names, attribute/item reads, constants, comparisons, conditions and a few
# filters that return at most their input: these renders are cheap, so they stay inline
# even when isolation is on.
_LINEAR_TEMPLATE_NODES = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.Name, nodes.Const,
                          nodes.Getattr, nodes.Getitem, nodes.If, nodes.Compare, nodes.Operand, nodes.And,
                          nodes.Or, nodes.Not, nodes.CondExpr, nodes.Test, nodes.Filter)
_LINEAR_FILTERS = frozenset({"default", "d", "lower", "upper", "trim", "title", "capitalize", "length", "count",
                             "first", "last", "string", "int", "float", "abs"})


class _Rewrite(NodeTransformer):
    """Refuses forbidden tags and routes loops, ~ and comparisons through the bounded environment hooks."""

    def generic_visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> nodes.Node:
        reason = _FORBIDDEN_TAGS.get(type(node))
        if reason is not None:
            raise TemplateError(f"{reason} (line {node.lineno})", "forbidden", position=(node.lineno, 1))
        return super().generic_visit(node, *args, **kwargs)

    def visit_For(self, node: nodes.For) -> nodes.Node:
        if node.recursive:
            raise TemplateError(f"recursive loops are not allowed (line {node.lineno})", "forbidden",
                                position=(node.lineno, 1))
        self.generic_visit(node)  # rewrites the children in place
        node.iter = nodes.Call(nodes.EnvironmentAttribute(LOOP_HOOK, lineno=node.lineno), [node.iter], [],
                               None, None, lineno=node.lineno)
        return node

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        self.generic_visit(node)
        args: list[nodes.Expr] = [node.expr]
        for operand in node.ops:
            args += [nodes.Const(operand.op, lineno=node.lineno), operand.expr]
        return nodes.Call(nodes.EnvironmentAttribute(COMPARE_HOOK, lineno=node.lineno), args, [], None, None,
                          lineno=node.lineno)

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.EnvironmentAttribute(CONCAT_HOOK, lineno=node.lineno), list(node.nodes), [],
                          None, None, lineno=node.lineno)


@dataclass(frozen=True)
class _Prepared:
    template: Template
    names: frozenset[str]
    linear: bool


def _syntax_error(exc: TemplateSyntaxError, source: str) -> TemplateError:
    if isinstance(exc, TemplateAssertionError) and exc.message and exc.message.startswith(("No filter", "No test")):
        return TemplateError(f"{exc.message.rstrip('.')} (line {exc.lineno}); available filters: "
                             f"{', '.join(sorted(ENV.filters))}", "forbidden", source=source,
                             position=(exc.lineno, 1))
    return TemplateError(f"template syntax error at line {exc.lineno}: {exc.message}", "syntax", source=source,
                         position=(exc.lineno, 1))


def _is_linear_template(tree: nodes.Template) -> bool:
    for node in tree.find_all(nodes.Node):
        if not isinstance(node, _LINEAR_TEMPLATE_NODES):
            return False
        if isinstance(node, nodes.Filter) and node.name not in _LINEAR_FILTERS:
            return False
    return True


@functools.lru_cache(maxsize=1024)
def _prepare_cached(source: str) -> _Prepared:
    try:
        tree = ENV.parse(source)
        names = frozenset(meta.find_undeclared_variables(tree)) - GLOBAL_NAMES  # compiles: finds bad filters
    except TemplateSyntaxError as exc:
        raise _syntax_error(exc, source) from None
    except RecursionError:
        raise TemplateError("template nests too deeply", "limit", source=source) from None
    linear = _is_linear_template(tree)
    try:
        tree = _Rewrite().visit(tree)
    except TemplateError as exc:
        exc.source = source
        raise
    tree.set_environment(ENV)
    try:
        template = ENV.from_string(tree)
    except TemplateSyntaxError as exc:
        raise _syntax_error(exc, source) from None
    return _Prepared(template, names, linear)


def _prepare(source: str) -> _Prepared:
    if not isinstance(source, str):
        raise TemplateError(f"a template must be a string, not {type(source).__name__}", "type")
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateError(f"template is {len(source)} characters long; the limit is {MAX_TEMPLATE_CHARS}",
                            "limit", source=source[:200])
    return _prepare_cached(source)


def template_names(source: str) -> frozenset[str]:
    """The variables ``source`` reads from the run state (jinja2.meta.find_undeclared_variables).

    Jinja globals (range, dict, cycler, joiner, namespace) are not counted. Raises
    :class:`TemplateError`: "syntax" (with the line), "forbidden" (macros, include/import/
    extends, blocks, filter and block-set blocks, recursive loops, filters not whitelisted),
    "limit" (longer than ``MAX_TEMPLATE_CHARS``).
    """
    return _prepare(source).names


# ---------------------------------------------------------------------------------------
# Rendering

_UNDEFINED_NAME = re.compile(r"^'([^']+)' is undefined$")


def _template_line(exc: BaseException) -> int | None:
    # jinja2 rewrites tracebacks so template frames carry the template's line numbers.
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


# Jinja's words for a key a dict lacks (StrictUndefined): "'dict object' has no attribute 'doc'"
# (``x.doc``) or "... has no element 'doc'" (``x['doc']``, ``x[3]``).
_MISSING_KEY = re.compile(r"^'?(?P<type>[^' ]+) object'? has no (?:attribute|element) (?P<key>.+)$")
_NO_PATH = object()
RUN_INPUT = "the run's input"


def _path_of(node: nodes.Node) -> list[Any] | None:
    """``input.doc['x']`` -> ["input", "doc", "x"]; None for anything but names and constant keys."""
    if isinstance(node, nodes.Name):
        return [node.name]
    if isinstance(node, nodes.Getattr):
        base = _path_of(node.node)
        return None if base is None else [*base, node.attr]
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        base = _path_of(node.node)
        return None if base is None else [*base, node.arg.value]
    return None


def _lookup(state: Mapping[str, Any], path: list[Any]) -> Any:
    value: Any = state
    for part in path:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return _NO_PATH
    return value


def _dotted(path: list[Any]) -> str:
    return "".join(p if i == 0 else f".{p}" if isinstance(p, str) and p.isidentifier() else f"[{p!r}]" for i, p in enumerate(path))


def _missing_key_reason(message: str, source: str, state: Mapping[str, Any]) -> str | None:
    """Jinja's "'dict object' has no attribute 'doc'" in the template's words: which value
    lacks which key, what that value holds, and what to do ("input has no key 'doc' (the
    run's input is {}); ..."). None when the template does not show where the key was read."""
    match = _MISSING_KEY.match(message)
    if not match:
        return None
    try:
        key: Any = ast_literal(match.group("key"))
        tree = ENV.parse(source)
    except (ValueError, SyntaxError, TemplateSyntaxError):
        return None
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            read: Any = node.attr
        elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
            read = node.arg.value
        else:
            continue
        base = _path_of(node.node)
        if read != key or base is None:
            continue
        held = _lookup(state, base)
        if held is _NO_PATH or (isinstance(held, dict) and key in held):
            continue
        where = _dotted(base)
        shown = f"{RUN_INPUT if base == ['input'] else where} is {clip(_json_text(held), 120)}"
        if not isinstance(held, (dict, list)):
            shown += ", not an object"
        fix = "start the run with an input that has it" if base[0] == "input" else f"make sure {where} has it before this step"
        optional = f"{{{{ {_dotted([*base, key])} | default('') }}}}"
        what = "item" if isinstance(held, list) else "key"
        return f"{where} has no {what} {key!r} ({shown}); {fix}, or write {optional} where it may be missing"
    return None


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _render_error(exc: BaseException, source: str, state: Mapping[str, Any]) -> TemplateError:
    line = _template_line(exc)
    at = f" (line {line})" if line else ""
    pos = (line, 1) if line else None
    name = None
    if isinstance(exc, UndefinedError):
        match = _UNDEFINED_NAME.match(str(exc))
        if match and match.group(1) not in state:
            name = match.group(1)
            # The state's keys are added by render_template ("... (known: a, b)").
            code, reason, at = "unknown_name", f"the template uses `{name}`{at}, which is not in the state", ""
        else:
            code, reason = "error", _missing_key_reason(str(exc), source, state) or f"undefined value: {clip(str(exc))}"
    elif isinstance(exc, SecurityError):
        code, reason = "forbidden", f"not allowed: {clip(str(exc))}"
    elif isinstance(exc, TemplateSyntaxError):
        return _syntax_error(exc, source)
    else:
        what = describe(exc)
        code, reason = what.code, what.reason
        if isinstance(exc, (RecursionError, MemoryError)) or reason.startswith(("exceeds", "took")):
            reason = "template " + reason  # "template exceeds the output limit ...", as for expressions
    return TemplateError(reason + at, code, source=source, position=pos, name=name)


def render_inline(source: str, state: dict[str, Any], limits: Limits) -> str:
    """Render ``source`` in this thread under ``limits``; ``state`` must already be a snapshot.

    The evaluator process runs this for each request (runs.sandbox.process.EVALUATORS).
    Raises TemplateError.
    """
    prepared = _prepare(source)
    try:
        with guarded(limits) as guard:
            out: list[str] = []
            total = 0
            for chunk in prepared.template.generate(state):
                total += len(chunk)
                guard.spend(len(chunk))
                guard.alloc(sys.getsizeof(chunk), "the output")
                if total > limits.string_chars:
                    raise Fault("limit", f"exceeds the output limit of {limits.string_chars} characters")
                guard.check_time()
                out.append(chunk)
            guard.alloc_str(total, *out)
            return "".join(out)
    except TemplateError:
        raise
    except ExpressionError as exc:
        raise _as_template_error(exc) from None
    except Exception as exc:
        raise _render_error(exc, source, state) from None


def render_template(source: str, names: Mapping[str, Any]) -> str:
    """Render the Jinja2 template ``source`` with the run state ``names``; return the text.

    Sandbox: ``jinja2.sandbox.ImmutableSandboxedEnvironment`` (no Python internals, no
    mutation of lists/dicts), ``StrictUndefined`` (an unknown variable is an error),
    autoescape off. The template sees a deep copy of the variables it reads (JSON values).
    Attributes: dict keys first (``order.items`` is the key when the dict has one), then
    the whitelisted str/dict/list methods of expressions. Filters: a whitelist (no
    padding, wrapping, formatting or batching filters). Limits, checked before an
    operation runs: ``+ * ** %`` and ``~`` as for expressions; output and any string at
    most ``TEMPLATE_LIMITS.string_chars`` (200_000) characters; ``range`` at most 100_000
    items; 100_000 loop steps and calls and 10_000_000 characters and items built per
    render; ``BALLAST_EXPRESSION_TIMEOUT`` seconds. Templates beyond plain output of
    names, conditions and simple filters render in the guarded evaluator process when
    ``BALLAST_EXPRESSION_ISOLATION = "process"`` (the default).
    Raises :class:`TemplateError` (codes as :class:`ExpressionError`).
    """
    prepared = _prepare(source)
    try:
        state = snapshot(prepared.names, names, source)
        limits = effective_limits(TEMPLATE_LIMITS)
        if not prepared.linear and isolation() == "process":
            return run_isolated("template", source, state, limits)
        return render_inline(source, state, limits)
    except ExpressionError as exc:
        err = _as_template_error(exc)
        if err.code == "unknown_name" and err.name is not None:
            err = TemplateError(f"{err.message} ({known_names_hint(names)})", "unknown_name", source=source,
                                position=err.position, name=err.name)
        raise err from None


# ---------------------------------------------------------------------------------------
# Values: argument dicts whose strings may be templates or whole-value expressions

_SINGLE_OUTPUT = re.compile(r"\s*\{\{[-+]?(?P<expr>.*?)[-+]?\}\}\s*", re.S)


@functools.lru_cache(maxsize=4096)
@dataclass(frozen=True)
class _Classified:
    kind: str  # "plain" (returned as is), "expr" (evaluated natively) or "template" (rendered)
    expression: str = ""  # the expression inside {{ }} when kind is "expr"


_PLAIN, _TEMPLATE = _Classified("plain"), _Classified("template")


def _classify(text: str) -> _Classified:
    """How :func:`render_value` treats one string."""
    if "{{" not in text and "{%" not in text and "{#" not in text:
        return _PLAIN
    match = _SINGLE_OUTPUT.fullmatch(text)
    if match is None:
        return _TEMPLATE
    inner = match.group("expr").strip()
    if not inner or "{{" in inner or "}}" in inner or "{%" in inner or "{#" in inner:
        return _TEMPLATE
    try:
        parsed = parse_expression(inner)
    except ExpressionError:
        return _TEMPLATE
    # Native evaluation only where Python and Jinja read the text alike: filters (|),
    # tests (is defined), ~ and lowercase true/none mean the author wrote Jinja.
    try:
        tree = ENV.parse(text)
    except TemplateSyntaxError:
        return _Classified("expr", inner)  # Python-only syntax, e.g. a comprehension
    if any(tree.find_all((nodes.Filter, nodes.Test, nodes.Concat))):
        return _TEMPLATE
    if not parsed.names <= frozenset(meta.find_undeclared_variables(tree)):
        return _TEMPLATE
    return _Classified("expr", inner)


def render_value(value: Any, names: Mapping[str, Any]) -> Any:
    """Render an argument value against the run state, recursively through dicts, lists and tuples.

    A string that is exactly one ``{{ expr }}`` (surrounding whitespace allowed) whose
    expression is Python syntax is evaluated with :func:`runs.sandbox.expressions.evaluate` and
    returns the native value (``"{{ order_id }}"`` gives the int). A string using Jinja-only
    syntax (``|filter``, ``is test``, ``~``, lowercase ``true``/``none``), or other text with
    ``{{``/``{%``, renders with :func:`render_template` to a string. Anything else is
    returned as is. Dict keys are not rendered.
    Raises :class:`ExpressionError` / :class:`TemplateError`.
    """
    if isinstance(value, str):
        how = _classify(value)
        if how.kind == "expr":
            try:
                return evaluate(how.expression, names)
            except ExpressionError as exc:
                # The user wrote a template ("{{ query }}"): say so, not "the expression `query`".
                if exc.code == "unknown_name" and exc.name is not None:
                    raise ExpressionError(unknown_name_message("the template", exc.name, names), "unknown_name",
                                          source=value, name=exc.name) from None
                raise
        if how.kind == "template":
            return render_template(value, names)
        return value
    if isinstance(value, dict):
        return {k: render_value(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, names) for v in value]
    if isinstance(value, tuple):
        return tuple(render_value(v, names) for v in value)
    return value


def value_names(value: Any) -> frozenset[str]:
    """The run-state variables :func:`render_value` would read from ``value`` (for validation).

    Raises :class:`TemplateError` or :class:`ExpressionError` on bad syntax or forbidden
    constructs, as rendering would.
    """
    if isinstance(value, str):
        how = _classify(value)
        if how.kind == "expr":
            return parse_expression(how.expression).names
        if how.kind == "template":
            return template_names(value)
        return frozenset()
    values: Iterable[Any]
    if isinstance(value, dict):
        values = value.values()
    elif isinstance(value, (list, tuple)):
        values = value
    else:
        return frozenset()
    out: frozenset[str] = frozenset()
    for v in values:
        out |= value_names(v)
    return out
