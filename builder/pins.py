"""Test data pinned per node: writes to ``Graph.draft_pins``, beside the draft (never published, never run)."""
from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.chain import audit
from core.errors import ServiceError
from graphs.models import Graph

# Largest pinned state of one node (UTF-8 bytes of its compact JSON): test data is a state
# a person reads and edits in a panel, not a data set.
MAX_PIN_BYTES = 256 * 1024
# Most nodes with pinned data in one graph (a graph has at most a few hundred nodes).
MAX_PINS = 500


class PinInvalid(ServiceError, ValueError):
    """The pinned data is refused; ``fields`` says why under ``data``."""

    code = "pin_invalid"

    def __init__(self, message: str):
        super().__init__(message, message=message, fields={"data": [message]})


def _node_ids(graph: Graph) -> set[str]:
    nodes = graph.draft.get("nodes") if isinstance(graph.draft, dict) else None
    return {n["id"] for n in nodes or [] if isinstance(n, dict) and isinstance(n.get("id"), str)}


def graph_pin_set(*, graph: Graph, node_id: str, data: dict[str, Any], user: Any = None) -> dict[str, Any]:
    """Pin ``data`` (a JSON object: the state the node is tested and previewed with) as node
    ``node_id``'s test data, replacing what was pinned. Pins live beside the draft: a draft
    save never touches them, publishing and runs never read them. Audited as ``graph.pin``
    (the node and the size, not the data). Returns every pin of the graph ``{node id: data}``.

    Raises LookupError when the draft has no node ``node_id``; PinInvalid when the data
    is over MAX_PIN_BYTES or the graph would have more than MAX_PINS pins.
    """
    size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > MAX_PIN_BYTES:
        raise PinInvalid(f"Pinned data may be at most {MAX_PIN_BYTES // 1024} KB of JSON; this is {size // 1024} KB.")
    with transaction.atomic():
        # The row lock makes two pins of different nodes at once both land (read-modify-write
        # of one JSON column); SQLite's IMMEDIATE transactions serialise them the same way.
        locked = Graph.objects.select_for_update().get(pk=graph.pk)
        if node_id not in _node_ids(locked):
            raise LookupError(node_id)
        pins = dict(locked.draft_pins or {})
        if node_id not in pins and len(pins) >= MAX_PINS:
            raise PinInvalid(f"A graph may have at most {MAX_PINS} nodes with pinned data.")
        pins[node_id] = data
        Graph.objects.filter(pk=locked.pk).update(draft_pins=pins, updated_at=timezone.now())
        actor = user.get_username() if user is not None else "system"
        audit(actor, "graph.pin", locked, actor_type="user" if user else "system", node=node_id, bytes=size)
    graph.draft_pins = pins
    return pins


def graph_pin_clear(*, graph: Graph, node_id: str, user: Any = None) -> dict[str, Any]:
    """Unpin node ``node_id``'s test data (nothing pinned: nothing changes, nothing is
    audited; otherwise audited as ``graph.unpin``). Returns the graph's remaining pins."""
    with transaction.atomic():
        locked = Graph.objects.select_for_update().get(pk=graph.pk)
        pins = dict(locked.draft_pins or {})
        if pins.pop(node_id, None) is not None:
            Graph.objects.filter(pk=locked.pk).update(draft_pins=pins, updated_at=timezone.now())
            actor = user.get_username() if user is not None else "system"
            audit(actor, "graph.unpin", locked, actor_type="user" if user else "system", node=node_id)
    graph.draft_pins = pins
    return pins
