"""The walker's own handlers (once simpleeval's) agree with Python on what the checker allows."""
from __future__ import annotations

import ast

import pytest

from runs.sandbox.expressions import parse_expression
from runs.sandbox.guard import guarded
from runs.sandbox.limits import LIMITS
from runs.sandbox.walker import Walker

NAMES = {"a": 0, "b": 3, "s": "", "t": "text", "xs": [1, 2, 3, 4, 5], "none": None, "f": 2.5}


@pytest.mark.parametrize("source", [
    # boolean operators return the deciding operand, and short-circuit
    "a and b", "b and a", "b and t", "a or b", "s or none", "none or s", "a or s or none", "b and t and xs",
    "a and xs[10]", "b or xs[10]", "not a", "not t",
    # chained comparisons evaluate each operand once and stop at the first false link
    "1 < b < 5", "1 < b > 5", "a < b < xs[10] if a else 0", "5 < b < xs[10]", "b == 3 != a", "none is None",
    "a is not None", "2 in xs", "9 not in xs", "'x' in t",
    # conditional expressions, unary operators, slices
    "t if b else s", "t if a else s", "-b", "+f", "~b", "-f",
    "xs[1:3]", "xs[::2]", "xs[-2:]", "xs[:]", "xs[b:]", "t[::-1]", "xs[a:b:1]",
])
def test_matches_python(source):
    parsed = parse_expression(source)
    with guarded(LIMITS) as guard:
        got = Walker(parsed.text, NAMES, guard).eval(parsed.tree)
    want = eval(compile(ast.Expression(parsed.tree), "<test>", "eval"), {"__builtins__": {}}, dict(NAMES))
    assert got == want and type(got) is type(want)
