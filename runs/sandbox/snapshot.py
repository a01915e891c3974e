"""State snapshots: the private, JSON-only deep copy of the run state an expression or template reads."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runs.sandbox.errors import ExpressionError, quote

__all__ = ["MAX_VALUE_DEPTH", "known_names_hint", "snapshot", "unknown_name_message"]

MAX_VALUE_DEPTH = 100  # deepest nesting of a run-state value an expression may read

_SCALARS = frozenset({str, int, float, bool, type(None)})


class _BadValue(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason, self.path = code, reason, ""


def _copy_value(value: Any, depth: int = 0) -> Any:
    """A deep copy of a JSON value (dict, list, tuple, str, int, float, bool, None) as plain types.

    Subclasses become the plain type (a defaultdict would grow on a missing key, a str
    subclass could carry methods of its own); other Mappings become dicts. Raises
    ``_BadValue`` (turned into an ExpressionError by :func:`snapshot`) on other types or nesting deeper than
    :data:`MAX_VALUE_DEPTH`.
    """
    t = type(value)
    if t in _SCALARS:
        return value
    if depth >= MAX_VALUE_DEPTH:
        raise _BadValue("limit", f"nests deeper than {MAX_VALUE_DEPTH} levels")
    key: Any = None
    try:
        if t is dict:
            out = {}
            for key, v in value.items():
                out[_copy_key(key)] = _copy_value(v, depth + 1)
            return out
        if t is list or t is tuple:
            out_list = []
            for key in range(len(value)):  # the index names the path if a value is refused
                out_list.append(_copy_value(value[key], depth + 1))
            return out_list if t is list else tuple(out_list)
    except _BadValue as exc:
        exc.path = f"[{quote(key, 60)}]{exc.path}"
        raise
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return _copy_value(dict(value.items()), depth)
    if isinstance(value, (list, tuple)):
        return _copy_value(list(value) if isinstance(value, list) else tuple(value), depth)
    raise _BadValue("type", f"is a {type(value).__name__}; expressions read only JSON values "
                            "(dict, list, string, number, boolean, None)")


def _copy_key(key: Any) -> Any:
    if type(key) in _SCALARS:
        return key
    if isinstance(key, (str, int, float)):
        return _copy_value(key)
    raise _BadValue("type", f"has a key of type {type(key).__name__}; only strings and numbers can be keys")


def snapshot(wanted: frozenset[str], names: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Copy the variables in ``wanted`` from the run state ``names``: {name: a plain deep copy}.

    Missing ones are left out, for the evaluator to report as unknown with its position.
    Raises ExpressionError ("type" or "limit", naming the variable and the path inside
    it) on a value that is not JSON or nests too deeply.
    """
    state: dict[str, Any] = {}
    for name in wanted:
        if name in names:
            try:
                state[name] = _copy_value(names[name])
            except _BadValue as exc:
                raise ExpressionError(f"variable `{name}{exc.path}` {exc.reason}", exc.code, source=source,
                                      name=name) from None
            except RecursionError:
                raise ExpressionError(f"variable `{name}` nests too deeply", "limit", source=source) from None
    return state


def known_names_hint(names: Mapping[str, Any]) -> str:
    """ "known: a, b, ..." (the first 20, sorted) for an unknown-variable message."""
    keys = sorted(k for k in names.keys() if isinstance(k, str))
    if not keys:
        return "the state is empty"
    shown = ", ".join(keys[:20]) + (", ..." if len(keys) > 20 else "")
    return f"known: {shown}"


def unknown_name_message(what: str, name: str, names: Mapping[str, Any]) -> str:
    """The run-time message for a name the state does not have, said from the user's side:
    "the template uses `query`, which is not in the state (known: input, topic)"."""
    return f"{what} uses `{name}`, which is not in the state ({known_names_hint(names)})"
