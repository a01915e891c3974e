"""The JSON value check (runs/sandbox/values.py): canonical form, encoded size, and the path and reason of what fails."""
from __future__ import annotations

import enum
import json

import pytest

from runs.sandbox.values import MAX_DEPTH, InvalidValue, check, encoded_size


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def failure(value, path="output") -> tuple[str, str]:
    with pytest.raises(InvalidValue) as caught:
        check(value, path)
    return caught.value.path, caught.value.reason


def test_json_passes_and_its_size_is_the_compact_utf8_encoding():
    value = {"a": [1, 2.5, True, None, "é"], "b": {"c": ""}}
    checked = check(value, "output")
    assert checked.value == value
    assert checked.size == len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) == encoded_size(value)


def test_tuples_become_lists_and_subclasses_their_plain_type():
    checked = check({"t": (1, (2,)), "colour": Colour.RED, "level": Level.HIGH, Colour.RED: 1})
    assert checked.value == {"t": [1, [2]], "colour": "red", "level": 3, "red": 1}
    assert [type(v) for v in checked.value.values()] == [list, str, int, int]
    assert type(next(iter(reversed(checked.value)))) is str


def test_paths_name_keys_and_positions_and_quote_keys_that_are_not_names():
    assert failure({"items": [{}, {"price": float("nan")}]}) == ("output.items[1].price", "NaN is not a JSON number")
    assert failure({"a b": {"c-d": [float("inf")]}}) == ('output["a b"]["c-d"][0]', "Infinity is not a JSON number")
    assert failure([b"x"], "") == ("[0]", "bytes are not JSON (decode them to a string first)")
    assert failure({"k\x00": 1}) == ('output["k\\\\u0000"]', "an object key with a NUL character (\\u0000)")


def test_keys_that_are_not_strings_fail_and_a_collision_is_named():
    assert failure({(1, 2): "x"})[1] == "an object key must be a string, not tuple ((1, 2))"
    assert failure({True: 1, "true": 2})[1].endswith('as JSON it would become the key "true", which this object already has')

    class Odd(str):  # a str subclass whose keys stay apart in a dict, equal once plain strings
        __hash__ = object.__hash__

        def __eq__(self, other):
            return self is other

    assert failure({Odd("red"): 1, Odd("red"): 2}) == ("output.red", "two keys of this object are the same string")


def test_nesting_is_bounded_and_a_cycle_is_caught_by_it():
    deep: list = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    assert failure(deep)[1] == f"nested deeper than {MAX_DEPTH} levels"
    loop: list = []
    loop.append(loop)
    assert failure(loop)[1] == f"nested deeper than {MAX_DEPTH} levels"


def test_a_convert_hook_runs_on_every_value():
    class Box:
        def __init__(self, inner):
            self.inner = inner

    checked = check({"a": [Box(1), Box({"b": Box(2)})]}, convert=lambda v: v.inner if isinstance(v, Box) else v)
    assert checked.value == {"a": [1, {"b": 2}]}
