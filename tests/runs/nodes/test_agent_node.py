"""The agent node kind on its own (no engine, no database): deterministic replay over
``ctx.children``, child execution, repeat safety, worst-case estimates and validation."""

import json
from decimal import Decimal

import pytest

from runs.nodes import get_kind
from runs.nodes.agent import MODEL_TURN, TOOL_CALL, AgentNode
from runs.nodes.base import ChildCall, NodeContext
from runs.providers import get_provider
from runs.providers.base import INVALID_ARGUMENTS_KEY
from runs.vocabulary import NodeError

TURN0 = {"turn": 0, "reply": "", "tool_calls": [
    {"id": "call_a", "name": "order_lookup", "arguments": {"order_id": "A-1001"}},
    {"id": "call_b", "name": "kb_search", "arguments": {"query": "refund"}},
]}


def config(**fields):
    fields.setdefault("prompt", "Order {{ order_id }}: {{ question }}")
    fields.setdefault("tools", ["order_lookup", "kb_search"])
    fields.setdefault("options", {"script": [TURN0, {"reply": "done"}]})
    return AgentNode.config_model.model_validate(fields)


def ctx(children=None, *, key="run:agent:0", state=None):
    state = state if state is not None else {"order_id": "A-1001", "question": "refund?"}
    return NodeContext(
        run_id=1, run_uuid="u", step_id=7, node_id="agent", iteration=0, attempt=1,
        idempotency_key=key, state=dict(state), run_input=dict(state), children=children or {},
    )


def ok(output):
    return {"status": "succeeded", "output": output}


def failed(code, message, retryable=False):
    return {"status": "failed", "error": {"code": code, "message": message, "retryable": retryable}}


def run_child(node, cfg, call, key):
    """Execute a spawned child the way the engine does, and return its committed result."""
    result = node.execute_child(cfg, call, ctx(key=key))
    return ok(result.output), result


def test_registered_as_agent():
    assert isinstance(get_kind("agent"), AgentNode)


def test_full_replay_spawns_turn_then_parallel_tools_then_answers():
    node, cfg = AgentNode(), config(system="You help with {{ order_id }}.")
    children = {}

    first = node.execute(cfg, ctx(children))
    [turn0] = first.spawn
    assert (turn0.key, turn0.label) == ("turn-0", MODEL_TURN)
    assert turn0.input["messages"] == [
        {"role": "system", "content": "You help with A-1001."},
        {"role": "user", "content": "Order A-1001: refund?"},
    ]
    children["turn-0"], turn0_result = run_child(node, cfg, turn0, "k:turn-0")
    assert turn0_result.usage.model == "mock-1" and turn0_result.cost_usd > 0
    assert turn0_result.usage.price_version == "mock-prices-1 (simulated)"

    second = node.execute(cfg, ctx(children))
    assert [(c.key, c.label) for c in second.spawn] == [("tool-0-call_a", TOOL_CALL), ("tool-0-call_b", TOOL_CALL)]
    assert second.spawn[0].input == {"tool": "order_lookup", "arguments": {"order_id": "A-1001"}, "call_id": "call_a", "turn": 0}
    for call in second.spawn:
        children[call.key], _ = run_child(node, cfg, call, f"k:{call.key}")

    third = node.execute(cfg, ctx(children))
    [turn1] = third.spawn
    assert turn1.key == "turn-1"
    roles = [m["role"] for m in turn1.input["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool"]
    assert json.loads(turn1.input["messages"][3]["content"])["order_id"] == "A-1001"
    children["turn-1"], _ = run_child(node, cfg, turn1, "k:turn-1")

    final = node.execute(cfg, ctx(children))
    assert final.spawn is None
    assert final.updates == {"answer": "done"}
    assert final.output == {"answer": "done", "turns": 2, "tool_calls": 2, "stop_reason": "stop", "model": "mock-1"}
    assert final.usage is None and final.cost_usd is None  # children carry the spend


def test_replay_is_deterministic_and_never_respawns_finished_children():
    node, cfg = AgentNode(), config()
    children = {"turn-0": ok({"text": "", "tool_calls": TURN0["tool_calls"], "stop_reason": "tool_calls", "model": "m"}),
                "tool-0-call_a": ok({"found": True})}
    one = node.execute(cfg, ctx(children))
    two = node.execute(cfg, ctx(children))
    assert [c.key for c in one.spawn] == [c.key for c in two.spawn] == ["tool-0-call_b"]
    assert one.spawn[0].input == two.spawn[0].input


def test_failed_tool_is_fed_back_as_an_error_result():
    node, cfg = AgentNode(), config()
    children = {
        "turn-0": ok({"text": "", "tool_calls": TURN0["tool_calls"], "stop_reason": "tool_calls", "model": "m"}),
        "tool-0-call_a": failed("http_5xx", "order store down"),
        "tool-0-call_b": ok([]),
    }
    [turn1] = node.execute(cfg, ctx(children)).spawn
    error_message = turn1.input["messages"][-2]
    assert error_message["is_error"] is True and error_message["tool_call_id"] == "call_a"
    assert json.loads(error_message["content"]) == {"error": {"code": "http_5xx", "message": "order store down"}}


def test_failed_model_turn_fails_the_agent():
    with pytest.raises(NodeError) as caught:
        AgentNode().execute(config(), ctx({"turn-0": failed("provider_rejected", "context too long")}))
    error = caught.value
    assert (error.code, error.retryable) == ("provider_rejected", False)
    assert "model turn 0 failed: context too long" in error.message


def test_max_turns_fails_without_running_the_last_tools():
    reply = {"text": "", "tool_calls": [{"id": "c", "name": "kb_search", "arguments": {"query": "x"}}], "stop_reason": "tool_calls", "model": "m"}
    with pytest.raises(NodeError) as caught:
        AgentNode().execute(config(max_turns=1), ctx({"turn-0": ok(reply)}))
    assert (caught.value.code, caught.value.retryable) == ("max_turns", False)


def test_extra_tool_calls_beyond_the_limit_are_refused_in_their_results():
    calls = [{"id": f"c{i}", "name": "kb_search", "arguments": {"query": str(i)}} for i in range(3)]
    children = {"turn-0": ok({"text": "", "tool_calls": calls, "stop_reason": "tool_calls", "model": "m"})}
    node, cfg = AgentNode(), config(max_tool_calls_per_turn=2)
    assert [c.key for c in node.execute(cfg, ctx(children)).spawn] == ["tool-0-c0", "tool-0-c1"]
    children.update({"tool-0-c0": ok([]), "tool-0-c1": ok([])})
    [turn1] = node.execute(cfg, ctx(children)).spawn
    last = turn1.input["messages"][-1]
    assert last["tool_call_id"] == "c2" and last["is_error"] and "at most 2" in last["content"]


def test_call_ids_become_safe_unique_keys():
    calls = [
        {"id": "toolu_01/..x y", "name": "kb_search", "arguments": {}},
        {"id": "toolu_01/..x y", "name": "kb_search", "arguments": {}},
        {"id": "", "name": "kb_search", "arguments": {}},
    ]
    children = {"turn-0": ok({"text": "", "tool_calls": calls, "stop_reason": "tool_calls", "model": "m"})}
    keys = [c.key for c in AgentNode().execute(config(), ctx(children)).spawn]
    assert keys == ["tool-0-toolu_01_..x_y", "tool-0-toolu_01_..x_y-1", "tool-0-call2"]


def test_long_tool_results_are_cut():
    children = {
        "turn-0": ok({"text": "", "tool_calls": TURN0["tool_calls"][:1], "stop_reason": "tool_calls", "model": "m"}),
        "tool-0-call_a": ok("x" * 5000),
    }
    [turn1] = AgentNode().execute(config(max_tool_result_chars=100), ctx(children)).spawn
    content = turn1.input["messages"][-1]["content"]
    assert content.startswith("x" * 100) and content.endswith("[truncated 4900 characters]")


# --- children ---------------------------------------------------------------------------
def test_tool_child_gets_its_own_idempotency_key(effects_file):
    from tests.support.tools import read_effects

    cfg = config(tools=["record_effect"])
    call = ChildCall("tool-0-c1", TOOL_CALL, {"tool": "record_effect", "arguments": {"label": "x"}, "call_id": "c1", "turn": 0})
    result = AgentNode().execute_child(cfg, call, ctx(key="run:agent#0/tool-0-c1:0"))
    assert result.output == {"label": "x"}
    assert read_effects()[0]["key"] == "run:agent#0/tool-0-c1:0"


def test_tool_child_refuses_tools_not_offered_and_invalid_arguments():
    node, cfg = AgentNode(), config()
    with pytest.raises(NodeError) as caught:
        node.execute_child(cfg, ChildCall("tool-0-x", TOOL_CALL, {"tool": "send_email", "arguments": {}}), ctx())
    assert (caught.value.code, caught.value.retryable) == ("unknown_tool", False)
    bad = {"tool": "kb_search", "arguments": {INVALID_ARGUMENTS_KEY: '{"query": '}}
    with pytest.raises(NodeError) as caught:
        node.execute_child(cfg, ChildCall("tool-0-y", TOOL_CALL, bad), ctx())
    assert caught.value.code == "tool_arguments"
    with pytest.raises(NodeError) as caught:
        node.execute_child(cfg, ChildCall("tool-0-z", TOOL_CALL, {"tool": "kb_search", "arguments": {"limit": 99}}), ctx())
    assert caught.value.code == "tool_arguments"


def test_repeat_safety_follows_the_tool():
    node = AgentNode()
    cfg = config(tools=["kb_search", "send_email"])
    assert node.is_child_repeat_safe(cfg, ChildCall("turn-1", MODEL_TURN, {}))
    assert node.is_child_repeat_safe(cfg, ChildCall("tool-0-a", TOOL_CALL, {"tool": "kb_search"}))
    assert not node.is_child_repeat_safe(cfg, ChildCall("tool-0-b", TOOL_CALL, {"tool": "send_email"}))
    assert node.is_repeat_safe(cfg)  # the replay itself has no side effects


# --- estimates and validation -----------------------------------------------------------
@pytest.mark.django_db  # a name settings do not know is looked up among the providers added in the app
def test_child_estimate_is_the_turns_messages_plus_max_tokens_at_the_price():
    node, cfg = AgentNode(), config(max_tokens=500)
    call = ChildCall("turn-0", MODEL_TURN, {"messages": [{"role": "user", "content": "x" * 4000}]})
    usd, tokens = node.estimate_child_cost(cfg, call, {})
    assert tokens > 1000 + 500
    mock = get_provider("mock")
    from runs.vocabulary import Usage

    assert usd == mock.price("mock-1", Usage("mock", "mock-1", input_tokens=tokens - 500, output_tokens=500))
    assert node.estimate_child_cost(cfg, ChildCall("tool-0-a", TOOL_CALL, {}), {}) == (Decimal(0), 0)
    unknown = config(provider="nope")
    assert node.estimate_child_cost(unknown, call, {})[0] is None


def test_whole_loop_estimate_grows_with_turns_and_tool_results():
    node = AgentNode()
    small = node.estimate_cost(config(max_turns=2), {})
    large = node.estimate_cost(config(max_turns=4), {})
    wide = node.estimate_cost(config(max_turns=2, max_tool_result_chars=50_000), {})
    assert large[1] > 2 * small[1] and wide[1] > small[1]
    assert large[0] > small[0] > 0


def test_check_reports_unknown_tools_provider_issues_and_template_names(settings):
    issues = AgentNode().check("agent", config(tools=["kb_search", "nope"], prompt="{{ missing }}"), {"order_id"})
    codes = {(i.field, i.code) for i in issues}
    assert ("config.tools[1]", "unknown_tool") in codes
    assert ("config.prompt", "unknown_variable") in codes
    issues = AgentNode().check("agent", config(provider="anthropic", model="claude-haiku-4-5", temperature=0.5, options={}), {"order_id", "question"})
    assert [(i.field, i.code) for i in issues] == [("config.temperature", "unsupported")]


def test_config_rejects_duplicate_tools_and_key_values():
    with pytest.raises(ValueError):
        config(tools=["kb_search", "kb_search"])
    with pytest.raises(ValueError):
        config(api_key_env="sk-live-abc/def")  # a value, not a variable name


def test_replay_starts_from_the_prompt_turn_0_was_sent_even_if_the_state_changed():
    node, cfg = AgentNode(), config()
    [turn0] = node.execute(cfg, ctx()).spawn
    children = {}
    children["turn-0"], _ = run_child(node, cfg, turn0, "k:turn-0")
    assert children["turn-0"]["output"]["prompt"] == turn0.input["messages"]
    for call in node.execute(cfg, ctx(children)).spawn:
        children[call.key], _ = run_child(node, cfg, call, f"k:{call.key}")
    # A parallel branch changed the state the prompt is rendered from.
    [turn1] = node.execute(cfg, ctx(children, state={"order_id": "Z-9", "question": "other"})).spawn
    assert turn1.input["messages"][0] == {"role": "user", "content": "Order A-1001: refund?"}
