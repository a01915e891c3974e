"""The expression tree walker: evaluates a checked ``ast`` expression against a snapshot, every step guarded.

It is ours outright. It began as a subclass of simpleeval 1.0.8's ``SimpleEval`` and
re-implemented nearly every handler to add the guard's checks; the six it still took
from simpleeval (constant, unary operator, boolean operator, comparison, conditional
expression, slice) are a few lines each and are written here too, so no simpleeval code
remains and simpleeval is no longer a dependency. (Its constant handler's check on
literals over 100_000 characters is moot: runs.sandbox.expressions refuses sources over 2,000
characters before they are parsed.) What simpleeval offered beyond that
does not fit: it parses with ``ast.parse`` as we do (runs.sandbox.expressions), its limits are
module globals shared by every caller (TRAPS.md) and do not cover what
runs.sandbox.guard checks, and its name, function and attribute rules are replaced by
the static checks of runs.sandbox.expressions and the whitelist of runs.sandbox.whitelist.
"""
from __future__ import annotations

import ast
import operator as op
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from runs.sandbox.errors import Described, ExpressionError, Fault, clip, describe, quote, type_name
from runs.sandbox.guard import Guard, hash_bytes, int_bytes, range_item_bytes, seq_bytes
from runs.sandbox.whitelist import FUNCTIONS, METHODS

__all__ = ["Walker"]

# Comparisons go through Guard.compare, which checks their cost first (runs.sandbox.guard.COMPARISONS).
_COMPARE: dict[type[ast.cmpop], str] = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: op.not_, ast.USub: op.neg, ast.UAdd: op.pos, ast.Invert: op.invert,
}

# [[fill]align][sign][z][#][0][width][grouping][.precision][type], as in the format mini-language.
_FORMAT_SPEC = re.compile(r"(?:.?[<>^=])?[+\- ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[bcdeEfFgGnosxX%]?", re.S)


def _check_format_spec(spec: str) -> None:
    # Width and precision are what can make format() allocate: f"{1:>1000000000}".
    match = _FORMAT_SPEC.fullmatch(spec)
    if match is None:
        raise Fault("forbidden", f"format spec {quote(spec)} is not allowed")
    width, precision = match.groups()
    if len(width) > 3 or len(precision or "") > 3:
        raise Fault("limit", f"format spec {quote(spec)} asks for a width or precision over 999")


class Walker:
    """Evaluates nodes of one checked expression.

    ``text`` is the expression as parsed (node positions refer to it), ``names`` the
    snapshot of the run state it reads, ``guard`` the evaluation's guard. The tree must
    have passed runs.sandbox.expressions' checks: only whitelisted node types, functions and
    methods, no private attributes. :meth:`eval` returns the value of a node or raises
    ExpressionError whose message quotes the innermost failing sub-expression.
    """

    def __init__(self, text: str, names: Mapping[str, Any], guard: Guard) -> None:
        self.expr = text
        self.names = names
        self.guard = guard
        self.scopes: list[dict[str, Any]] = []
        self.binops: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
            ast.Add: guard.add, ast.Sub: guard.sub, ast.Mult: guard.mul,
            ast.Div: lambda a, b: guard.number(op.truediv, a, b),
            ast.FloorDiv: lambda a, b: guard.number(op.floordiv, a, b), ast.Mod: guard.mod, ast.Pow: guard.pow,
            ast.LShift: guard.lshift, ast.RShift: lambda a, b: guard.number(op.rshift, a, b), ast.BitOr: guard.bitor,
            ast.BitXor: lambda a, b: guard.number(op.xor, a, b), ast.BitAnd: lambda a, b: guard.number(op.and_, a, b),
        }

    def eval(self, node: ast.AST) -> Any:
        """The value of ``node``; raises ExpressionError (see the class)."""
        try:
            if time.monotonic() > self.guard.deadline:
                self.guard.check_time()
            return _HANDLERS[type(node)](self, node)
        except ExpressionError:
            raise
        except Exception as exc:  # the innermost node reports, with its own source text
            raise self._error(exc, node) from None

    def _error(self, exc: Exception, node: ast.AST) -> ExpressionError:
        if isinstance(exc, KeyError):
            what = Described("error", f"key {quote(exc.args[0])} not found" if exc.args else "key not found")
        elif isinstance(exc, IndexError):
            what = Described("error", clip(str(exc), fold=False) or "index out of range")
        elif isinstance(exc, ValueError):
            what = Described("error", clip(str(exc), fold=False))
        else:
            what = describe(exc)
        if what.code == "unknown_name":
            return ExpressionError(what.reason, what.code, source=self.expr, name=what.name)
        seg = self.expr if what.whole else (ast.get_source_segment(self.expr, node) or self.expr)
        prefix = "expression " if what.reason.startswith(("exceeds", "took")) else ""
        return ExpressionError(f"{prefix}{what.reason} in `{clip(seg)}`", what.code, source=self.expr, name=what.name)

    # -- constants, operators, conditions ------------------------------------------------
    def _eval_constant(self, node: ast.Constant) -> Any:
        return node.value

    def _eval_unaryop(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        if type(value) is int and type(node.op) is not ast.Not:
            self.guard.alloc(int_bytes(value.bit_length() + 1), "the integer")
        return _UNARY[type(node.op)](value)

    def _eval_binop(self, node: ast.BinOp) -> Any:
        return self.binops[type(node.op)](self.eval(node.left), self.eval(node.right))

    def _eval_boolop(self, node: ast.BoolOp) -> Any:
        # Short-circuits like Python: the first falsy value of `and`, truthy value of `or`.
        want = type(node.op) is ast.Or
        value: Any = False
        for item in node.values:
            value = self.eval(item)
            if bool(value) is want:
                break
        return value

    def _eval_compare(self, node: ast.Compare) -> Any:
        # Chained like Python (a < b < c evaluates b once, stops at the first false link).
        right = self.eval(node.left)
        result: Any = True
        for operation, comparator in zip(node.ops, node.comparators, strict=True):
            left, right = right, self.eval(comparator)
            result = self.guard.compare(_COMPARE[type(operation)], left, right)
            if not result:
                break
        return result

    def _eval_ifexp(self, node: ast.IfExp) -> Any:
        return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)

    # -- names, attributes, subscripts, calls -------------------------------------------
    def _eval_name(self, node: ast.Name) -> Any:
        for scope in reversed(self.scopes):
            if node.id in scope:
                return scope[node.id]
        try:
            return self.names[node.id]
        except KeyError:
            raise Fault("unknown_name", f"unknown variable `{node.id}`", name=node.id) from None

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        # Attribute syntax outside a call reads a dict key: `order.total` is order["total"].
        value = self.eval(node.value)
        if type(value) is dict:
            try:
                return value[node.attr]
            except KeyError:
                raise Fault("error", f"`{clip(ast.get_source_segment(self.expr, node.value) or '')}` "
                                     f"has no key {node.attr!r}") from None
        if node.attr in METHODS.get(type(value), {}):
            raise Fault("forbidden", f"`.{node.attr}` is a method; call it as `.{node.attr}(...)`")
        raise Fault("type", f"a {type_name(value)} has no readable attributes; `.{node.attr}` reads dict keys only")

    def _eval_subscript(self, node: ast.Subscript) -> Any:
        container = self.eval(node.value)
        key = self.eval(node.slice)
        if type(container) not in (dict, list, tuple, str, range):
            raise Fault("type", f"a {type_name(container)} cannot be indexed")
        if type(key) is slice:  # a slice is a copy
            n = len(range(*key.indices(len(container))))
            self.guard.spend(n)
            if type(container) is str:
                self.guard.alloc_str(n, container)
            else:
                self.guard.alloc(seq_bytes(n), "the slice")
        return container[key]

    def _eval_slice(self, node: ast.Slice) -> slice:
        def part(n: ast.expr | None) -> Any:
            return None if n is None else self.eval(n)

        return slice(part(node.lower), part(node.upper), part(node.step))

    def _eval_call(self, node: ast.Call) -> Any:
        func = node.func
        if type(func) is ast.Name:
            fn = FUNCTIONS[func.id]
            args = [self.eval(a) for a in node.args]
        else:
            assert isinstance(func, ast.Attribute)  # the checker allows names and methods only
            receiver = self.eval(func.value)
            method = METHODS.get(type(receiver), {}).get(func.attr)
            if method is None:
                raise Fault("forbidden", f"`.{func.attr}()` is not available on a {type_name(receiver)}")
            fn = method
            args = [receiver, *(self.eval(a) for a in node.args)]
        kwargs: dict[str, Any] = {}
        for k in node.keywords:
            assert k.arg is not None  # the checker refuses **arguments
            kwargs[k.arg] = self.eval(k.value)
        return fn(*args, **kwargs)

    # -- literals ----------------------------------------------------------------------
    def _build(self, elts: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        cells = 0
        for item in elts:
            if type(item) is ast.Starred:
                value = self.eval(item.value)
                self.guard.check_iterable(value, "*")
                cells += self.guard.count_items(value) - 1
                self.guard.check_items(cells, "the literal", True)
                self.guard.alloc(len(value) * range_item_bytes(value), "the literal")
                out.extend(value)
            else:
                value = self.eval(item)
                cells += self.guard.count_items(value)
                self.guard.check_items(cells, "the literal", True)
                out.append(value)
        self.guard.spend(len(out))
        self.guard.alloc(seq_bytes(len(out)), "the literal")
        return out

    def _eval_list(self, node: ast.List) -> list[Any]:
        return self._build(node.elts)

    def _eval_tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self._build(node.elts))

    def _eval_set(self, node: ast.Set) -> set[Any]:
        items = self._build(node.elts)
        self.guard.alloc(hash_bytes(len(items)), "the set")
        return set(items)

    def _eval_dict(self, node: ast.Dict) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        cells = 0
        for key, value_node in zip(node.keys, node.values, strict=True):
            if key is None:  # {**other}
                value = self.eval(value_node)
                if type(value) is not dict:
                    raise Fault("type", f"** needs a dict, not a {type_name(value)}")
                cells += self.guard.count_items(value) - 1
                self.guard.check_items(cells, "the dict", True)
                self.guard.alloc(hash_bytes(len(value)), "the dict")
                out.update(value)
            else:
                k = self.eval(key)
                value = self.eval(value_node)
                cells += self.guard.count_items(k) + self.guard.count_items(value)
                self.guard.check_items(cells, "the dict", True)
                self.guard.alloc(64, "the dict")
                out[k] = value
        self.guard.spend(len(out))
        return out

    def _eval_joinedstr(self, node: ast.JoinedStr) -> str:
        parts: list[str] = []
        total = 0
        for item in node.values:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                text = item.value
            else:
                assert isinstance(item, ast.FormattedValue)
                text = self._eval_formattedvalue(item)
            total += len(text)
            self.guard.check_chars(total)
            parts.append(text)
        self.guard.spend(total)
        self.guard.alloc_str(total, *parts)
        return "".join(parts)

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> str:
        value = self.eval(node.value)
        if node.conversion in (114, 97):  # !r, !a
            self.guard.check_chars(self.guard.text_size(value))
            value = repr(value) if node.conversion == 114 else ascii(value)
            self.guard.check_chars(len(value))
            self.guard.alloc_str(len(value), value)
        elif node.conversion == 115:  # !s
            value = self.guard.text(value)
        if node.format_spec is not None:
            spec = self.eval(node.format_spec)
            _check_format_spec(spec)
            if type(value) is not str:
                self.guard.check_chars(self.guard.text_size(value))
            out = format(value, spec)  # bounded: width and precision at most 999, the text checked above
            self.guard.spend(len(out))
            self.guard.alloc_str(len(out), out)
            return out
        return self.guard.text(value)

    # -- comprehensions ----------------------------------------------------------------
    def _eval_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> Any:
        kind = type(node)
        out: Any = {} if kind is ast.DictComp else set() if kind is ast.SetComp else []
        guard = self.guard
        cells = 0
        scope: dict[str, Any] = {}
        generators = node.generators

        def bind(target: ast.expr, value: Any) -> None:
            if isinstance(target, ast.Name):
                scope[target.id] = value
                return
            assert isinstance(target, (ast.Tuple, ast.List))  # the checker allows these only
            values = list(value) if type(value) in (list, tuple) else None
            if values is None or len(values) != len(target.elts):
                raise Fault("type", f"cannot unpack a {type_name(value)} into {len(target.elts)} names")
            for t, v in zip(target.elts, values, strict=True):
                bind(t, v)

        def run(level: int) -> None:
            nonlocal cells
            gen = generators[level]
            iterable = self.eval(gen.iter)
            if type(iterable) not in (list, tuple, dict, str, range, set):
                raise Fault("type", f"cannot iterate over a {type_name(iterable)}")
            item_bytes = range_item_bytes(iterable)  # a range makes each item as it goes
            for item in iterable:
                guard.step()
                guard.spend(1)
                if item_bytes:
                    guard.alloc(item_bytes, "the comprehension's variable")
                bind(gen.target, item)
                if not all(self.eval(cond) for cond in gen.ifs):
                    continue
                if level + 1 < len(generators):
                    run(level + 1)
                elif isinstance(node, ast.DictComp):
                    k, v = self.eval(node.key), self.eval(node.value)
                    cells += guard.count_items(k) + guard.count_items(v)
                    guard.check_items(cells, "the comprehension", True)
                    guard.alloc(64, "the comprehension")
                    out[k] = v
                else:
                    v = self.eval(node.elt)
                    cells += guard.count_items(v)
                    guard.check_items(cells, "the comprehension", True)
                    guard.alloc(64 if kind is ast.SetComp else 8, "the comprehension")
                    if kind is ast.SetComp:
                        out.add(v)
                    else:
                        out.append(v)

        self.scopes.append(scope)
        try:
            run(0)
        finally:
            self.scopes.pop()
        return out


_HANDLERS: dict[type[ast.AST], Callable[[Walker, Any], Any]] = {
    ast.Constant: Walker._eval_constant,
    ast.Name: Walker._eval_name,
    ast.UnaryOp: Walker._eval_unaryop,
    ast.BinOp: Walker._eval_binop,
    ast.BoolOp: Walker._eval_boolop,
    ast.Compare: Walker._eval_compare,
    ast.IfExp: Walker._eval_ifexp,
    ast.Call: Walker._eval_call,
    ast.Subscript: Walker._eval_subscript,
    ast.Attribute: Walker._eval_attribute,
    ast.Slice: Walker._eval_slice,
    ast.List: Walker._eval_list,
    ast.Tuple: Walker._eval_tuple,
    ast.Set: Walker._eval_set,
    ast.Dict: Walker._eval_dict,
    ast.JoinedStr: Walker._eval_joinedstr,
    ast.FormattedValue: Walker._eval_formattedvalue,
    ast.ListComp: Walker._eval_comprehension,
    ast.SetComp: Walker._eval_comprehension,
    ast.GeneratorExp: Walker._eval_comprehension,
    ast.DictComp: Walker._eval_comprehension,
}
