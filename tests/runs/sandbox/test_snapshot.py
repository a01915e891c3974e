"""State snapshots: a plain deep copy of what is read, JSON values only, the caller's objects never shared."""
from __future__ import annotations

from collections import OrderedDict, defaultdict

import pytest

from runs.sandbox.errors import ExpressionError
from runs.sandbox.snapshot import MAX_VALUE_DEPTH, known_names_hint, snapshot


class Text(str):
    def upper(self):  # a method of its own that the sandbox must not reach
        raise AssertionError("subclass method called")


def test_copies_only_what_is_read_and_shares_nothing():
    names = {"a": {"x": [1, 2, {"y": "z"}]}, "b": 2, "unused": object()}
    state = snapshot(frozenset({"a", "missing"}), names, "a")
    assert state == {"a": {"x": [1, 2, {"y": "z"}]}}  # missing names are left for the evaluator
    assert state["a"] is not names["a"] and state["a"]["x"] is not names["a"]["x"]
    state["a"]["x"].append(3)
    assert names["a"]["x"] == [1, 2, {"y": "z"}]


def test_subclasses_become_plain_types():
    names = {"d": defaultdict(list, k=[1]), "o": OrderedDict(a=1), "s": Text("hi"), "t": (1, True, None, 1.5)}
    state = snapshot(frozenset(names), names, "")
    assert type(state["d"]) is dict and type(state["o"]) is dict and type(state["s"]) is str
    assert state["t"] == (1, True, None, 1.5) and type(state["t"]) is tuple


@pytest.mark.parametrize("value, code, where", [
    ({"ok": [1, {2, 3}]}, "type", "v['ok'][1]"),
    ({1.5: {(1, 2): 0}}, "type", "v[1.5][(1, 2)]"),  # the refused key ends the path
    (b"bytes", "type", "v"),
])
def test_non_json_values_are_refused_with_their_path(value, code, where):
    with pytest.raises(ExpressionError) as info:
        snapshot(frozenset({"v"}), {"v": value}, "v")
    assert info.value.code == code and f"`{where}`" in info.value.message and info.value.name == "v"


def test_depth_limit():
    value: list = []
    for _ in range(MAX_VALUE_DEPTH + 1):
        value = [value]
    with pytest.raises(ExpressionError) as info:
        snapshot(frozenset({"v"}), {"v": value}, "v")
    assert info.value.code == "limit"


def test_known_names_hint():
    assert known_names_hint({}) == "the state is empty"
    assert known_names_hint({"b": 1, "a": 2, 3: 4}) == "known: a, b"
    assert known_names_hint({f"n{i:02}": i for i in range(25)}).endswith("n19, ...")
