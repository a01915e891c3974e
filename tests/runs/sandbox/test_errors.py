"""Errors: codes, the JSON form, pickling across processes, and how Python's exceptions map to codes."""
from __future__ import annotations

import pickle

import pytest

from runs.sandbox.errors import ExpressionError, Fault, clip, describe, type_name


def test_unknown_code_becomes_error():
    assert ExpressionError("x", "nonsense").code == "error"


def test_pickling_keeps_every_field():
    err = ExpressionError("bad", "unknown_name", source="a + b", position=(1, 5), name="b")
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is ExpressionError
    assert clone.as_dict() == err.as_dict() == {"code": "unknown_name", "message": "bad", "source": "a + b",
                                                "position": {"line": 1, "column": 5}, "name": "b"}


@pytest.mark.parametrize("exc, code, reason", [
    (Fault("limit", "exceeds it", whole=True), "limit", "exceeds it"),
    (ZeroDivisionError("x"), "error", "division by zero"),
    (TypeError("bad type"), "type", "bad type"),
    (OverflowError("big"), "limit", "number too large (big)"),
    (RecursionError(), "limit", "nests too deeply"),
    (MemoryError(), "memory", "ran out of memory"),
    (KeyError("k"), "error", "KeyError: 'k'"),
])
def test_describe(exc, code, reason):
    got = describe(exc)
    assert (got.code, got.reason) == (code, reason)
    assert got.whole is isinstance(exc, Fault)


def test_clip_and_type_name():
    assert clip("a\n   b") == "a b"
    assert clip("x" * 200, 30) == "x" * 12 + "… (200 characters)"
    assert clip(clip("y" * 5000, 100), 100) == clip("y" * 5000, 100) and len(clip("y" * 5000, 100)) == 100
    assert [type_name(v) for v in ("", 1, 1.0, True, None, {}, [], range(1))] == [
        "string", "integer", "number", "boolean", "None", "dict", "list", "range"]
