"""Previews of run actions (resume, retry, fork) and the comparison of two runs, for the run page.

A preview is the engine's own plan of the action (``runs.engine.api.run_*_preview``: the
same function the action applies, so what is shown cannot drift from what happens) with
the pre-run cost estimator's worst case (``runs.reports.estimate``) for the steps that run
again and the costliest path after them. Nothing here writes.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from runs.engine import api as engine
from runs.models import Run, Step, StepStatus
from runs.reports.estimate import costliest_path, node_costs


def _estimates(run: Run, state: dict[str, Any]) -> tuple[Any, dict[str, dict[str, Any]]]:
    """(compiled graph, {node id: {"usd": str|None, "tokens"}}) of one execution of each
    node of ``run``'s version with ``state`` (prompts rendered from it)."""
    graph = engine.compiled_graph(run.graph_version_id)
    nodes = node_costs(graph.spec, state=state)
    return graph, {n["node_id"]: {"usd": n["usd"], "tokens": n["tokens"]} for n in nodes}


def _tail(graph: Any, costs: dict[str, dict[str, Any]], starts: list[str]) -> dict[str, Any]:
    """The worst case from the steps that run again (``starts``, node ids) to an end:
    ``{"usd" (str: the priced part), "tokens", "unpriced": [node ids], "then": [node ids
    after the starts on the costliest paths]}``. Each start's costliest path is added:
    parallel branches all run; paths that meet again count the shared part twice (an
    upper bound)."""
    rows = [{"node_id": k, **v} for k, v in costs.items()]
    usd, tokens, unpriced, then = Decimal(0), 0, [], []
    for start in dict.fromkeys(starts):
        if start not in graph.topology.nodes:
            continue
        path = costliest_path(graph.topology, rows, start)
        usd += Decimal(path["usd"])
        tokens += path["tokens"]
        unpriced += [n for n in path["unpriced"] if n not in unpriced]
        then += [n for n in path["nodes"] if n not in starts and n not in then]
    return {"usd": str(usd), "tokens": tokens, "unpriced": unpriced, "then": then}


def _kept(step_ids: list[int]) -> tuple[list[dict[str, Any]], str]:
    """The kept steps as rows (``step``, ``node_id``, ``iteration``, ``parent``,
    ``cost_usd``) in id order, and their summed cost (str USD)."""
    steps = Step.objects.filter(pk__in=step_ids).order_by("id").only("id", "node_id", "iteration", "parent_id", "cost_usd")
    rows = [
        {"step": s.pk, "node_id": s.node_id, "iteration": s.iteration, "parent": s.parent_id,
         "cost_usd": None if s.cost_usd is None else str(s.cost_usd)}
        for s in steps
    ]  # fmt: skip
    total = sum((s.cost_usd for s in steps if s.cost_usd is not None), Decimal(0))
    return rows, str(total)


def _payload(*, action: str, run: Run, graph: Any, costs: dict[str, dict[str, Any]], run_again: list[dict[str, Any]], kept: list[int]) -> dict[str, Any]:
    kept_rows, kept_cost = _kept(kept)
    starts = [r["node_id"] for r in run_again if r.get("parent") is None]
    tail = _tail(graph, costs, starts)
    then = [{"node_id": n, "estimate": costs.get(n, {"usd": None, "tokens": 0})} for n in tail.pop("then")]
    return {
        "action": action,
        "run": run.pk,
        "kept": kept_rows,
        "kept_cost_usd": kept_cost,
        "run_again": run_again,
        "then": then,
        "estimate": tail,
    }


def resume_preview(*, run: Run, retry: bool = False) -> dict[str, Any]:
    """What resuming (``retry``: retrying) ``run`` would do now: ``kept`` (committed
    steps that stay facts), ``run_again`` (the steps reopened or re-queued: ``step``,
    ``node_id``, ``iteration``, ``parent``, ``status`` they get, ``max_attempts``,
    ``estimate`` of one execution; a child step's is counted in its parent's), ``then``
    (nodes after them on the costliest path, with estimates) and ``estimate`` (worst
    case of the rest of the run: ``usd`` of the priced nodes, ``tokens``, ``unpriced``).
    Raises RunNotFound, StepStateError (the run cannot be resumed / retried)."""
    plan = engine.run_retry_preview(run.pk) if retry else engine.run_resume_preview(run.pk)
    graph, costs = _estimates(run, run.state)
    run_again = [
        {
            "step": r.step_id, "node_id": r.node_id, "iteration": r.iteration, "parent": r.parent_id,
            "status": r.status, "max_attempts": r.max_attempts,
            "estimate": costs.get(r.node_id) if r.parent_id is None else None,
        }
        for r in plan.reopen
    ]  # fmt: skip
    return {**_payload(action="retry" if retry else "resume", run=run, graph=graph, costs=costs, run_again=run_again, kept=plan.kept), "mode": plan.mode}


def fork_preview(*, run: Run, step_id: int, state_patch: dict[str, Any]) -> dict[str, Any]:
    """What forking ``run`` at committed step ``step_id`` with ``state_patch`` would start
    (as :func:`resume_preview`, plus ``state``: the new run's state, ``state_keys``: the
    keys a patch may write, ``patched``: the keys the patch writes, ``dropped``: the
    source's committed top-level steps the fork does not keep). ``run_again`` rows have
    no ``step`` (the fork creates them). Raises RunNotFound, StepStateError,
    StateWriteRefused (as the fork)."""
    plan = engine.run_fork_preview(run.pk, step_id=step_id, state_patch=state_patch)
    state = plan.transition.state
    graph, costs = _estimates(run, state)
    run_again = [
        {"step": None, "node_id": a.node_id, "iteration": a.iteration, "parent": None, "status": StepStatus.PENDING,
         "max_attempts": graph.topology.nodes[a.node_id].retry.max_attempts, "estimate": costs.get(a.node_id)}
        for a in plan.transition.activations
    ]  # fmt: skip
    kept = set(plan.kept)
    dropped = list(
        Step.objects.filter(run=run, parent__isnull=True, status=StepStatus.SUCCEEDED).exclude(pk__in=kept).order_by("id").values("id", "node_id", "iteration")
    )
    return {
        **_payload(action="fork", run=run, graph=graph, costs=costs, run_again=run_again, kept=plan.kept),
        "anchor": {"step": plan.anchor.pk, "node_id": plan.anchor.node_id, "iteration": plan.anchor.iteration},
        "state": state,
        "state_keys": sorted(engine.state_keys(run.graph_version_id)),
        "patched": sorted(plan.state_patch),
        "dropped": [{"step": d["id"], "node_id": d["node_id"], "iteration": d["iteration"]} for d in dropped],
    }
