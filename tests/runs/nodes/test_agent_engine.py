"""The agent node through the engine on the real database: the example graph with the mock and
with both SDKs against the local protocol server, child steps and their costs, retries that
honour Retry-After, failures, budgets, and credentials that never reach a row or a log."""

import copy
import itertools
import json
import logging
from decimal import Decimal
from pathlib import Path

import pytest
from genai_prices import extract_usage

from audit.models import AuditEntry
from runs.models import RunEvent, Step, StepAttempt
from runs.providers import pricing
from tests.support.llm_server import TEST_KEY, Fault, Reply, assert_stored_cost
from tests.support.specs import edge, graph, node, run_local

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLE = json.loads((Path(__file__).resolve().parents[3] / "examples" / "agent_tools.json").read_text())
QUESTION = {"question": "Can I get my money back?", "order_id": "A-1001"}
TOOL_TURN = Reply(
    tool_calls=[
        {"id": "call_order", "name": "order_lookup", "arguments": {"order_id": "A-1001"}},
        {"id": "call_policy", "name": "kb_search", "arguments": {"query": "refund policy", "limit": 1}},
    ],
    usage={"input": 900, "cached": 128, "output": 60},
)
ANSWER_TURN = Reply(text="Yes: A-1001 is within the 30-day window.", usage={"input": 1400, "cached": 896, "output": 40})


_names = itertools.count()


def example(**agent_config):
    """The example graph with the agent's config changed (a fresh name each time)."""
    spec = copy.deepcopy(EXAMPLE)
    spec["name"] = f"{spec['name']} #{next(_names)}"
    agent = next(n for n in spec["nodes"] if n["id"] == "agent")
    agent["config"].update(agent_config)
    agent["retry"] = {"max_attempts": 3, "backoff_seconds": 0}
    return spec


def steps(run):
    return {s.node_id: s for s in Step.objects.filter(run=run)}


def test_example_runs_offline_with_the_mock():
    run = run_local(copy.deepcopy(EXAMPLE), QUESTION)
    assert run.status == "succeeded", run.error
    assert run.output["answer"].startswith("Order A-1001 ($49.00)")
    by_id = steps(run)
    assert set(by_id) == {
        "start", "agent", "end",
        "agent#0/turn-0", "agent#0/tool-0-call_order", "agent#0/tool-0-call_policy", "agent#0/turn-1",
    }
    # The two tool calls of one turn were spawned together: parallel child steps.
    spawned = [e.data["children"] for e in RunEvent.objects.filter(run=run, kind="step_suspended").order_by("id")]
    assert spawned == [["turn-0"], ["tool-0-call_order", "tool-0-call_policy"], ["turn-1"]]
    turns = [by_id["agent#0/turn-0"], by_id["agent#0/turn-1"]]
    assert all(t.kind == "model_turn" and t.cost_usd > 0 and t.usage["model"] == "mock-1" for t in turns)
    assert by_id["agent#0/tool-0-call_order"].output["found"] is True
    assert by_id["agent"].cost_usd is None  # the loop itself spends nothing
    assert run.cost_usd == sum(t.cost_usd for t in turns)
    assert run.input_tokens == sum(t.usage["input_tokens"] for t in turns)


@pytest.mark.parametrize(
    "provider, model, path, flavor",
    [
        ("openai", "gpt-4o-mini", "/v1/chat/completions", "chat"),
        ("anthropic", "claude-haiku-4-5", "/v1/messages", "default"),
    ],
)
def test_example_runs_end_to_end_with_each_sdk(sdk_providers, provider, model, path, flavor):
    sdk_providers.set_script([TOOL_TURN, ANSWER_TURN])
    run = run_local(example(provider=provider, model=model, options={}), QUESTION)
    assert run.status == "succeeded", run.error
    assert run.output == {"answer": ANSWER_TURN.text}

    calls = sdk_providers.calls(path)
    assert [c.turn for c in calls] == [0, 1]
    by_id = steps(run)
    total = Decimal(0)
    for call, key in zip(calls, ("turn-0", "turn-1"), strict=True):
        step = by_id[f"agent#0/{key}"]
        # The model turn's own idempotency key went to the provider.
        assert call.headers["idempotency-key"] == step.idempotency_key
        # Cost as genai-prices computes it from the very response the server sent.
        expected = extract_usage(call.response, provider_id=provider, api_flavor=flavor).calc_price().total_price
        assert_stored_cost(step.cost_usd, expected)
        assert step.usage["price_version"] == pricing.price_version()
        total += expected
    # Cost columns keep 6 decimal places, so the run's running total may differ from the
    # exact sum by rounding (a micro-dollar per step at most).
    assert abs(run.cost_usd - total) <= Decimal("0.000001") * len(calls)
    # The tool results the model saw on turn 1 came from the committed tool steps.
    second = calls[1].body["messages"]
    assert "A-1001" in json.dumps(second) and "Refund policy" in json.dumps(second)


def test_model_turn_retries_after_429_honouring_retry_after(sdk_providers):
    sdk_providers.set_script([TOOL_TURN, ANSWER_TURN])
    sdk_providers.fail(Fault(status=429, retry_after="1", message="Rate limit reached"))
    run = run_local(example(provider="openai", model="gpt-4o-mini", options={}), QUESTION)
    assert run.status == "succeeded", run.error
    turn0 = Step.objects.get(run=run, node_id="agent#0/turn-0")
    attempts = list(StepAttempt.objects.filter(step=turn0).order_by("number"))
    assert [a.status for a in attempts] == ["failed", "succeeded"]
    assert attempts[0].error["code"] == "rate_limited" and attempts[0].error["retry_after"] == 1.0
    assert attempts[0].usage is None and attempts[0].cost_usd is None  # a refused call costs nothing
    assert (attempts[1].started_at - attempts[0].finished_at).total_seconds() >= 0.9
    retrying = RunEvent.objects.get(run=run, kind="step_retrying")
    assert retrying.data["error"]["code"] == "rate_limited"


def test_a_rejected_model_turn_fails_the_run_at_once(sdk_providers):
    sdk_providers.fail(Fault(status=400, message="prompt is too long"))
    run = run_local(example(provider="anthropic", model="claude-haiku-4-5", options={}), QUESTION)
    assert run.status == "failed"
    assert run.error["code"] == "provider_rejected" and "prompt is too long" in run.error["message"]
    turn0 = Step.objects.get(run=run, node_id="agent#0/turn-0")
    assert turn0.status == "failed" and StepAttempt.objects.filter(step=turn0).count() == 1


def test_a_failed_tool_is_told_to_the_model_which_answers(effects_file):
    script = [
        {"turn": 0, "reply": "", "tool_calls": [{"id": "c1", "name": "flaky", "arguments": {"fail_times": 9, "retryable": False}}]},
        {"turn": 1, "reply": "The lookup failed; I will escalate."},
    ]
    spec = graph(
        [
            node("start", "start"),
            node("agent", "agent", config={"prompt": "go", "tools": ["flaky"], "options": {"script": script}}),
            node("end", "end"),
        ],
        [edge("start", "agent"), edge("agent", "end")],
    )
    run = run_local(spec)
    assert run.status == "succeeded", run.error
    assert run.state["answer"] == "The lookup failed; I will escalate."
    tool = Step.objects.get(run=run, node_id="agent#0/tool-0-c1")
    assert tool.status == "failed" and tool.error["code"] == "flaky"
    turn1 = Step.objects.get(run=run, node_id="agent#0/turn-1")
    fed_back = turn1.input["messages"][-1]
    assert fed_back["is_error"] and json.loads(fed_back["content"])["error"]["code"] == "flaky"


def test_budget_stops_the_agent_before_a_model_turn_that_could_overrun(sdk_providers):
    sdk_providers.set_script([TOOL_TURN, ANSWER_TURN])
    spec = example(provider="openai", model="gpt-4o-mini", options={}, max_tokens=4000)
    # Enough for turn 0's worst case, not for turn 1's (longer input, same max_tokens).
    from runs.nodes.agent import AgentNode

    agent = AgentNode()
    cfg = agent.config_model.model_validate(next(n for n in spec["nodes"] if n["id"] == "agent")["config"])
    first = agent.execute(cfg, _ctx(QUESTION)).spawn[0]
    turn0_worst, _ = agent.estimate_child_cost(cfg, first, QUESTION)
    spec["settings"] = {"budget_usd": str(turn0_worst + Decimal("0.0001")), "max_parallelism": 4}
    run = run_local(spec, QUESTION)
    assert run.status == "failed"
    assert run.error["code"] == "budget_exceeded" and "may cost up to" in run.error["message"]
    assert run.cost_usd <= Decimal(spec["settings"]["budget_usd"])
    by_id = steps(run)
    # Nothing committed is lost: turn 0 and both tool calls stay succeeded.
    assert {k: s.status for k, s in by_id.items() if k.startswith("agent#")} == {
        "agent#0/turn-0": "succeeded",
        "agent#0/tool-0-call_order": "succeeded",
        "agent#0/tool-0-call_policy": "succeeded",
        "agent#0/turn-1": "cancelled",
    }
    assert [c.turn for c in sdk_providers.calls()] == [0]  # turn 1 never reached the provider
    assert by_id["agent#0/turn-1"].error["code"] == "budget_exceeded"
    assert RunEvent.objects.filter(run=run, kind="run_failed", data__error__code="budget_exceeded").exists()


def test_keys_never_reach_rows_events_or_logs(sdk_providers, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    sdk_providers.set_script([TOOL_TURN, ANSWER_TURN])
    ok = run_local(example(provider="openai", model="gpt-4o-mini", options={}), QUESTION)
    assert ok.status == "succeeded"
    wrong = "sk-proj-THISisAwrongKEY0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", wrong)
    bad = run_local(example(provider="anthropic", model="claude-haiku-4-5", options={}), QUESTION)
    assert bad.status == "failed" and bad.error["code"] == "provider_rejected"
    stored = json.dumps(
        [
            list(RunEvent.objects.values_list("data", flat=True)),
            list(Step.objects.values_list("input", "output", "error", "usage")),
            list(StepAttempt.objects.values_list("error", "usage")),
            list(AuditEntry.objects.values_list("data", flat=True)),
            [ok.error, bad.error, ok.state, bad.state],
        ],
        default=str,
    )
    for secret in (TEST_KEY, wrong, "THISisAwrongKEY"):
        assert secret not in stored
        assert secret not in caplog.text


def _ctx(state):
    from runs.nodes.base import NodeContext

    return NodeContext(run_id=0, run_uuid="u", step_id=0, node_id="agent", iteration=0, attempt=1,
                       idempotency_key="k", state=dict(state), run_input=dict(state))
