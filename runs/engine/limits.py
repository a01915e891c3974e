"""What a commit may store: results checked as JSON (runs.sandbox.values) and the run's total state size, kept per key.

Every step result passes :func:`checked_result` before its commit (portable and fast
paths alike, before any transaction), so a value JSON cannot carry faithfully fails the
step (``invalid_output``, not retried) instead of surfacing as a database error. The
state-size limit is enforced from a per-key size map kept with the run
(``Run.state_sizes``: key -> UTF-8 bytes of its compact JSON): a commit recomputes only
the keys its step wrote (:func:`sizes_after`), never the whole state.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from django.conf import settings

from runs.engine.scheduler import CompiledGraph
from runs.engine.types import StateTooLarge, StateWriteRefused
from runs.nodes.base import ChildCall, NodeResult, Wait
from runs.sandbox.values import InvalidValue, check, encoded_size, key_path
from runs.vocabulary import NodeError

# Default of settings.BALLAST_MAX_STATE_BYTES: 8 MiB. A commit writes only the keys its
# step changed (runs.engine.store.state), but a reader of the whole state (a claim on the
# slow path, the run page, a fork) still reads all of it, and one key's value stays one
# jsonb/JSON value (jsonb: 255 MB at most).
DEFAULT_MAX_STATE_BYTES = 8 * 1024 * 1024
# How many of the largest keys a state_too_large error lists.
LARGEST_KEYS_SHOWN = 5


def max_state_bytes() -> int:
    """The run state size limit in bytes (settings.BALLAST_MAX_STATE_BYTES; 0 = no limit)."""
    return int(getattr(settings, "BALLAST_MAX_STATE_BYTES", DEFAULT_MAX_STATE_BYTES))


def checked_result(result: NodeResult) -> tuple[NodeResult, dict[str, int]]:
    """``result`` with every value in canonical JSON form, and the encoded size of each
    state key it writes (``{key: bytes}``).

    Checks the recorded output (path ``output``; when a step records its updates as its
    output, ``output.<key>``), the updates (``updates.<key>``), the route, a wait's
    reason and payload (``wait.payload``) and spawned children's inputs (``spawn[i].input``).
    Raises InvalidValue at the first value JSON cannot carry faithfully.
    """
    updates: dict[str, Any] = {}
    sizes: dict[str, int] = {}
    output: Any = None
    if result.output is not None:
        checked_output = check(result.output, "output")
        output = checked_output.value
    root = "updates" if result.output is not None else "output"
    if not isinstance(result.updates, Mapping):
        raise InvalidValue(root, f"the state updates must be an object, not {type(result.updates).__name__}")
    for key, value in result.updates.items():
        if not isinstance(key, str):
            raise InvalidValue(f"{root}[{key!r}]", f"a state key must be a string, not {type(key).__name__}")
        if result.output is not None and value is result.output:
            checked = checked_output  # a tool's result is its output and its one update
        else:
            checked = check(value, key_path(root, key))
        updates[key], sizes[key] = checked
    route = None if result.route is None else check(result.route, "route").value
    wait = None
    if result.wait is not None:
        wait = Wait(check(result.wait.reason, "wait.reason").value, check(result.wait.payload, "wait.payload").value, result.wait.due_seconds)
    spawn = None
    if result.spawn is not None:
        spawn = [ChildCall(c.key, c.label, check(c.input, f"spawn[{i}].input").value) for i, c in enumerate(result.spawn)]
    return replace(result, updates=updates, output=output, route=route, wait=wait, spawn=spawn), sizes


def invalid_output_error(exc: InvalidValue) -> NodeError:
    """The step error for a result that is not JSON: ``invalid_output``, not retryable
    (the same result would fail the same way), ``details`` ``{"path", "reason"}``."""
    return NodeError(f"the step's result cannot be stored: {exc.path}: {exc.reason}", code="invalid_output", retryable=False, details=exc.as_dict())


def state_too_large_error(exc: StateTooLarge) -> NodeError:
    """The step error for a commit that would pass the state size limit (not retryable)."""
    return NodeError(exc.message, code="state_too_large", retryable=False, details=exc.details)


def full_sizes(state: Mapping[str, Any]) -> dict[str, int]:
    """The per-key size map of a whole state (a new run, a fork, or a run committed before
    sizes were kept): encodes every key once."""
    return {key: encoded_size(value) for key, value in state.items()}


def sizes_after(
    graph: CompiledGraph,
    *,
    old_state: Mapping[str, Any],
    old_sizes: Mapping[str, int] | None,
    new_state: Mapping[str, Any],
    updates: Mapping[str, Any],
    written: Mapping[str, int] | None = None,
    sets: Collection[str] = (),
) -> dict[str, int]:
    """The per-key size map after a step's ``updates`` were merged into the state.

    Only written keys change: a ``replace`` key takes its written value's size
    (``written``, from :func:`checked_result`); ``append``/``extend`` add the new items'
    bytes to the list's known size; ``merge``, ``add``, ``max``, ``min`` (and anything the
    shortcuts cannot vouch for, such as a key in ``sets``: set, not reduced) encode that
    one key's new value. ``old_sizes`` None (a
    run committed before sizes were kept) is computed from ``old_state`` once.
    """
    sizes = dict(old_sizes) if old_sizes is not None else full_sizes(old_state)
    written = written or {}
    for key, value in updates.items():
        decl = graph.reducers.get(key)
        reducer = decl.reducer if decl else "replace"
        new = new_state.get(key)
        known = sizes.get(key)
        if reducer == "replace" and key in written:
            sizes[key] = written[key]
            continue
        old = old_state.get(key)
        if reducer in ("append", "extend") and key in written and key not in sets and known is not None and isinstance(old, list) and isinstance(new, list):
            count = 1 if reducer == "append" else len(value) if isinstance(value, list) else -1
            # The reducer recomputes the list from every contribution; the shortcut holds
            # only when the result is the old list plus these items.
            if count >= 0 and len(new) == len(old) + count:
                if count:
                    items = written[key] if reducer == "append" else written[key] - 2  # "[a,b]" -> "a,b"
                    sizes[key] = known + items + (1 if old else 0)  # a comma after existing items
                continue
        sizes[key] = encoded_size(new)
    return sizes


def enforce(sizes: Mapping[str, int], *, field: str, limit: int | None = None) -> None:
    """Raise StateTooLarge when the state the ``sizes`` map describes passes the limit
    (``limit`` default: :func:`max_state_bytes`; 0 = none). ``field`` names the write at
    fault in the error (``output``, ``state_patch``, ``input``)."""
    limit = max_state_bytes() if limit is None else limit
    total = sum(sizes.values())
    if not limit or total <= limit:
        return
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:LARGEST_KEYS_SHOWN]
    listed = ", ".join(f"{k} ({v} bytes)" for k, v in largest)
    raise StateTooLarge(
        f"the run's state would be {total} bytes, over the limit of {limit} (BALLAST_MAX_STATE_BYTES); largest keys: {listed}",
        field=field,
        details={"size": total, "limit": limit, "keys": dict(largest)},
    )


def checked_writes(values: Mapping[str, Any], *, field: str, known_keys: set[str] | None) -> tuple[dict[str, Any], dict[str, int]]:
    """Operator-given state writes (a skip's output, a fork's patch, a test run's state):
    canonical values and their sizes. ``known_keys`` None: any key. Raises
    StateWriteRefused (``invalid_output`` with the value's path, ``unknown_state_key``)."""
    if not isinstance(values, Mapping):
        raise StateWriteRefused("invalid_output", f"{field} must be an object", {field: ["must be an object"]})
    unknown = sorted(str(k) for k in values if known_keys is not None and k not in known_keys)
    if unknown:
        message = f"{field}: {', '.join(map(repr, unknown))} {'is not a state key' if len(unknown) == 1 else 'are not state keys'} of this graph"
        raise StateWriteRefused(
            "unknown_state_key", message, {key_path(field, k): ["not a state key of this graph"] for k in unknown}, {"keys": unknown}
        )
    out: dict[str, Any] = {}
    sizes: dict[str, int] = {}
    for key, value in values.items():
        try:
            if not isinstance(key, str):
                raise InvalidValue(f"{field}[{key!r}]", f"a state key must be a string, not {type(key).__name__}")
            out[key], sizes[key] = check(value, key_path(field, key))
        except InvalidValue as exc:
            raise StateWriteRefused("invalid_output", f"{exc.path}: {exc.reason}", {exc.path: [exc.reason]}, exc.as_dict()) from None
    return out, sizes
