"""Compiled graph versions (spec + topology + reducers), cached: versions are immutable."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from builder.models import GraphVersion
from builder.spec import GraphSpec, NodeSpec
from runs.engine import scheduler
from runs.engine.types import spec_node_id
from runs.nodes.base import NodeKind


@lru_cache(maxsize=512)
def compiled_graph(version_id: int) -> scheduler.CompiledGraph:
    """The parsed spec and topology of graph version ``version_id`` (one query, then cached).

    Raises GraphVersion.DoesNotExist."""
    spec = GraphVersion.objects.values_list("spec", flat=True).get(pk=version_id)
    return scheduler.CompiledGraph(GraphSpec.model_validate(spec))


def step_node(version_id: int, step_node_id: str) -> NodeSpec:
    """The spec node a (child) step of a run of ``version_id`` executes."""
    return compiled_graph(version_id).topology.nodes[spec_node_id(step_node_id)]


def spawns_children(kind: Any) -> bool:
    """Whether a node kind runs through child steps (it overrides ``execute_child``)."""
    return type(kind).execute_child is not NodeKind.execute_child
