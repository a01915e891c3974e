"""Step timeouts cannot run out: nodes that ignore their timeout never keep a later timed
node from running (in-process; the real-worker version with recycling is in
tests/crash/test_step_timeouts.py)."""
from __future__ import annotations

import pytest

from runs.models import Step
from tests.support import engine
from tests.support.specs import chain, effect, graph, node, run_local
from tests.support.tools import read_effects

pytestmark = pytest.mark.django_db(transaction=True)

# More than the 8 threads of the fixed pool timed steps used to share.
OVERRUNS = 10


def hang_spec(seconds: float = 15.0, timeout: float = 0.5, mode: str = "sleep") -> dict:
    return graph(
        [
            node("start", "start"),
            node("hang", "tool", config={"tool": "ignore_timeout", "args": {"seconds": seconds, "mode": mode}}, timeout_seconds=timeout),
            node("end", "end"),
        ],
        chain("start", "hang", "end"),
    )


def test_nodes_that_ignore_their_timeout_never_starve_a_later_timed_node(effects_file):
    # Each overrunning thread sleeps far longer than the loop takes on a loaded machine, so
    # all of them are still alive at the count below (a live count: an earlier test's
    # abandoned thread may end meanwhile, so the count is not compared with one taken before).
    for _ in range(OVERRUNS):
        run = run_local(hang_spec(seconds=120), timeout=10)
        assert run.status == "failed" and run.error["code"] == "timeout", run.error
        assert Step.objects.get(run=run, node_id="hang").error["code"] == "timeout"
    # Every overrunning node really ran (none was failed without starting) ...
    assert [e["label"] for e in read_effects(str(effects_file))] == ["ignore_timeout"] * OVERRUNS
    assert engine.abandoned_steps() >= OVERRUNS
    # ... and a normal node with a timeout still runs and succeeds.
    ok = run_local(graph([node("start", "start"), effect("ok", timeout_seconds=5), node("end", "end")], chain("start", "ok", "end")), timeout=10)
    assert ok.status == "succeeded", ok.error
    assert [e["label"] for e in read_effects(str(effects_file))][-1] == "ok"


def test_an_exception_in_a_timed_node_fails_its_attempt_not_the_caller():
    spec = graph(
        [node("start", "start"), node("f", "tool", config={"tool": "flaky", "args": {"fail_times": 1, "code": "boom", "retryable": False}}, timeout_seconds=5), node("end", "end")],
        chain("start", "f", "end"),
    )
    run = run_local(spec, timeout=10)
    assert run.status == "failed" and run.error["code"] == "boom"
