"""The expression language of conditions and transforms: parse, check the names it reads, evaluate.

A Python expression (``ast.parse(mode="eval")``) narrowed to a whitelist of node types,
functions and methods, evaluated by our own tree walker (runs.sandbox.walker) against a
JSON snapshot of the run state, with every operation that could build a large value
checked before it runs (runs.sandbox.guard) and the evaluator process as the backstop
(runs.sandbox.process). TRAPS.md "simpleeval blocks code execution, not resource
exhaustion" says why each of those exists.
"""
from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runs.sandbox.errors import ExpressionError, clip
from runs.sandbox.guard import guarded, range_item_bytes, seq_bytes
from runs.sandbox.limits import LIMITS, Limits, effective_limits, isolation
from runs.sandbox.process import run_isolated
from runs.sandbox.snapshot import snapshot, unknown_name_message
from runs.sandbox.walker import Walker
from runs.sandbox.whitelist import FUNCTION_NAMES, FUNCTIONS, METHOD_NAMES

# ExpressionError, Limits, LIMITS, FUNCTION_NAMES and METHOD_NAMES live in runs.sandbox
# (templates share them) and are part of this module's public API too.
__all__ = [
    "ExpressionError",
    "FUNCTION_NAMES",
    "METHOD_NAMES",
    "Limits",
    "LIMITS",
    "ParsedExpression",
    "check_constant_parts",
    "evaluate",
    "evaluate_inline",
    "parse_expression",
]

MAX_SOURCE_CHARS = 2000  # longest expression accepted by parse_expression
MAX_DEPTH = 50  # deepest syntax-tree nesting accepted by parse_expression


# ---------------------------------------------------------------------------------------
# Parsing and static checks

@dataclass(frozen=True)
class ParsedExpression:
    """A parsed, checked expression: ``names`` are the free variables it reads from the state."""

    source: str
    names: frozenset[str]
    text: str  # the source as parsed (stripped); node positions refer to it
    tree: ast.expr
    # True when every node is one whose cost is at most linear in the expression and the
    # data it reads (see _LINEAR_NODES): such expressions skip the evaluator process.
    linear: bool = False

    def __repr__(self) -> str:
        return f"ParsedExpression({self.source!r}, names={sorted(self.names)!r})"


_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift", ast.RShift: "rshift", ast.BitOr: "bitor",
    ast.BitXor: "xor", ast.BitAnd: "and_",
}
_FORBIDDEN_NODES = {
    ast.Lambda: "lambda functions are not allowed",
    ast.NamedExpr: "assignment expressions (:=) are not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
    ast.YieldFrom: "yield is not allowed",
    ast.MatMult: "the @ operator is not allowed",
}
_ALLOWED_NODES = frozenset({
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Store, ast.BinOp, ast.UnaryOp, ast.BoolOp,
    ast.Compare, ast.IfExp, ast.Call, ast.keyword, ast.Attribute, ast.Subscript, ast.Slice, ast.List,
    ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.comprehension,
    ast.Starred, ast.JoinedStr, ast.FormattedValue,
    ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Invert,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
    *_BINOPS,
})


class _Checker:
    """Walks a parsed tree once: refuses what is not allowed and collects the free names."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.names: set[str] = set()

    def fail(self, node: ast.AST, code: str, reason: str) -> ExpressionError:
        if isinstance(node, (ast.expr, ast.keyword)):  # the nodes that carry a position
            seg, pos = ast.get_source_segment(self.text, node), (node.lineno, node.col_offset + 1)
        else:
            seg, pos = None, None
        return ExpressionError(f"{reason} in `{clip(seg or self.text)}`", code, source=self.text, position=pos)

    def check(self, node: ast.AST, bound: frozenset[str]) -> None:
        t = type(node)
        if t not in _ALLOWED_NODES:
            reason = _FORBIDDEN_NODES.get(t) or f"{t.__name__} is not allowed in expressions"
            raise self.fail(node, "forbidden", reason)
        # ast.parse builds exact node types, so isinstance here means the same as `t is`.
        if isinstance(node, ast.Constant):
            self._constant(node)
        elif isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                raise self.fail(node, "forbidden", "assignment is not allowed")
            if node.id not in bound:
                self.names.add(node.id)
        elif isinstance(node, ast.Call):
            self._call(node, bound)
        elif isinstance(node, ast.Attribute):
            self._attr_name(node, node.attr)
            self.check(node.value, bound)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            self._comprehension(node, bound)
        elif isinstance(node, ast.FormattedValue):
            self.check(node.value, bound)
            if node.format_spec is not None:
                self.check(node.format_spec, bound)
        elif isinstance(node, ast.Starred) and not isinstance(node.ctx, ast.Load):
            raise self.fail(node, "forbidden", "starred assignment is not allowed")
        else:
            for child in ast.iter_child_nodes(node):
                self.check(child, bound)

    def _constant(self, node: ast.Constant) -> None:
        v = node.value
        if type(v) is int and v.bit_length() > LIMITS.int_bits:
            raise self.fail(node, "limit", f"integer literal exceeds the integer size limit of {LIMITS.int_bits} bits")
        if not (v is None or type(v) in (str, int, float, bool)):
            raise self.fail(node, "forbidden", f"{type(v).__name__} literals are not allowed")

    def _attr_name(self, node: ast.AST, attr: str) -> None:
        if attr.startswith("_"):
            raise self.fail(node, "forbidden",
                            f"access to `{attr}` is not allowed (names starting with '_' are private)")

    def _call(self, node: ast.Call, bound: frozenset[str]) -> None:
        func = node.func
        if type(func) is ast.Name:
            if func.id not in FUNCTIONS or func.id in bound:
                raise self.fail(node, "forbidden",
                                f"unknown function `{func.id}()`; available functions: {', '.join(sorted(FUNCTIONS))}")
        elif type(func) is ast.Attribute:
            self._attr_name(func, func.attr)
            if func.attr not in METHOD_NAMES:
                raise self.fail(node, "forbidden",
                                f"method `.{func.attr}()` is not allowed; available methods: "
                                f"{', '.join(sorted(METHOD_NAMES))}")
            self.check(func.value, bound)
        else:
            raise self.fail(node, "forbidden", "only named functions and methods can be called")
        for arg in node.args:
            if type(arg) is ast.Starred:
                raise self.fail(arg, "forbidden", "*arguments are not allowed in calls")
            self.check(arg, bound)
        for kw in node.keywords:
            if kw.arg is None:
                raise self.fail(kw.value, "forbidden", "**arguments are not allowed in calls")
            self.check(kw.value, bound)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
                       bound: frozenset[str]) -> None:
        inner = bound
        for i, gen in enumerate(node.generators):
            if gen.is_async:
                raise self.fail(node, "forbidden", "async comprehensions are not allowed")
            # The first iterable is evaluated outside the comprehension's scope.
            self.check(gen.iter, bound if i == 0 else inner)
            inner = inner | self._targets(gen.target)
            for cond in gen.ifs:
                self.check(cond, inner)
        if isinstance(node, ast.DictComp):
            self.check(node.key, inner)
            self.check(node.value, inner)
        else:
            self.check(node.elt, inner)

    def _targets(self, target: ast.AST) -> frozenset[str]:
        if isinstance(target, ast.Name):
            return frozenset({target.id})
        if isinstance(target, (ast.Tuple, ast.List)):
            out: frozenset[str] = frozenset()
            for elt in target.elts:
                out |= self._targets(elt)
            return out
        raise self.fail(target, "forbidden", "a comprehension can only bind plain names")


@functools.lru_cache(maxsize=4096)
def _parse_cached(source: str) -> ParsedExpression:
    text = source.strip()
    if not text:
        raise ExpressionError("expression is empty", "syntax", source=source)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        line, col, msg = exc.lineno or 1, exc.offset or 0, exc.msg
        if col <= 0:  # Python points nowhere when the input just stops
            lines = text.splitlines() or [""]
            line, col = len(lines), len(lines[-1]) + 1
            msg = "unexpected end of expression"
        raise ExpressionError(
            f"syntax error at line {line}, column {col}: {msg} in `{clip(text)}`",
            "syntax", source=source, position=(line, col),
        ) from None
    except (ValueError, TypeError) as exc:  # e.g. null bytes
        raise ExpressionError(f"syntax error: {clip(str(exc))}", "syntax", source=source) from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"expression nests too deeply (the limit is {MAX_DEPTH} levels)", "limit",
                              source=source) from None
    # Depth first and without recursion: the checker and evaluator below recurse.
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(f"expression nests deeper than the limit of {MAX_DEPTH} levels", "limit",
                                  source=source)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    checker = _Checker(text)
    checker.check(tree.body, frozenset())
    return ParsedExpression(source=source, names=frozenset(checker.names), text=text, tree=tree.body,
                            linear=_is_linear(tree.body))


# Reads, comparisons, boolean logic, plain arithmetic (each bounded by a one-line check on
# its operands) and calls that cannot allocate more than their input. An expression made
# only of these costs O(len(expression) x size of what it reads) in time and memory, so it
# cannot exhaust anything even if a check were wrong. Everything else (**, <<,
# comprehensions, f-strings, growing methods, functions that build collections) goes to
# the evaluator process when isolation is on.
_LINEAR_NODES = frozenset({
    ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.Slice, ast.Compare, ast.BoolOp,
    ast.UnaryOp, ast.IfExp, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.BinOp, ast.Call, ast.keyword,
    ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Invert,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod,
})
_LINEAR_FUNCTIONS = frozenset({"len", "bool", "abs", "float"})
_LINEAR_METHODS = frozenset({
    "get", "keys", "values", "items", "lower", "upper", "strip", "lstrip", "rstrip", "startswith", "endswith",
    "count", "find", "index", "isdigit", "isalpha", "isalnum", "isspace", "removeprefix", "removesuffix",
})


def _is_linear(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if type(node) not in _LINEAR_NODES:
            return False
        if isinstance(node, ast.Call):  # the checker allows calls of names and methods only
            func = node.func
            if isinstance(func, ast.Name):
                if func.id not in _LINEAR_FUNCTIONS:
                    return False
            elif not isinstance(func, ast.Attribute) or func.attr not in _LINEAR_METHODS:
                return False
        elif isinstance(node, ast.Dict) and None in node.keys:
            return False
    return True


def parse_expression(source: str) -> ParsedExpression:
    """Parse ``source`` and check that it is allowed, without evaluating it (cached).

    Returns a :class:`ParsedExpression` whose ``names`` are the variables it reads
    (calls of whitelisted functions and comprehension variables excluded).
    Raises :class:`ExpressionError`: "syntax" (with the position), "limit" (longer than
    ``MAX_SOURCE_CHARS``, nested deeper than ``MAX_DEPTH``, an integer literal over the
    bit limit) or "forbidden" (private ``_`` attributes, lambda, ``:=``, calls of anything
    but ``FUNCTION_NAMES`` and ``METHOD_NAMES``, ``*``/``**`` arguments).
    Grammar: a Python expression (``ast.parse(mode="eval")``) narrowed to a whitelist of
    node types.
    """
    if not isinstance(source, str):
        raise ExpressionError(f"an expression must be a string, not {type(source).__name__}", "type")
    if len(source) > MAX_SOURCE_CHARS:
        raise ExpressionError(
            f"expression is {len(source)} characters long; the limit is {MAX_SOURCE_CHARS}", "limit",
            source=source[:200],
        )
    return _parse_cached(source)


def evaluate_inline(source: str, state: dict[str, Any], limits: Limits) -> Any:
    """Evaluate ``source`` in this thread under ``limits``; ``state`` must already be a snapshot.

    The evaluator process runs this for each request (runs.sandbox.process.EVALUATORS).
    A range result becomes a list. Raises ExpressionError.
    """
    parsed = parse_expression(source)
    with guarded(limits) as guard:
        try:
            value = Walker(parsed.text, state, guard).eval(parsed.tree)
        except RecursionError:
            raise ExpressionError(f"expression nests too deeply in `{clip(parsed.text)}`", "limit",
                                  source=parsed.text) from None
        if type(value) is range:  # a JSON-ish result; the range was bounded when built
            guard.alloc(seq_bytes(len(value)) + len(value) * range_item_bytes(value), "the list of the range")
            value = list(value)
        return value


def evaluate(source: str, names: Mapping[str, Any]) -> Any:
    """Evaluate the expression ``source`` against the run state ``names``; return its value.

    The expression sees a deep copy of the variables it reads (JSON values only: dict,
    list, str, int, float, bool, None; tuples allowed), never the caller's objects, and
    has no mutating method at all. ``order.total`` reads the dict key ``order["total"]``.
    Functions: ``FUNCTION_NAMES``; methods: ``METHOD_NAMES`` (str, dict, list/tuple).
    Operations that could build a large value are refused before they run (see
    :class:`Limits`); the CPU time is bounded by ``BALLAST_EXPRESSION_TIMEOUT``
    (default 0.5 s). With ``BALLAST_EXPRESSION_ISOLATION = "process"`` (the default) any
    expression that is not ``parsed.linear`` (reads, comparisons, boolean logic, plain
    arithmetic: cost linear in its size and input, evaluated here) runs in a long-lived
    guarded child process (``BALLAST_EXPRESSION_MEMORY_MB``, default 512, of address
    space), killed and restarted on overrun; ``"inline"`` evaluates everything here.
    Raises :class:`ExpressionError` (codes: see the class). Limits per TRAPS.md
    "simpleeval blocks code execution, not resource exhaustion".
    """
    parsed = parse_expression(source)
    state = snapshot(parsed.names, names, source)
    limits = effective_limits()
    try:
        if not parsed.linear and isolation() == "process":
            return run_isolated("expr", source, state, limits)
        return evaluate_inline(source, state, limits)
    except ExpressionError as exc:
        if exc.code == "unknown_name" and exc.name is not None:
            raise ExpressionError(unknown_name_message(f"the expression `{clip(parsed.text)}`", exc.name, names),
                                  "unknown_name", source=source, name=exc.name) from None
        raise


# Codes that mean "this value is too big or too slow to compute": the ones a constant part
# is refused for at validation. Other failures of a constant part (1/0, int("x")) may sit
# in a branch that never runs, so they stay run-time errors.
_RESOURCE_CODES = frozenset({"limit", "timeout", "memory"})


def _constant_parts(node: ast.expr, text: str) -> list[ast.expr]:
    """The largest sub-expressions of ``node`` that read no variable (literals alone excluded),
    outermost first, in source order. Comprehension variables count as variables, so the
    body of a comprehension over the state is not constant."""
    checker = _Checker(text)
    checker.check(node, frozenset())
    if not checker.names:
        return [] if isinstance(node, ast.Constant) else [node]
    parts: list[ast.expr] = []
    if isinstance(node, ast.Call):
        # The function is not a value; a method's object is.
        children: list[ast.AST] = [node.func.value] if isinstance(node.func, ast.Attribute) else []
        children += [*node.args, *(kw.value for kw in node.keywords)]
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        if isinstance(child, ast.comprehension):
            # Its iterable and conditions may be constant; its target binds a name.
            for sub in (child.iter, *child.ifs):
                parts.extend(_constant_parts(sub, text))
        elif isinstance(child, ast.expr) and not isinstance(child, ast.Name):
            parts.extend(_constant_parts(child, text))
    return parts


def check_constant_parts(source: str) -> None:
    """Evaluate every sub-expression of ``source`` that reads no variable (``10**10**10``,
    ``'a' * 10**9``, ``range(10**9)``) under the same limits, guard and evaluator process
    as a run (:func:`evaluate` with no state), so a constant that is too big or too slow
    is refused before any run starts.

    Returns None when every constant part stays within the limits (or fails for another
    reason, such as ``1/0``, which stays a run-time error: the part may be in a branch that
    never runs). Raises :class:`ExpressionError` with code "limit", "timeout" or "memory"
    naming the part, or the parse errors of :func:`parse_expression`.
    """
    parsed = parse_expression(source)
    for part in _constant_parts(parsed.tree, parsed.text):
        text = ast.get_source_segment(parsed.text, part) or ast.unparse(part)
        try:
            evaluate(f"({text})", {})
        except ExpressionError as exc:
            if exc.code in _RESOURCE_CODES:
                raise ExpressionError(
                    f"the constant part `{clip(text)}` exceeds the expression limits: {exc.message}",
                    exc.code, source=source,
                    position=(part.lineno, part.col_offset + 1),
                ) from None
