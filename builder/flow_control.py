"""A graph's flow control settings (runs.engine.store.flow): checked, saved, audited, and its gate made due so held runs that now fit are admitted."""
from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from audit.chain import audit
from graphs.models import Graph
from runs.engine import api as engine

FIELDS = ("max_concurrent_runs", "concurrency_key", "concurrency_key_limit")
# A dotted path into the run input: identifiers joined by dots ("customer_id", "customer.id").
KEY_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$")


def flow_control_errors(values: dict[str, Any]) -> dict[str, list[str]]:
    """Field errors of the flow control ``values`` given (any subset of FIELDS): the
    limits whole numbers 1..MAX_CONCURRENCY_LIMIT (``max_concurrent_runs`` may be None:
    unlimited), the key "" or a dotted path of at most 200 characters."""
    errors: dict[str, list[str]] = {}
    for name in ("max_concurrent_runs", "concurrency_key_limit"):
        if name not in values or (values[name] is None and name == "max_concurrent_runs"):
            continue
        value = values[name]
        try:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValidationError("Enter a whole number.")
            field = Graph._meta.get_field(name)
            assert isinstance(field, models.Field)  # a concrete column, not a relation
            field.run_validators(value)
        except ValidationError as exc:
            errors[name] = list(exc.messages)
    key = values.get("concurrency_key", "")
    if not isinstance(key, str) or len(key) > 200 or (key and not KEY_PATH.match(key)):
        errors["concurrency_key"] = ["A dotted path into the run input (customer_id, customer.id), at most 200 characters, or empty for none."]
    return errors


def flow_control_set(*, graph: Graph, values: dict[str, Any], actor: str, actor_type: str) -> list[str]:
    """Set the flow control ``values`` given (a subset of FIELDS) on ``graph`` (not saved:
    the caller saves the returned field names inside its transaction, where this runs).
    A change is audited as ``graph.flow_control`` and makes the graph's gate due, so held
    runs that fit the new limits are admitted by the next claim. Raises ValidationError
    with field errors."""
    errors = flow_control_errors(values)
    if errors:
        raise ValidationError(errors)
    changed = [name for name in FIELDS if name in values and values[name] != getattr(graph, name)]
    if not changed:
        return []
    before = {name: getattr(graph, name) for name in changed}
    for name in changed:
        setattr(graph, name, values[name])
    audit(actor, "graph.flow_control", graph, actor_type=actor_type, **{name: getattr(graph, name) for name in changed}, previous=before)
    engine.flow_gate_touch(graph.pk)
    return changed
