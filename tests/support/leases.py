"""Steps under a lease for status and recovery tests: a run stopped before its 'pay' step, and dead owners."""
from __future__ import annotations

import subprocess

from graphs.models import GraphVersion
from runs.engine import workers
from runs.models import Run, Step
from runs.nodes.base import NodeResult
from runs.services import run_start
from tests.support import engine
from tests.support.specs import chain, effect, graph, node, publish


def pay_version(*, unsafe: bool = False) -> GraphVersion:
    """start -> pay (a recorded effect; ``unsafe``: not safe to repeat) -> end."""
    return publish(graph([node("start", "start"), effect("pay", unsafe=unsafe), node("end", "end")], chain("start", "pay", "end")))


def run_at_pay(version: GraphVersion | None = None) -> tuple[Run, Step]:
    """A run whose start step committed and whose 'pay' step is pending (nothing dispatched)."""
    with engine.local_mode():
        run = run_start(version=version or pay_version(), run_input={})
    start = engine.step_claim(Step.objects.get(run=run, node_id="start").pk, "tester:1:1")
    engine.step_commit(start, NodeResult(), keep_next=False)
    return run, Step.objects.get(run=run, node_id="pay")


def begun(claimed):
    """``claimed`` as the loop leaves it right before its node runs: a step not safe to
    repeat has its attempt marked begun (runs.engine.store.claims.mark_effect_begun), so a
    crash from here on parks it instead of re-queueing it. Returns ``claimed``."""
    from runs.engine.store import claims

    assert claimed is not None and claims.mark_effect_begun(claimed)
    return claimed


def dead_owner() -> str:
    """The worker id (``host:pid:start``) of a process of this host, SIGKILLed and reaped."""
    proc = subprocess.Popen(["sleep", "60"])
    owner = workers.worker_id(proc.pid)
    proc.kill()
    proc.wait()
    return owner
