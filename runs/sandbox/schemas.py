"""The one way Ballast checks and uses a JSON Schema from a graph: a run's ``input_schema``,
an approval's ``edit_schema``, an LLM node's ``output_schema``.

Such a schema is written by a builder and used in the web process (run input, approval
edits) and in workers (LLM replies). jsonschema left to itself resolves a ``$ref`` it
does not hold by fetching the URL (its deprecated urllib resolver: no timeout, past the
outbound guard, BALLAST_OUTBOUND_ALLOW), so a schema could make the server call any host
or hang a request. So:

- :func:`schema_problems` (at graph validation) refuses a schema that is not valid for
  its draft, a ``$ref`` (or ``$dynamicRef``/``$recursiveRef``) that is not local
  (``#``, ``#/$defs/x``, ``#/properties/a``) and a local one that points at nothing;
- :func:`validator` (at run time) builds every validator with a ``referencing.Registry``
  that never retrieves, so even a version stored before that check cannot fetch; a ref
  it cannot resolve raises :class:`SchemaUnusable` from :func:`errors`.

jsonschema costs about 0.2 s of CPU to import: workers import this module only when a
node needs it (see approvals.nodes' _lazy_imports_note).
"""
from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import Draft202012Validator, validator_for
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from core.fields import field_path

REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
REMOTE_REF = "remote $ref is not allowed: a schema may only refer inside itself (#/$defs/name, #/properties/key)"


class SchemaUnusable(ValueError):
    """A schema cannot be applied: a ``$ref`` in it does not resolve inside the schema
    (only a version stored before graph validation refused that can hold one)."""


def _never_retrieve(uri: str) -> Any:
    raise NoSuchResource(uri)  # its one attrs field, ref (mypy cannot see the keyword through referencing's wrapper)


# Every validator's registry: it knows no schema but the one being applied and fetches none.
REGISTRY: Registry = Registry(retrieve=_never_retrieve)  # type: ignore[call-arg]


def validator(schema: dict[str, Any]) -> Any:
    """A validator of ``schema`` (its ``$schema`` draft, default 2020-12) that resolves
    only refs inside ``schema`` and never retrieves anything."""
    cls = validator_for(schema, default=Draft202012Validator)
    return cls(schema, registry=REGISTRY)


def errors(schema: dict[str, Any], value: Any) -> list[ValidationError]:
    """Every error of ``value`` against ``schema``, sorted by where (``absolute_path``).
    Raises SchemaUnusable when a ``$ref`` does not resolve inside the schema."""
    try:
        found = list(validator(schema).iter_errors(value))
    except Unresolvable as exc:
        raise SchemaUnusable(f"the schema cannot be applied: {exc}") from None
    return sorted(found, key=lambda e: list(map(str, e.absolute_path)))


def _pointer_target(schema: Any, fragment: str) -> bool:
    """Whether JSON pointer ``fragment`` (after the ``#``) names a part of ``schema``."""
    node = schema
    for raw in fragment.split("/")[1:]:
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _anchors(schema: Any) -> set[str]:
    found: set[str] = set()
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(item.get(key), str):
                    found.add(item[key])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def ref_problem(schema: dict[str, Any], ref: Any) -> str | None:
    """Why ``ref`` (the value of a ``$ref`` in ``schema``) may not be used, or None: it
    must be a string starting with ``#`` that names a part of ``schema`` (a JSON pointer,
    or a plain ``$anchor`` name)."""
    if not isinstance(ref, str):
        return "must be a string"
    if not ref.startswith("#"):
        return f"{REMOTE_REF} ({ref!r})"
    fragment = ref[1:]
    if fragment == "" or (fragment.startswith("/") and _pointer_target(schema, fragment)):
        return None
    if not fragment.startswith("/") and fragment in _anchors(schema):
        return None
    return f"{ref!r} does not point at anything in this schema"


def schema_problems(schema: Any) -> list[tuple[str, str]]:
    """What is wrong with ``schema`` as ``(path, message)`` pairs (the path relative to
    the schema, ``properties.a.$ref``; ``""`` for the whole): not valid for its draft
    (one problem, then nothing else is checked), then each ``$ref`` that is remote or
    points at nothing. Empty when it may be used."""
    if not isinstance(schema, dict):
        return [("", "must be a JSON object")]
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        return [(field_path(exc.path), f"not a valid JSON Schema: {exc.message}")]
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(schema, ())]
    while stack:
        item, loc = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if key in REF_KEYWORDS and isinstance(child, str):
                    why = ref_problem(schema, child)
                    if why is not None:
                        problems.append((field_path((*loc, key)), why))
                elif key not in ("const", "enum", "default", "examples"):  # values, not schemas
                    stack.append((child, (*loc, key)))
        elif isinstance(item, list):
            stack.extend((child, (*loc, i)) for i, child in enumerate(item))
    return sorted(problems)
