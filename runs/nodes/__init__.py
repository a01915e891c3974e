"""The node-kind registry: kind name -> NodeKind instance, from settings.BALLAST_NODE_KINDS.

Kinds are imported lazily by dotted path (healthchecks' integration pattern), so the
registry never imports an app that itself imports the engine.
"""
from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from runs.nodes.base import NodeKind


class UnknownNodeKind(KeyError):
    """No node kind is registered under that name."""


@cache
def get_kind(kind: str) -> NodeKind[Any]:
    """Return the (singleton) NodeKind for ``kind``. Raises UnknownNodeKind."""
    path = settings.BALLAST_NODE_KINDS.get(kind)
    if path is None:
        raise UnknownNodeKind(kind)
    kind_class: type[NodeKind[Any]] = import_string(path)
    return kind_class()


def all_kinds() -> dict[str, NodeKind[Any]]:
    """Every registered kind, by name, in settings order."""
    return {name: get_kind(name) for name in settings.BALLAST_NODE_KINDS}
