"""What an expression or template resolves to against a node's test data: the builder's live preview, through the engine's own sandbox."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from builder.graph_checks import INPUT_NAME
from runs.sandbox.errors import CODES, ExpressionError, clip
from runs.sandbox.expressions import evaluate
from runs.sandbox.templating import render_template
from runs.sandbox.values import InvalidValue, canonical

# Longest display text of a previewed value: the preview is one line under a field, and the
# full value can be large (a rendered prompt of 200_000 characters).
DISPLAY_CHARS = 2000
# The API's enums (ballast.settings ENUM_NAME_OVERRIDES names them): an error's code, a value's JSON type.
ERROR_CODES = sorted(CODES)
VALUE_TYPES = ["null", "boolean", "number", "text", "list", "object"]


def preview_names(state: Mapping[str, Any]) -> dict[str, Any]:
    """The names an expression sees at a node given ``state`` (the node's input state, as a
    step's ``input_state`` or a node test's state holds it): the state's keys, plus ``input``
    (the run input) as ``{}`` when the state has no such key, as the engine's
    ``runs.nodes.shared.expression_names`` does when a run starts with no input."""
    names = dict(state)
    names.setdefault(INPUT_NAME, {})
    return names


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "list"
    return "object"


def _place(exc: ExpressionError, source: str) -> tuple[int | None, int | None]:
    """1-based (line, column) of the error in ``source``: the evaluator's, else (an unknown
    name, which evaluation reports without a place) where the name first appears."""
    if exc.position:
        return exc.position
    if exc.name:
        found = re.search(rf"(?<![\w.]){re.escape(exc.name)}(?!\w)", source)
        if found:
            before = source[: found.start()]
            return before.count("\n") + 1, found.start() - (before.rfind("\n") + 1) + 1
    return None, None


def preview_source(kind: str, source: str, state: Mapping[str, Any]) -> dict[str, Any]:
    """Evaluate the expression (``kind`` "expression": conditions, transforms) or render the
    template (``kind`` "template": prompts, tool arguments) ``source`` against ``state`` with
    the engine's evaluators (``runs.sandbox.expressions.evaluate``,
    ``runs.sandbox.templating.render_template``): the same names, functions, limits, time
    bound and guarded process a run uses, so a hostile source is refused or cut off as in a run.

    Returns ``{"ok": True, "value", "type", "display", "truncated"}`` (``value``: the JSON
    result, a template's text; ``type``: null|boolean|number|text|list|object; ``display``:
    ``value`` as JSON text (a template's text as is), at most DISPLAY_CHARS characters) or
    ``{"ok": False, "error": {"code", "message", "line", "column", "name"}}`` (``line`` and
    ``column`` 1-based in ``source`` or None, ``name`` the unknown variable or None).
    Raises ValueError for an unknown ``kind``; never raises for a bad source.
    """
    if kind not in ("expression", "template"):
        raise ValueError("kind must be expression or template")
    names = preview_names(state)
    try:
        value = evaluate(source, names) if kind == "expression" else render_template(source, names)
        value = canonical(value, "value")
    except ExpressionError as exc:
        line, column = _place(exc, source)
        return {"ok": False, "error": {"code": exc.code, "message": exc.message, "line": line, "column": column, "name": exc.name}}
    except InvalidValue as exc:  # a set or NaN: a run could not store it either
        return {"ok": False, "error": {"code": "type", "message": f"the result's {exc}", "line": None, "column": None, "name": None}}
    text = value if isinstance(value, str) and kind == "template" else json.dumps(value, ensure_ascii=False)
    display = clip(text, DISPLAY_CHARS, fold=False)
    return {"ok": True, "value": value, "type": _json_type(value), "display": display, "truncated": display != text}
