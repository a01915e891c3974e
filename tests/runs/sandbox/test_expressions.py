"""Sandboxed expressions: normal use and every hostile class from TRAPS.md, inline and in the evaluator process."""
from __future__ import annotations

import copy
import pickle

import pytest

from runs.sandbox.expressions import (
    FUNCTION_NAMES,
    ExpressionError,
    evaluate,
    parse_expression,
)
from tests.support.bounded import assert_fails_fast

pytestmark = pytest.mark.timeout(60)


def make_state() -> dict:
    return {
        "order": {
            "id": 42,
            "total": 150.5,
            "items": [{"sku": "A-1", "qty": 2, "price": 10}, {"sku": "B-2", "qty": 1, "price": 130.5}],
            "customer": {"name": "Alice Smith", "tier": "gold", "tags": ["vip", "eu"]},
        },
        "items": [3, 1, 2],
        "d": {"a": 1, "b": 2},
        "name": "  Alice  ",
        "n": 5,
        "big": 10**100,
        "text": "abc" * 1000,
        "rows": list(range(100_000)),
        "flag": True,
        "nothing": None,
    }


@pytest.fixture
def state() -> dict:
    return make_state()


@pytest.fixture(params=["inline", "process"])
def mode(request, settings):
    settings.BALLAST_EXPRESSION_ISOLATION = request.param
    return request.param


def fails(source: str, state: dict, code: str | None = None, within: float = 1.0) -> ExpressionError:
    """Evaluating ``source`` raises ExpressionError within ``within`` seconds and leaves state untouched."""
    return assert_fails_fast(evaluate, ExpressionError, source, state, code, within)


# ---------------------------------------------------------------------------------------
# Normal use

@pytest.mark.parametrize(
    "source, expected",
    [
        # comparisons and boolean logic
        ("order['total'] > 100", True),
        ("order.total > 100", True),  # attribute syntax reads dict keys
        ("order.customer.tier == 'gold' and not flag is False", True),
        ("n >= 5 and n < 10 or nothing", True),
        ("1 < n < 10", True),
        ("nothing is None", True),
        ("order.total if flag else 0", 150.5),
        # membership
        ("'vip' in order.customer.tags", True),
        ("'x' not in d", True),
        ("3 in items", True),
        ("'Alice' in name", True),
        # arithmetic
        ("n * 2 + 1", 11),
        ("n / 2", 2.5),
        ("n // 2", 2),
        ("n % 3", 2),
        ("2 ** 10", 1024),
        ("-n", -5),
        ("1 << 10", 1024),
        ("big * big > big", True),
        ("order['items'][0]['qty'] * order['items'][0]['price']", 20),
        # strings
        ("name.strip().lower()", "alice"),
        ("name.strip().upper()", "ALICE"),
        ("order.customer.name.split(' ')", ["Alice", "Smith"]),
        ("', '.join(order.customer.tags)", "vip, eu"),
        ("order.customer.name.startswith('Ali')", True),
        ("'a-b-c'.replace('-', '+')", "a+b+c"),
        ("'ab' * 3", "ababab"),
        ("f'{n:03d}-{order.customer.name}'", "005-Alice Smith"),
        ("f'{order.total:.1f}'", "150.5"),
        ("'7'.zfill(3)", "007"),
        ("text[:3]", "abc"),
        # dicts and lists
        ("d.get('a')", 1),
        ("d.get('zz', 0)", 0),
        ("sorted(d.keys())", ["a", "b"]),
        ("sum(d.values())", 3),
        ("items.count(1)", 1),
        ("items.index(2)", 2),
        ("sorted(items)", [1, 2, 3]),
        ("sorted(items, reverse=True)", [3, 2, 1]),
        ("min(items) + max(items)", 4),
        ("len(order['items'])", 2),
        ("items[-1]", 2),
        ("items[::-1]", [2, 1, 3]),
        ("[*items, 4]", [3, 1, 2, 4]),
        ("{**d, 'c': 3}", {"a": 1, "b": 2, "c": 3}),
        ("d | {'c': 3}", {"a": 1, "b": 2, "c": 3}),
        # comprehensions
        ("[x * 2 for x in items if x > 1]", [6, 4]),
        ("[i['sku'] for i in order['items'] if i.qty > 1]", ["A-1"]),
        ("{k: v * 10 for k, v in d.items()}", {"a": 10, "b": 20}),
        ("{x % 2 for x in items}", {0, 1}),
        ("any(i.price > 100 for i in order['items'])", True),
        ("all(x > 0 for x in items)", True),
        ("sum(i.qty * i.price for i in order['items'])", 150.5),
        ("[(i, x) for i, x in enumerate(items)]", [(0, 3), (1, 1), (2, 2)]),
        ("[a + b for a, b in zip(items, items)]", [6, 2, 4]),
        ("[[y for y in range(x)] for x in range(3)]", [[], [0], [0, 1]]),
        ("list(reversed(items))", [2, 1, 3]),
        ("len(rows)", 100_000),
        ("rows[-1]", 99_999),
        # functions
        ("abs(-3) + round(2.567, 2)", 5.57),
        ("int('42') + int(3.9) + float('0.5')", 45.5),
        ("str(n) + '!'", "5!"),
        ("bool(items) and not bool([])", True),
        ("list(range(3))", [0, 1, 2]),
        ("range(3)", [0, 1, 2]),
        ("dict(a=1)", {"a": 1}),
    ],
)
def test_evaluates(source, expected, state, mode):
    before = copy.deepcopy(state)
    assert evaluate(source, state) == expected
    assert state == before


def test_result_is_a_copy(state, mode):
    result = evaluate("order", state)
    assert result == state["order"] and result is not state["order"]
    result["items"].append("x")
    assert state == make_state()


def test_accepts_mappings_tuples_and_subclasses(mode):
    from collections import OrderedDict, defaultdict

    names = {"m": OrderedDict(a=1), "dd": defaultdict(list, b=[1]), "t": (1, 2)}
    assert evaluate("m.a + dd['b'][0] + t[1]", names) == 4
    assert evaluate("dd.get('missing')", names) is None
    assert "missing" not in names["dd"]  # a defaultdict would have grown


def test_rejects_non_json_state(mode):
    from decimal import Decimal

    err = fails("price > 1", {"price": Decimal("1.5")}, "type")
    assert "price" in err.message and "Decimal" in err.message
    err = fails("x.a > 1", {"x": {"a": [{1, 2}]}}, "type")
    assert "x['a'][0]" in err.message


def test_unread_bad_values_are_ignored(mode):
    assert evaluate("n + 1", {"n": 1, "other": object()}) == 2


# ---------------------------------------------------------------------------------------
# parse_expression

def test_parse_names():
    assert parse_expression("order.total > limit and len(items) > 0").names == {"order", "limit", "items"}
    assert parse_expression("[x for x in items if x > y]").names == {"items", "y"}
    assert parse_expression("{k: v for k, v in d.items()}").names == {"d"}
    assert parse_expression("[[x + y for y in ys] for x in xs]").names == {"xs", "ys"}
    assert parse_expression("name.lower() == 'a'").names == {"name"}
    assert parse_expression("f'{a:{w}}'").names == {"a", "w"}
    # A function name used as a value is a variable, not the function.
    assert parse_expression("len").names == {"len"}
    assert parse_expression("1 + 2").names == frozenset()


def test_parse_is_cached_and_static():
    parsed = parse_expression("a + 1")
    assert parse_expression("a + 1") is parsed
    assert parsed.source == "a + 1"
    # Parsing never evaluates: a hostile but well-formed expression parses fine.
    assert parse_expression("'a' * 10**9").names == frozenset()


def test_linear_classification():
    assert parse_expression("order.total > 100 and d.get('a') == 1").linear
    assert parse_expression("n * 2 + len(items)").linear
    assert not parse_expression("[x for x in items]").linear
    assert not parse_expression("2 ** n").linear
    assert not parse_expression("f'{n}'").linear
    assert not parse_expression("'-'.join(items)").linear


def test_function_names():
    assert {"len", "min", "max", "abs", "round", "int", "float", "str", "bool", "sum", "any", "all", "sorted",
            "list", "dict", "range"} <= FUNCTION_NAMES
    assert not {"eval", "exec", "getattr", "type", "open", "__import__", "format", "rand"} & FUNCTION_NAMES


@pytest.mark.parametrize(
    "source, position",
    [("1 +", (1, 4)), ("a ==", (1, 5)), ("a ++* b", (1, 5)), ("f(a,,b)", (1, 5)), ("x = 1", None), ("import os", None), ("a; b", None), ("", None),
     ("(1, 2", None), ("'abc", None)],
)
def test_syntax_errors(source, position):
    with pytest.raises(ExpressionError) as info:
        parse_expression(source)
    assert info.value.code == "syntax"
    if position:
        assert info.value.position == position
        assert f"column {position[1]}" in info.value.message


def test_error_shape_and_pickling():
    with pytest.raises(ExpressionError) as info:
        parse_expression("1 +")
    data = info.value.as_dict()
    assert data["code"] == "syntax" and "syntax error" in data["message"] and data["position"] == {"line": 1,
                                                                                                   "column": 4}
    clone = pickle.loads(pickle.dumps(info.value))
    assert (clone.code, clone.message, clone.position) == ("syntax", info.value.message, (1, 4))


def test_unknown_name(state, mode):
    err = fails("order.total > limit", state, "unknown_name")
    assert err.name == "limit"
    assert err.message.startswith("the expression `order.total > limit` uses `limit`, which is not in the state (known: ")
    assert "order" in err.message  # lists the known variables
    # Only the branch taken reads its names.
    assert evaluate("1 if flag else missing", state) == 1


def test_missing_key_and_attribute(state, mode):
    err = fails("order.nope > 1", state, "error")
    assert "nope" in err.message and "order" in err.message
    fails("d['zz']", state, "error")
    fails("items[10]", state, "error")
    err = fails("n.real", state, "type")
    assert "dict keys" in err.message
    err = fails("name.upper", state, "forbidden")
    assert "call it" in err.message


def test_type_errors(state, mode):
    fails("name + 1", state, "type")
    fails("len(n)", state, "type")
    fails("n / 0", state, "error")
    fails("sum(['a'])", state, "type")


# ---------------------------------------------------------------------------------------
# Hostile: big-integer arithmetic

@pytest.mark.parametrize(
    "source",
    [
        "9**9**9",
        "10**100000",
        "2**1000000 * 2**1000000",
        "(2**4000) * (2**4000)",
        "1<<10**9",
        "big << 10**6",
        "big*big*big*big*big*big*big*big*big*big*big*big*big*big",
        "big ** 50",
        "round(5, -10**9)",
        "int('1' * 5000, 2) * 1",
        "sum([big ** 40, big ** 40])",
    ],
)
def test_big_integers(source, state, mode):
    err = fails(source, state, "limit")
    assert "limit" in err.message


def test_big_integer_message(state):
    err = fails("9**9**9", state, "limit")
    assert err.message.startswith("expression exceeds the integer size limit of 4096 bits")
    assert err.message.endswith("in `9**9**9`")


def test_integer_literal_limit():
    with pytest.raises(ExpressionError) as info:
        parse_expression("1" * 1500)
    assert info.value.code == "limit"


# ---------------------------------------------------------------------------------------
# Hostile: strings that pad, replace, repeat or format their way to gigabytes

@pytest.mark.parametrize(
    "source, code",
    [
        ("'a'.ljust(10**10)", "limit"),
        ("'a'.rjust(10**10)", "limit"),
        ("'a'.center(10**10)", "limit"),
        ("'7'.zfill(10**10)", "limit"),
        ("('a'*1000).replace('a','a'*1000)", "limit"),
        ("text.replace('', 'x' * 100)", "limit"),
        ("'x'*10**9", "limit"),
        ("10**9 * 'x'", "limit"),
        ("text * 100", "limit"),
        ("text + text * 33", "limit"),
        ("'-'.join(['a' * 1000] * 1000)", "limit"),
        ("str([text] * 1000)", "limit"),
        ("f'{[text] * 1000}'", "limit"),
        ("f'{1:>1000000000}'", "limit"),
        ("f'{1:.1000000}'", "limit"),
        ("f'{1:>{10**9}}'", "limit"),
        ("'%*d' % (10**9, 1)", "forbidden"),
        ("'%s' % text", "forbidden"),
        ("'a'.expandtabs(10**9)", "forbidden"),
        ("'{:>1000000000}'.format(1)", "forbidden"),
        ("text.split('b') * 100", "limit"),
        ("(text * 33).split('')", "error"),
    ],
)
def test_string_growth(source, code, state, mode):
    fails(source, state, code)


def test_string_message(state):
    err = fails("'a' * 10**9", state, "limit")
    assert err.message == ("expression exceeds the string size limit of 100000 characters (the result would be "
                           "1000000000 characters) in `'a' * 10**9`")


def test_sizes_up_to_the_limit_are_fine(state, mode):
    assert len(evaluate("'a' * 100000", state)) == 100_000
    assert len(evaluate("[0] * 100000", state)) == 100_000
    assert evaluate("len(text.split('b'))", state) == 1001


# ---------------------------------------------------------------------------------------
# Hostile: nested lists and comprehensions

@pytest.mark.parametrize(
    "source",
    [
        "[[1]*1000]*1000*1000",
        "[[1]*1000]*1000",
        "[[[[0]*100]*100]*100]*100",
        "[x for x in range(10**9)]",
        "list(range(10**9))",
        "range(10**100)",
        "[[y for y in range(1000)] for x in range(1000)]",
        "[[0]*10000 for x in range(10000)]",
        "[rows for x in range(2)]",
        "rows + rows",
        "[*rows, *rows]",
        "{**{'a': rows}, 'b': rows}",
        "sorted(rows * 2)",
        "zip(rows, rows)",
        "[x for x in rows]",
        "[[a, a] for a in [[b, b] for b in [[c, c] for c in [rows]]]]",
        # Shared references: 128 items, but str() would write `text` 128 times.
        "str([[t, t] for t in [[s, s] for s in [[r, r] for r in [[q, q] for q in [[text] * 8]]]]])",
    ],
)
def test_nested_products(source, state, mode):
    fails(source, state, "limit")


def test_timeout_of_many_bounded_steps(state, mode):
    # Each step is small, allowed and builds nothing; together they run past the time limit.
    err = fails("[rows.count(x) for x in range(10000)]", state, "timeout")
    assert "time limit of 0.5 s" in err.message


def test_timeout_setting(state, settings):
    settings.BALLAST_EXPRESSION_ISOLATION = "inline"
    settings.BALLAST_EXPRESSION_TIMEOUT = 0.1
    fails("[rows.count(x) for x in range(10000)]", state, "timeout", within=0.5)


@pytest.mark.parametrize(
    "source",
    [
        # Every string is under the size limit; together they would be a gigabyte.
        "[s + str(i) for i in range(10000)]",
        "[s.upper() for i in range(10000)]",
        "[s[1:] for i in range(10000)]",
        "[len(sorted(rows)) for x in range(10000)]",
        "[f'{s}{i}' for i in range(10000)]",
    ],
)
def test_allocation_budget(source, state, mode):
    state["s"] = "a" * 99_990
    err = fails(source, state, "limit")
    assert "built in one evaluation" in err.message


@pytest.mark.parametrize(
    "source",
    [
        "long.rfind(needle)",
        "long.rindex(needle)",
        "long.rpartition(needle)",
        "long.rsplit(needle)",
        "long.strip(long)",
    ],
)
def test_quadratic_string_searches(source, mode):
    names = {"long": "a" * 100_000, "needle": "a" * 25_000 + "b" + "a" * 25_000}
    fails(source, names, "limit")
    assert evaluate("long.rfind('b')", names) == -1


# ---------------------------------------------------------------------------------------
# Hostile: mutation of the caller's state

@pytest.mark.parametrize(
    "source",
    [
        "items.append(1)",
        "items.extend([1])",
        "items.sort()",
        "items.pop()",
        "items.clear()",
        "items.remove(1)",
        "items.insert(0, 1)",
        "d.update({'a': 9})",
        "d.clear()",
        "d.pop('a')",
        "d.popitem()",
        "d.setdefault('z', 1)",
        "order['items'][0].update(qty=0)",
        "[items.append(x) for x in range(3)]",
        "order.customer.tags.append('x')",
    ],
)
def test_mutation_is_impossible(source, state, mode):
    fails(source, state, "forbidden")


def test_assignment_is_impossible(state, mode):
    fails("d['a'] = 1", state, "syntax")
    fails("(d := 1)", state, "forbidden")
    fails("[x for x in items if (y := x)]", state, "forbidden")


# ---------------------------------------------------------------------------------------
# Hostile: escapes to Python internals

@pytest.mark.parametrize(
    "source",
    [
        "().__class__.__bases__",
        "().__class__.__bases__[0].__subclasses__()",
        "d.__dict__",
        "d.__class__",
        "name.__class__.__mro__",
        "'{0.__class__}'.format(1)",
        "'{0.__class__}'.format_map(d)",
        "type(1)",
        "getattr(d, 'get')",
        "__import__('os')",
        "eval('1')",
        "exec('1')",
        "open('/etc/passwd')",
        "(lambda: 1)()",
        "[c for c in ().__class__.__base__.__subclasses__()]",
        "f'{d.__class__}'",
        "d.get.__self__",
        "d._private",
        "items[0].__class__",
        "[x for x in items][0].__class__",
        "d.get('a')()",
        "(items)(1)",
        "len(*items)",
        "dict(**d)",
        "[x async for x in items]",
        "b'bytes'",
        "1j",
        "...",
        "a @ b",
    ],
)
def test_attribute_escapes(source, state, mode):
    fails(source, state, "forbidden")


def test_function_names_are_not_values(state, mode):
    # Names of functions are not values: only calls reach them.
    fails("len", state, "unknown_name")
    fails("[len][0]('a')", state, "forbidden")


# ---------------------------------------------------------------------------------------
# Hostile: size and nesting of the expression itself

@pytest.mark.parametrize(
    "source, code",
    [
        ("-" * 1000 + "1", "limit"),
        ("(" * 300 + "1" + ")" * 300, "syntax"),
        ("[" * 60 + "]" * 60, "limit"),
        ("d" + ".a" * 100, "limit"),
        ("not " * 400 + "flag", "limit"),
        ("1+" * 1500 + "1", "limit"),
        ("x" * 2001, "limit"),
    ],
)
def test_deep_and_long_sources(source, code, state, mode):
    fails(source, state, code)


def test_deeply_nested_state_value(mode):
    value: list = []
    for _ in range(200):
        value = [value]
    err = fails("len(v)", {"v": value}, "limit")
    assert "v" in err.message


def test_bad_isolation_setting(settings, state):
    settings.BALLAST_EXPRESSION_ISOLATION = "sometimes"
    with pytest.raises(ExpressionError):
        evaluate("[x for x in items]", state)
