"""Step timeouts in a REAL qcluster worker: nodes that ignore their timeout (asleep in a C
call, or busy in a Python loop) never stop a later timed node from running; a worker
holding too many abandoned step threads is recycled after its task."""
from __future__ import annotations

import pytest

from runs.models import Step
from runs.services import run_start
from tests.support.cluster import describe_db, wait_for_status
from tests.support.specs import chain, effect, graph, node, publish
from tests.support.tools import read_effects

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

OVERRUNS = 10  # more than the 8 threads of the fixed pool timed steps used to share


# Long enough for the node's code to start on a loaded 2-core machine with spinning
# threads about: the test is that every overrunning node runs, not how fast.
TIMEOUT = 1.5


def hang_spec(mode: str) -> dict:
    return graph(
        [
            node("start", "start"),
            node("hang", "tool", config={"tool": "ignore_timeout", "args": {"seconds": 4 if mode == "spin" else 60, "mode": mode}}, timeout_seconds=TIMEOUT),
            node("end", "end"),
        ],
        chain("start", "hang", "end"),
    )


def test_a_worker_full_of_overrun_steps_still_runs_the_next_timed_node(cluster_factory, effects_file):
    # One worker process, so every step goes through the same process (or its recycled successor).
    cluster = cluster_factory("timeouts", workers=1, extra_env={"BALLAST_MAX_ABANDONED_STEPS": "3"}).start()
    cluster.wait_ready()
    runs = []
    for i in range(OVERRUNS):
        run = run_start(version=publish(hang_spec("spin" if i < 2 else "sleep")), run_input={})
        runs.append(wait_for_status(run, ("succeeded", "failed"), timeout=30, clusters=[cluster]))
    for run in runs:
        assert run.status == "failed" and run.error["code"] == "timeout", describe_db(run.pk)
        assert Step.objects.get(run=run, node_id="hang").error["code"] == "timeout"
    effects = read_effects(str(effects_file))
    # Each overrunning node really started: none was failed without running.
    assert [e["label"] for e in effects] == ["ignore_timeout"] * OVERRUNS
    ok = run_start(version=publish(graph([node("start", "start"), effect("ok", timeout_seconds=10), node("end", "end")], chain("start", "ok", "end"))), run_input={})
    ok = wait_for_status(ok, ("succeeded", "failed"), timeout=30, clusters=[cluster])
    assert ok.status == "succeeded", describe_db(ok.pk) + cluster.log_tail()
    log = cluster.log_path.read_text(errors="replace")
    # Past 3 abandoned threads the worker asked to be recycled, and django-q2 did so cleanly.
    assert "recycling the process after this task" in log and "recycled worker" in log, cluster.log_tail()
    assert "reincarnated worker" not in log  # recycled, never killed or dead
    pids = [e["pid"] for e in read_effects(str(effects_file))]
    assert len(set(pids)) >= 3, pids  # 10 overruns with a bound of 3: at least two recycles
