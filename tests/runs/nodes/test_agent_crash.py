"""Crash tests of the agent loop with REAL qcluster processes killed with SIGKILL mid-loop.

An agent (the ``openai`` provider through the real SDK, against the local protocol server
in this test process) calls ``record_effect`` tools, whose executions are counted in the
effects file. A crash point (runs/engine/faults.py) hangs a worker once two tool calls
have been committed; the whole process group is killed; a fresh cluster finishes the run.
On restart the two committed tool calls and the finished model turns are neither executed
again (effects file, the server's request log) nor billed again (attempt rows, the run's
cost equal to one call per model turn at genai-prices' price).

    DATABASE_URL=sqlite:///var/prov.sqlite3 .venv/bin/pytest tests/runs/nodes/test_agent_crash.py -q
    for i in $(seq 20); do .venv/bin/pytest tests/runs/nodes/test_agent_crash.py -q -p no:cacheprovider || break; done
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from genai_prices import extract_usage

from runs.models import Step, StepAttempt
from runs.services import run_start
from tests.support.cluster import describe_db, wait_for_status
from tests.support.llm_server import TEST_KEY, Reply, assert_stored_cost
from tests.support.specs import edge, graph, node, publish
from tests.support.tools import read_effects

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

MODEL = "gpt-4o-mini"
CHAT = "/v1/chat/completions"


def agent_spec(max_turns: int = 4) -> dict:
    return graph(
        [
            node("start", "start"),
            node(
                "agent",
                "agent",
                retry={"max_attempts": 3, "backoff_seconds": 0},
                config={
                    "provider": "openai",
                    "model": MODEL,
                    "prompt": "Record two effects, then answer.",
                    "tools": ["record_effect"],
                    "max_turns": max_turns,
                    "max_tokens": 200,
                },
            ),
            node("end", "end"),
        ],
        [edge("start", "agent"), edge("agent", "end")],
    )


def effect_call(label: str, call_id: str) -> dict:
    return {"id": call_id, "name": "record_effect", "arguments": {"label": label}}


@pytest.fixture
def cluster_env(sdk_providers):
    """Environment that points a qcluster's ``openai`` provider at the local server."""
    return {
        "BALLAST_OPENAI_BASE_URL": sdk_providers.openai_base_url,
        "BALLAST_OPENAI_PRICE_PROVIDER": "openai",
        "OPENAI_API_KEY": TEST_KEY,
    }


def run_with_crash(cluster_factory, cluster_env, fault: str, at_kill):
    run = run_start(version=publish(agent_spec()), run_input={})
    crashed = cluster_factory("crashed", extra_env=cluster_env).start(fault=fault)
    report = crashed.wait_for_fault(timeout=60)
    crashed.kill()
    at_kill(run, report)
    fresh = cluster_factory("fresh", extra_env=cluster_env).start()
    return wait_for_status(run, ("succeeded", "failed", "cancelled"), timeout=60, clusters=[crashed, fresh])


def attempts(run, child: str) -> list[tuple[int, str]]:
    return list(
        StepAttempt.objects.filter(step__run=run, step__node_id=f"agent#0/{child}").order_by("number").values_list("number", "status")
    )


def check_billing(run, server, turns: list[str]) -> None:
    """Each model turn was called and paid for exactly once, at genai-prices' price."""
    ok = [c for c in server.calls(CHAT) if c.status == 200]
    assert sorted(c.turn for c in ok) == list(range(len(turns)))  # one provider call per turn
    total = Decimal(0)
    for call, key in zip(sorted(ok, key=lambda c: c.turn), turns, strict=True):
        step = Step.objects.get(run=run, node_id=f"agent#0/{key}")
        paid = [a for a in StepAttempt.objects.filter(step=step) if a.cost_usd is not None]
        assert len(paid) == 1, describe_db(run.pk)
        expected = extract_usage(call.response, provider_id="openai", api_flavor="chat").calc_price().total_price
        assert_stored_cost(paid[0].cost_usd, expected)
        assert call.headers["idempotency-key"] == step.idempotency_key
        total += expected
    assert abs(run.cost_usd - total) <= Decimal("0.000001") * len(turns)


def test_killed_before_the_next_model_turn_after_two_parallel_tool_calls(cluster_factory, cluster_env, sdk_providers, effects_file):
    sdk_providers.set_script(
        [
            Reply(tool_calls=[effect_call("A", "call_a"), effect_call("B", "call_b")], usage={"input": 400, "output": 40}),
            Reply(text="Recorded A and B.", usage={"input": 520, "cached": 256, "output": 9}),
        ]
    )

    def at_kill(run, report):
        assert report["node_id"] == "agent#0/turn-1"
        assert attempts(run, "turn-0") == [(1, "succeeded")]
        assert attempts(run, "tool-0-call_a") == [(1, "succeeded")]
        assert attempts(run, "tool-0-call_b") == [(1, "succeeded")]
        assert Counter(e["label"] for e in read_effects(str(effects_file))) == {"A": 1, "B": 1}
        assert [c.turn for c in sdk_providers.calls(CHAT)] == [0]

    run = run_with_crash(cluster_factory, cluster_env, "during_execute:agent#0/turn-1", at_kill)
    assert run.status == "succeeded", describe_db(run.pk)
    assert run.state["answer"] == "Recorded A and B."
    # Committed tool calls never ran again; the finished model turn was not called again.
    assert Counter(e["label"] for e in read_effects(str(effects_file))) == {"A": 1, "B": 1}
    assert attempts(run, "turn-0") == [(1, "succeeded")]
    assert attempts(run, "tool-0-call_a") == [(1, "succeeded")]
    assert attempts(run, "tool-0-call_b") == [(1, "succeeded")]
    # The interrupted turn ran again (same idempotency key), its lost attempt cost nothing.
    assert attempts(run, "turn-1") == [(1, "lost"), (2, "succeeded")]
    check_billing(run, sdk_providers, ["turn-0", "turn-1"])


def test_killed_right_after_the_second_tool_call_committed(cluster_factory, cluster_env, sdk_providers, effects_file):
    sdk_providers.set_script(
        [
            Reply(tool_calls=[effect_call("A", "call_a")], usage={"input": 400, "output": 30}),
            Reply(tool_calls=[effect_call("B", "call_b")], usage={"input": 480, "output": 30}),
            Reply(text="Done.", usage={"input": 560, "output": 4}),
        ]
    )

    def at_kill(run, report):
        assert report["point"] == "after_commit" and report["node_id"] == "agent#0/tool-1-call_b"
        for child in ("turn-0", "tool-0-call_a", "turn-1", "tool-1-call_b"):
            assert attempts(run, child) == [(1, "succeeded")], child
        assert not Step.objects.filter(run=run, node_id="agent#0/turn-2").exists()
        assert [c.turn for c in sdk_providers.calls(CHAT)] == [0, 1]

    run = run_with_crash(cluster_factory, cluster_env, "after_commit:agent#0/tool-1-call_b", at_kill)
    assert run.status == "succeeded", describe_db(run.pk)
    assert Counter(e["label"] for e in read_effects(str(effects_file))) == {"A": 1, "B": 1}
    for child in ("turn-0", "tool-0-call_a", "turn-1", "tool-1-call_b", "turn-2"):
        assert attempts(run, child) == [(1, "succeeded")], child
    check_billing(run, sdk_providers, ["turn-0", "turn-1", "turn-2"])
