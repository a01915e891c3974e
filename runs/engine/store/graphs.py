"""Compiled graph versions (spec + topology + reducers), cached: versions are immutable; and
the scheduler's decision for a run as committed."""
from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from graphs.models import GraphVersion
from graphs.spec import GraphSpec, NodeSpec
from runs.engine import scheduler
from runs.engine.store import state as state_store
from runs.engine.types import spec_node_id
from runs.models import Run
from runs.nodes import get_kind
from runs.nodes.base import ChildCall, NodeKind, NodeResult


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


def transition(run: Run, *, node_id: str, iteration: int, depth: int, result: NodeResult, other_active: Iterable[str]) -> scheduler.Transition:
    """scheduler.apply_step for ``result`` of step (``node_id``, ``iteration``, ``depth``) on
    ``run`` as held in memory (state, bookkeeping, step count); ``other_active``: spec node
    ids of the run's other active steps. Pure apart from the cached graph lookup and,
    for keys with order-sensitive reducers the instance does not hold the
    contributions of yet, one read of those (runs.engine.store.state.load_contributions)."""
    graph = compiled_graph(run.graph_version_id)
    if result.updates:
        state_store.load_contributions(run, graph, result.updates)
    return scheduler.apply_step(
        graph,
        state=run.state,
        bookkeeping=run.scheduler,
        node_id=node_id,
        iteration=iteration,
        depth=depth,
        updates=result.updates,
        sets=result.sets,
        route=result.route,
        other_active=other_active,
        step_count=run.step_count,
        max_steps=run.max_steps,
    )


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
