"""Compiled graph versions (spec + topology + reducers), cached: versions are immutable; and
the scheduler's decision for a run as committed."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from graphs.models import GraphVersion
from graphs.spec import GraphSpec, NodeSpec
from runs.engine import scheduler
from runs.engine.types import spec_node_id
from runs.nodes import get_kind
from runs.nodes.base import ChildCall, NodeKind


@lru_cache(maxsize=512)
def compiled_graph(version_id: int) -> scheduler.CompiledGraph:
    """The parsed spec and topology of graph version ``version_id`` (one query, then cached).

    Raises GraphVersion.DoesNotExist."""
    spec = GraphVersion.objects.values_list("spec", flat=True).get(pk=version_id)
    return scheduler.CompiledGraph(GraphSpec.model_validate(spec))


def step_node(version_id: int, step_node_id: str) -> NodeSpec:
    """The spec node a (child) step of a run of ``version_id`` executes."""
    return compiled_graph(version_id).topology.nodes[spec_node_id(step_node_id)]


def step_repeat_safe(version_id: int, step_node_id: str, *, child: ChildCall | None = None) -> bool:
    """Whether a step of ``step_node_id`` (a child step: ``child``, the call it makes) may
    run again after an attempt whose outcome is unknown (a crash, a timeout): the node's
    ``repeat_safe`` where it sets one, else its kind's default."""
    node = step_node(version_id, step_node_id)
    kind = get_kind(node.kind)
    config = kind.config_model.model_validate(node.config)
    if child is not None:
        return kind.is_child_repeat_safe(config, child)
    return kind.is_step_repeat_safe(config, node.repeat_safe)


def spawns_children(kind: Any) -> bool:
    """Whether a node kind runs through child steps (it overrides ``execute_child``)."""
    return type(kind).execute_child is not NodeKind.execute_child


@lru_cache(maxsize=512)
def state_keys(version_id: int) -> frozenset[str]:
    """The state keys a graph version knows: declared (``state``), the input schema's
    properties, and every key a node may write (``NodeKind.writes``). ``input`` (the run
    input) is reserved and not among them. A node whose config does not parse adds
    nothing (a published version's configs all parse)."""
    spec = compiled_graph(version_id).spec
    keys = set(spec.state) | spec.input_names()
    for node in spec.nodes:
        kind = get_kind(node.kind)
        try:
            keys |= kind.writes(kind.config_model.model_validate(node.config))
        except ValueError:
            continue
    keys.discard("input")
    return frozenset(keys)


@lru_cache(maxsize=512)
def graph_name(version_id: int) -> str:
    """The name of the graph whose version ``version_id`` is (one query, then cached: a
    label of the LLM usage metrics; a renamed graph keeps its old name in a process
    until it restarts). "" for a version that no longer exists."""
    return GraphVersion.objects.filter(pk=version_id).values_list("graph__name", flat=True).first() or ""
