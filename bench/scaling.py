"""Issue 11's flatness target: cost per node against run length (``scaling``), in-process
on either database. (Cost against state size is the ``statesize`` case in bench/cases.py.)

- scaling.loop: a two-node loop run for 10, 100 and 1,000 steps; scaling.chain: chains of
  10, 100 and 500 nodes (start and end included: 500 is the graph size limit). A sample is the drive time (run creation included) over the
  steps the run committed; the target wants the largest size within 10 % of the smallest.
"""
from __future__ import annotations

from bench import graphs
from bench.cases import start_inprocess
from bench.core import Reporter, check, reset_tables

LOOP_STEPS = (10, 100, 1000)
CHAIN_NODES = (10, 100, 500)


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
        ("loop", [n] if n else list(LOOP_STEPS), graphs.loop, lambda s: (max(1, s // 2), 2 * max(1, s // 2) + 2)),
        # A chain of s nodes counts start and end (a graph holds at most 500 nodes).
        ("chain", [n] if n else list(CHAIN_NODES), lambda s: graphs.linear(s - 2), lambda s: (s - 2, s)),
    ]
    for shape, sizes, build, expect in shapes:
        reset_tables()
        for size in sizes:
            version = graphs.publish(build(size))
            i, steps = expect(size)
            rid, _ = start_inprocess(version)  # warm-up: compiled graph, plans for this shape
            _check_run(rid, i, steps)
            samples = []
            for _ in range(runs):
                rid, seconds = start_inprocess(version)
                _check_run(rid, i, steps)
                samples.append(seconds * 1000 / steps)
            rep.emit(f"scaling.{shape}", n=size, runs=runs, samples=samples, unit="ms/step", per_commit=1, steps=steps,
                     note=f"{shape} of {size} {'steps' if shape == 'loop' else 'nodes'}: run_start + drive_local wall time / {steps} committed steps")
