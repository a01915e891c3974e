"""Issue 11's flatness target: cost per node against run length (``scaling``), in-process
on either database. (Cost against state size is the ``statesize`` case in bench/cases.py.)

- scaling.loop: a two-node loop run for 10, 100 and 1,000 steps; scaling.chain: chains of
  10, 100 and 500 nodes (start and end included: 500 is the graph size limit). A sample
  is the time to drive the run from its start step to its end over the steps it
  committed (creating the run is a fixed cost of its own, ``create_ms``, and
  ``ms_per_step_with_create`` counts it in); the target wants the largest per-step cost
  within 10 % of the smallest.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

from bench import graphs
from bench.core import Reporter, check, reset_tables

LOOP_STEPS = (10, 100, 1000)
CHAIN_NODES = (10, 100, 500)


def loop(steps: int) -> dict[str, Any]:
    """start -> inc -> more? (condition ``i < steps // 2``: true back to inc, false to end)
    -> end: ``steps // 2`` iterations of two nodes, so a correct run ends with
    ``i == steps // 2`` after ``2 * (steps // 2) + 2`` committed steps."""
    iterations = max(1, steps // 2)
    nodes = [
        graphs._node("start", "start"),
        {**graphs._node("inc", "transform", {"set": {"i": "i + 1"}}), "max_iterations": iterations + 1},
        graphs._node("more", "condition", {"expression": f"i < {iterations}"}),
        graphs._node("end", "end", {"output": ["i"]}),
    ]
    e = graphs._edge
    edges = [e("start", "inc"), e("inc", "more"), e("more", "inc", "true"), e("more", "end", "false")]
    return {
        "name": f"bench-loop-{steps}",
        "description": f"Benchmark: a loop of {iterations} iterations of two nodes.",
        "state": {"i": {"reducer": "replace", "default": 0}},
        "settings": {"max_steps": 2 * iterations + 10},
        "nodes": nodes,
        "edges": edges,
    }


def _committed(run_id: int) -> int:
    from runs.models import Step

    return Step.objects.filter(run_id=run_id, status="succeeded").count()


def _check_run(run_id: int, i: int, steps: int) -> None:
    from runs.models import Run

    run = Run.objects.get(pk=run_id)  # the model's state, however it is stored
    status, state, error = run.status, run.state, run.error
    check(status == "succeeded", f"run {run_id}: {status} {error}")
    check(state.get("i") == i, f"run {run_id}: i={state.get('i')!r}, expected {i}")
    committed = _committed(run_id)
    check(committed == steps, f"run {run_id}: {committed} steps committed, expected {steps}")


def case_scaling(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """Cost per committed step of the loop and the chain at each size (``n``: one size for
    both, for a quick look)."""
    shapes = [
        ("loop", [n] if n else list(LOOP_STEPS), loop, lambda s: (max(1, s // 2), 2 * max(1, s // 2) + 2)),
        # A chain of s nodes counts start and end (a graph holds at most 500 nodes).
        ("chain", [n] if n else list(CHAIN_NODES), lambda s: graphs.linear(s - 2), lambda s: (s - 2, s)),
    ]
    from runs.engine import api as engine
    from runs.services import run_start

    def one(version) -> tuple[int, float, float]:
        """(run id, ms to create the run, ms to drive it to its end)."""
        with engine.local_mode() as queue:
            t0 = time.perf_counter()
            run = run_start(version=version, run_input={})
            t1 = time.perf_counter()
            engine.drive_local(run.pk, queue=queue, timeout=600)
            t2 = time.perf_counter()
        return run.pk, (t1 - t0) * 1000, (t2 - t1) * 1000

    for shape, sizes, build, expect in shapes:
        reset_tables()
        for size in sizes:
            version = graphs.publish(build(size))
            i, steps = expect(size)
            rid, _, _ = one(version)  # warm-up: compiled graph, plans for this shape
            _check_run(rid, i, steps)
            samples, creates, with_create = [], [], []
            for _ in range(runs):
                rid, create_ms, drive_ms = one(version)
                _check_run(rid, i, steps)
                samples.append(drive_ms / steps)
                creates.append(create_ms)
                with_create.append((create_ms + drive_ms) / steps)
            rep.emit(f"scaling.{shape}", n=size, runs=runs, samples=samples, unit="ms/step", per_commit=1, steps=steps,
                     create_ms=statistics.median(creates), ms_per_step_with_create=statistics.median(with_create),
                     note=f"{shape} of {size} {'steps' if shape == 'loop' else 'nodes'}: drive_local wall time / {steps} "
                          "committed steps (run creation apart: create_ms)")
