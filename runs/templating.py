"""Prompt and argument templates: Jinja2's immutable sandbox with size, loop and time limits."""
from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.exceptions import SecurityError, TemplateAssertionError
from jinja2.filters import do_round, do_sum
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from runs.expressions import (
    _DICT_METHODS,
    _GUARD,
    _SEQ_METHODS,
    _STR_METHODS,
    ExpressionError,
    Limits,
    _Fault,
    _fn_range,
    _Guard,
    _guard,
    _isolation,
    _known_names_hint,
    _limits,
    _run_isolated,
    _snapshot,
    _str_join,
    _str_replace,
    evaluate,
    parse_expression,
)

__all__ = ["TemplateError", "TEMPLATE_LIMITS", "MAX_TEMPLATE_CHARS", "render_template", "render_value",
           "template_names", "value_names"]

MAX_TEMPLATE_CHARS = 50_000  # longest template source accepted

# Output is capped at string_chars (200_000); every produced string is capped the same way.
# "iterations" counts loop steps and calls together, over the whole render.
TEMPLATE_LIMITS = Limits(string_chars=200_000, items=100_000, iterations=100_000, budget=10_000_000)


class TemplateError(ExpressionError):
    """A template that cannot be parsed, is not allowed, or failed to render (same codes as ExpressionError)."""


def _as_template_error(exc: ExpressionError) -> TemplateError:
    if isinstance(exc, TemplateError):
        return exc
    return TemplateError(exc.message, exc.code, source=exc.source, position=exc.position, name=exc.name)


# ---------------------------------------------------------------------------------------
# The environment

class _BoundMethod:
    """A whitelisted method bound to its receiver; its fields are private to the sandbox."""

    __slots__ = ("_fn", "_obj", "_name")

    def __init__(self, fn, obj, name) -> None:
        self._fn, self._obj, self._name = fn, obj, name

    def __call__(self, *args, **kwargs):
        return self._fn(self._obj, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<method {self._name}>"


def _method_table(obj: Any) -> dict[str, Any] | None:
    if isinstance(obj, str):
        return _STR_METHODS
    if isinstance(obj, dict):
        return _DICT_METHODS
    if isinstance(obj, (list, tuple)):
        return _SEQ_METHODS
    if isinstance(obj, (int, float)):
        return {}
    return None


def _finalize(value: Any) -> Any:
    # Every {{ }} goes through here before str(): refuse text that would be too long
    # (['x' * 100000] * 1000 is 1001 items but 100 million characters).
    if type(value) is not str:
        g = _guard()
        g.check_chars(g.measure(value)[1])
    return value


class _Environment(ImmutableSandboxedEnvironment):
    """ImmutableSandboxedEnvironment whose operators, attributes, calls and loops are bounded.

    Hooks used (jinja2 sandbox docs): ``intercepted_binops``/``call_binop``, ``getattr``,
    ``getitem``, ``call``; plus two environment attributes the parsed tree is rewritten to
    call (``ballast_loop`` around every for-loop iterable, ``ballast_concat`` for ``~``).
    """

    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def call_binop(self, context, operator, left, right):
        g = _guard()
        g.check_time()
        if operator == "+":
            return g.add(left, right)
        if operator == "*":
            return g.mul(left, right)
        if operator == "**":
            return g.pow(left, right)
        return g.mod(left, right)

    def getattr(self, obj, attribute):
        table = _method_table(obj)
        if table is None:  # Jinja's own objects (loop, cycler, namespace, Undefined ...)
            return super().getattr(obj, attribute)
        if attribute.startswith("_"):
            return self.unsafe_undefined(obj, attribute)
        # Data first: run state is JSON, and `order.items` should be the key, not dict.items.
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]
        fn = table.get(attribute)
        if fn is not None:
            return _BoundMethod(fn, obj, attribute)
        if hasattr(type(obj), attribute):  # str.format, list.append ...: not whitelisted
            return self.unsafe_undefined(obj, attribute)
        return self.undefined(obj=obj, name=attribute)

    def getitem(self, obj, argument):
        if _method_table(obj) is None:
            return super().getitem(obj, argument)
        try:
            return obj[argument]
        except (TypeError, LookupError):
            pass
        if isinstance(argument, str):  # Jinja falls back from item to attribute
            return self.getattr(obj, argument)
        return self.undefined(obj=obj, name=argument)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (Jinja's own signature)
        _guard().step(what="loop steps and calls")
        return super().call(__context, __obj, *args, **kwargs)

    def ballast_loop(self, iterable):
        g = _guard()
        for item in iterable:
            g.step(what="loop steps and calls")
            yield item

    def ballast_concat(self, *parts):
        g = _guard()
        total = 0
        out = []
        for part in parts:
            text = g.text(part)
            total += len(text)
            g.check_chars(total)
            out.append(text)
        return "".join(out)


def _stringifies(fn):
    """Filters that str() their input: refuse input whose text would be too long."""

    value_at = 0 if getattr(fn, "jinja_pass_arg", None) is None else 1  # after env/context, if passed

    @functools.wraps(fn)  # keeps jinja_pass_arg
    def wrapper(*args, **kwargs):
        _finalize(args[value_at])
        return fn(*args, **kwargs)

    return wrapper


def _bounded_list(value: Any, what: str) -> list:
    """Materialise a filter's input; other filters' generators are cut off past the limit."""
    g = _guard()
    if isinstance(value, (str, list, tuple, dict, range, set)):
        g.check_iterable(value, what)
        return list(value)
    try:
        items = list(itertools.islice(iter(value), g.limits.items + 1))
    except TypeError:
        raise _Fault("type", f"{what} needs a list, not a {type(value).__name__}") from None
    g.check_items(len(items), f"the input of {what}")
    return items


def _filter_join(value, d="", attribute=None):
    g = _guard()
    items = _bounded_list(value, "join")
    if attribute is not None:
        items = [_ENV.getitem(x, attribute) for x in items]
    return _str_join(str(d), [g.text(x) for x in items])


def _filter_replace(s, old, new, count=None):
    return _str_replace(_guard().text(s), str(old), str(new), -1 if count is None else count)


def _filter_tojson(value, indent=None):
    g = _guard()
    g.check_chars(g.measure(value)[1] * (2 if indent else 1))
    if indent is not None and (not isinstance(indent, int) or not 0 <= indent <= 8):
        raise _Fault("limit", "tojson indent must be between 0 and 8")
    out = json.dumps(value, ensure_ascii=False, indent=indent, default=str)
    g.check_chars(len(out))
    return out


def _filter_round(value, precision=0, method="common"):
    # do_round computes 10**precision for ceil/floor: bound it first.
    if not isinstance(precision, int) or abs(precision) > 300:
        raise _Fault("limit", "round precision must be between -300 and 300")
    return do_round(value, precision, method)


def _filter_sum(environment, iterable, attribute=None, start=0):
    # Numbers only: sum(lists, start=[]) is quadratic.
    if not isinstance(start, (int, float)):
        raise _Fault("type", "sum adds numbers only")
    g = _guard()
    result = do_sum(environment, _bounded_list(iterable, "sum"), attribute=attribute, start=start)
    if isinstance(result, int):
        g.check_bits(result.bit_length())
    return result


_filter_sum.jinja_pass_arg = do_sum.jinja_pass_arg  # type: ignore[attr-defined]

# Filters that pad, wrap, format or repeat (center, indent, wordwrap, format, batch,
# slice, filesizeformat, xmlattr, urlize, pprint, random, attr, escape/safe) are absent.
_SAFE_FILTERS = ("abs", "count", "d", "default", "dictsort", "first", "float", "groupby", "int", "items", "last",
                 "length", "list", "map", "max", "min", "reject", "rejectattr", "reverse", "select", "selectattr",
                 "sort", "unique")
_STRINGIFYING_FILTERS = ("capitalize", "lower", "string", "title", "trim", "truncate", "upper", "urlencode",
                         "wordcount")
# The lower/upper tests str() their argument; the rest only compare or inspect.
_UNSAFE_TESTS = ("lower", "upper")


def _make_environment() -> _Environment:
    env = _Environment(undefined=StrictUndefined, autoescape=False, finalize=_finalize, cache_size=0)
    defaults = env.filters
    env.filters = {name: defaults[name] for name in _SAFE_FILTERS}
    env.filters.update({name: _stringifies(defaults[name]) for name in _STRINGIFYING_FILTERS})
    env.filters.update(join=_filter_join, replace=_filter_replace, tojson=_filter_tojson, round=_filter_round,
                       sum=_filter_sum)
    for name in _UNSAFE_TESTS:
        env.tests.pop(name, None)
    env.globals.pop("lipsum", None)  # lipsum(10**9) generates text inside one call
    env.globals["range"] = _fn_range
    return env


_ENV = _make_environment()
_GLOBAL_NAMES = frozenset(_ENV.globals)


# ---------------------------------------------------------------------------------------
# Parsing, checks and the rewrite

_FORBIDDEN_TAGS = {
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
    """Refuses forbidden tags and routes loops and ~ through the bounded environment hooks."""

    def generic_visit(self, node, *args, **kwargs):
        reason = _FORBIDDEN_TAGS.get(type(node))
        if reason is not None:
            raise TemplateError(f"{reason} (line {node.lineno})", "forbidden", position=(node.lineno, 1))
        return super().generic_visit(node, *args, **kwargs)

    def visit_For(self, node: nodes.For) -> nodes.Node:
        if node.recursive:
            raise TemplateError(f"recursive loops are not allowed (line {node.lineno})", "forbidden",
                                position=(node.lineno, 1))
        node = self.generic_visit(node)
        node.iter = nodes.Call(nodes.EnvironmentAttribute("ballast_loop", lineno=node.lineno), [node.iter], [],
                               None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        node = self.generic_visit(node)
        return nodes.Call(nodes.EnvironmentAttribute("ballast_concat", lineno=node.lineno), list(node.nodes), [],
                          None, None, lineno=node.lineno)


@dataclass(frozen=True)
class _Prepared:
    template: Any
    names: frozenset[str]
    linear: bool


def _syntax_error(exc: TemplateSyntaxError, source: str) -> TemplateError:
    if isinstance(exc, TemplateAssertionError) and exc.message and exc.message.startswith(("No filter", "No test")):
        return TemplateError(f"{exc.message.rstrip('.')} (line {exc.lineno}); available filters: "
                             f"{', '.join(sorted(_ENV.filters))}", "forbidden", source=source,
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
        tree = _ENV.parse(source)
        names = frozenset(meta.find_undeclared_variables(tree)) - _GLOBAL_NAMES  # compiles: finds bad filters
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
    tree.set_environment(_ENV)
    try:
        template = _ENV.from_string(tree)
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


def _render_error(exc: BaseException, source: str, state: Mapping[str, Any]) -> TemplateError:
    line = _template_line(exc)
    at = f" (line {line})" if line else ""
    pos = (line, 1) if line else None
    name = None
    if isinstance(exc, _Fault):
        code, reason = exc.code, exc.reason
        if reason.startswith(("exceeds", "took")):
            reason = "template " + reason
    elif isinstance(exc, UndefinedError):
        match = _UNDEFINED_NAME.match(str(exc))
        if match and match.group(1) not in state:
            name = match.group(1)
            code, reason = "unknown_name", f"unknown variable `{name}` in template"
        else:
            code, reason = "error", f"undefined value: {exc}"
    elif isinstance(exc, SecurityError):
        code, reason = "forbidden", f"not allowed: {exc}"
    elif isinstance(exc, TemplateSyntaxError):
        return _syntax_error(exc, source)
    elif isinstance(exc, TypeError):
        code, reason = "type", str(exc)
    elif isinstance(exc, ZeroDivisionError):
        code, reason = "error", "division by zero"
    elif isinstance(exc, OverflowError):
        code, reason = "limit", f"number too large ({exc})"
    elif isinstance(exc, RecursionError):
        code, reason = "limit", "template nests too deeply"
    elif isinstance(exc, MemoryError):
        code, reason = "memory", "template ran out of memory"
    else:
        code, reason = "error", f"{type(exc).__name__}: {exc}"
    return TemplateError(reason + at, code, source=source, position=pos, name=name)


def _render_inline(source: str, state: dict[str, Any], limits: Limits) -> str:
    """Render in this thread; ``state`` must already be a private snapshot."""
    prepared = _prepare(source)
    guard = _Guard(limits)
    token = _GUARD.set(guard)
    try:
        out: list[str] = []
        total = 0
        for chunk in prepared.template.generate(state):
            total += len(chunk)
            guard.spend(len(chunk))
            if total > limits.string_chars:
                raise _Fault("limit", f"exceeds the output limit of {limits.string_chars} characters")
            guard.check_time()
            out.append(chunk)
        return "".join(out)
    except TemplateError:
        raise
    except ExpressionError as exc:
        raise _as_template_error(exc) from None
    except Exception as exc:
        raise _render_error(exc, source, state) from None
    finally:
        _GUARD.reset(token)


def _template_limits() -> Limits:
    return _limits(TEMPLATE_LIMITS)


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
        state = _snapshot(prepared.names, names, source)
        limits = _template_limits()
        if not prepared.linear and _isolation() == "process":
            return _run_isolated("template", source, state, limits)
        return _render_inline(source, state, limits)
    except ExpressionError as exc:
        err = _as_template_error(exc)
        if err.code == "unknown_name" and err.name is not None:
            err = TemplateError(f"{err.message}; {_known_names_hint(names)}", "unknown_name", source=source,
                                position=err.position, name=err.name)
        raise err from None


# ---------------------------------------------------------------------------------------
# Values: argument dicts whose strings may be templates or whole-value expressions

_SINGLE_OUTPUT = re.compile(r"\s*\{\{[-+]?(?P<expr>.*?)[-+]?\}\}\s*", re.S)


@functools.lru_cache(maxsize=4096)
def _classify(text: str) -> tuple[str, str | None]:
    """("plain", None), ("expr", inner expression) or ("template", None) for one string."""
    if "{{" not in text and "{%" not in text and "{#" not in text:
        return "plain", None
    match = _SINGLE_OUTPUT.fullmatch(text)
    if match is None:
        return "template", None
    inner = match.group("expr").strip()
    if not inner or "{{" in inner or "}}" in inner or "{%" in inner or "{#" in inner:
        return "template", None
    try:
        parsed = parse_expression(inner)
    except ExpressionError:
        return "template", None
    # Native evaluation only where Python and Jinja read the text alike: filters (|),
    # tests (is defined), ~ and lowercase true/none mean the author wrote Jinja.
    try:
        tree = _ENV.parse(text)
    except TemplateSyntaxError:
        return "expr", inner  # Python-only syntax, e.g. a comprehension
    if any(tree.find_all((nodes.Filter, nodes.Test, nodes.Concat))):
        return "template", None
    if not parsed.names <= frozenset(meta.find_undeclared_variables(tree)):
        return "template", None
    return "expr", inner


def render_value(value: Any, names: Mapping[str, Any]) -> Any:
    """Render an argument value against the run state, recursively through dicts, lists and tuples.

    A string that is exactly one ``{{ expr }}`` (surrounding whitespace allowed) whose
    expression is Python syntax is evaluated with :func:`runs.expressions.evaluate` and
    returns the native value (``"{{ order_id }}"`` gives the int). A string using Jinja-only
    syntax (``|filter``, ``is test``, ``~``, lowercase ``true``/``none``), or other text with
    ``{{``/``{%``, renders with :func:`render_template` to a string. Anything else is
    returned as is. Dict keys are not rendered.
    Raises :class:`ExpressionError` / :class:`TemplateError`.
    """
    if isinstance(value, str):
        kind, inner = _classify(value)
        if kind == "expr":
            return evaluate(inner, names)
        if kind == "template":
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
        kind, inner = _classify(value)
        if kind == "expr":
            return parse_expression(inner).names
        if kind == "template":
            return template_names(value)
        return frozenset()
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
