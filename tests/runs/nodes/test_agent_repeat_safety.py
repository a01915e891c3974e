"""Repeat safety of an agent's tool calls: each follows its tool unless the agent's
``repeat_safe_tools`` says otherwise; an interrupted call that is not safe parks for a
person, whose "skip" output is the result the next model turn is given; ``repeat_safe``
on a kind that does not use it is refused by validation."""

import json

import pytest

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from builder.validation import validate_spec
from runs.models import Step
from runs.nodes.agent import MODEL_TURN, TOOL_CALL, AgentNode
from runs.nodes.base import ChildCall
from runs.services import run_start
from tests.support import engine
from tests.support.leases import begun
from tests.support.specs import chain, continue_local, graph, node, publish
from tests.support.tools import read_effects


def agent_spec(tool: str, **config):
    script = [
        {"turn": 0, "reply": "", "tool_calls": [{"id": "c1", "name": tool, "arguments": {"label": "pay"}}]},
        {"turn": 1, "reply": "Paid."},
    ]
    config = {"prompt": "Pay once.", "tools": [tool], "options": {"script": script}, **config}
    return graph(
        [node("start", "start"), node("agent", "agent", config=config), node("end", "end")],
        chain("start", "agent", "end"),
    )


def errors(spec):
    return [(i.node_id, i.field, i.code) for i in validate_spec(spec).issues]


# --- the rule and validation (no database) --------------------------------------------
def test_a_tool_calls_safety_follows_the_tool_unless_the_agent_overrides_it():
    node_kind = AgentNode()
    cfg = node_kind.config_model.model_validate(
        {
            "prompt": "go",
            "tools": ["record_effect", "record_effect_unsafe", "send_email", "kb_search"],
            "repeat_safe_tools": {"record_effect": False, "send_email": True},
        }
    )

    def safe(tool):
        return node_kind.is_child_repeat_safe(cfg, ChildCall("tool-0-x", TOOL_CALL, {"tool": tool}))

    assert safe("record_effect") is False  # safe tool, the agent says no
    assert safe("send_email") is True  # unsafe tool, the agent says yes
    assert safe("record_effect_unsafe") is False and safe("kb_search") is True  # their own
    assert node_kind.is_child_repeat_safe(cfg, ChildCall("turn-1", MODEL_TURN, {}))
    # A plain list of names still works: every tool follows its own setting.
    plain = node_kind.config_model.model_validate({"prompt": "go", "tools": ["send_email"]})
    assert plain.repeat_safe_tools == {}
    assert not node_kind.is_child_repeat_safe(plain, ChildCall("tool-0-x", TOOL_CALL, {"tool": "send_email"}))


def test_repeat_safe_tools_must_name_the_agents_tools():
    spec = agent_spec("record_effect", repeat_safe_tools={"record_effect": False, "send_email": True})
    assert errors(spec) == [("agent", "config.repeat_safe_tools.send_email", "unknown_tool")]
    assert errors(agent_spec("record_effect", repeat_safe_tools={"record_effect": False})) == []


@pytest.mark.parametrize(
    "kind, config",
    [
        ("agent", {"prompt": "go", "tools": ["kb_search"]}),
        ("transform", {"set": {"x": "1"}}),
        ("condition", {"expression": "1 > 0"}),
        ("approval", {"prompt": "ok?"}),
        ("end", {}),
    ],
)
@pytest.mark.parametrize("value", [True, False])
def test_repeat_safe_on_a_kind_that_does_not_use_it_is_refused(kind, config, value):
    n = node("n", kind, config=config, repeat_safe=value)
    if kind == "end":
        spec = graph([node("start", "start"), n], chain("start", "n"))
    elif kind in ("condition", "approval"):
        handles = ("true", "false") if kind == "condition" else ("approved", "rejected")
        spec = graph(
            [node("start", "start"), n, node("end", "end")],
            [*chain("start", "n"), *({"source": "n", "target": "end", "source_handle": h} for h in handles)],
        )
    else:
        spec = graph([node("start", "start"), n, node("end", "end")], chain("start", "n", "end"))
    issues = validate_spec(spec).issues
    assert [(i.node_id, i.field, i.code, i.path) for i in issues] == [
        ("n", "repeat_safe", "repeat_safe_unused", "nodes[1].repeat_safe")
    ]
    if kind == "agent":
        assert "config.repeat_safe_tools" in issues[0].message
    # start is refused the same way
    assert "repeat_safe_unused" in [
        i.code
        for i in validate_spec(
            graph([node("start", "start", repeat_safe=value), node("end", "end")], chain("start", "end"))
        ).issues
    ]


@pytest.mark.parametrize(
    "kind, config",
    [
        ("tool", {"tool": "kb_search", "args": {"query": "x"}}),
        ("llm", {"prompt": "hi"}),
    ],
)
def test_repeat_safe_is_accepted_where_it_has_an_effect(kind, config):
    spec = graph(
        [node("start", "start"), node("n", kind, config=config, repeat_safe=False), node("end", "end")],
        chain("start", "n", "end"),
    )
    assert errors(spec) == []


# --- through the engine -----------------------------------------------------------------
def crash_in_tool_call(spec):
    """Start the run and commit step by step until the agent's tool call is queued; a
    worker claims it and dies mid-call (its lease expires); recovery runs once."""
    with engine.local_mode() as queue:
        run = run_start(version=publish(spec), run_input={})
    pending = list(queue)
    while pending:
        step = Step.objects.get(pk=pending.pop(0))
        if step.kind == TOOL_CALL:
            begun(engine.step_claim(step.pk, "deadhost:1:1"))
            break
        claimed = engine.step_claim(step.pk, "livehost:1:1")
        pending += engine.step_commit(claimed, engine.execute_node(claimed), keep_next=False).dispatch
    call = Step.objects.get(run=run, kind=TOOL_CALL)
    Step.objects.filter(pk=call.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    engine.recover_once()
    call.refresh_from_db()
    run.refresh_from_db()
    return run, call


@pytest.mark.django_db(transaction=True)
def test_an_interrupted_call_the_agent_marks_unsafe_parks_and_skip_gives_the_model_its_output(effects_file):
    run, call = crash_in_tool_call(agent_spec("record_effect", repeat_safe_tools={"record_effect": False}))
    assert call.status == "parked" and run.status == "waiting"
    request = ApprovalRequest.objects.get(run=run, purpose="recovery")
    assert request.payload["child"]["input"]["tool"] == "record_effect"
    assert request.payload["child"]["input"]["arguments"] == {"label": "pay"}

    given = {"label": "pay", "paid_by": "hand", "receipt": "R-17"}
    with engine.local_mode() as queue:
        approval_decide(approval_id=request.pk, decision="skip", actor="tester", output=given)
    run = continue_local(run, list(queue))
    assert run.status == "succeeded", run.error
    assert run.state["answer"] == "Paid."
    call.refresh_from_db()
    assert call.status == "succeeded" and call.output == given
    # The next model turn was sent the given output as the tool's result.
    turn1 = Step.objects.get(run=run, node_id="agent#0/turn-1")
    tool_message = turn1.input["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "c1"
    assert json.loads(tool_message["content"]) == given and not tool_message.get("is_error")
    assert read_effects() == []  # the interrupted call never ran again


@pytest.mark.django_db(transaction=True)
def test_an_interrupted_call_the_agent_marks_safe_runs_again(effects_file):
    run, call = crash_in_tool_call(agent_spec("record_effect_unsafe", repeat_safe_tools={"record_effect_unsafe": True}))
    assert call.status == "pending" and not ApprovalRequest.objects.filter(run=run).exists()
    run = continue_local(run, [call.pk])
    assert run.status == "succeeded", run.error
    assert [e["label"] for e in read_effects()] == ["pay"]
    assert list(call.attempts.order_by("number").values_list("status", flat=True)) == ["lost", "succeeded"]


@pytest.mark.django_db(transaction=True)
def test_without_an_override_an_unsafe_tool_parks_and_a_safe_one_reruns(effects_file):
    run, call = crash_in_tool_call(agent_spec("record_effect_unsafe"))
    assert call.status == "parked" and run.status == "waiting"
    run, call = crash_in_tool_call(agent_spec("record_effect"))
    assert call.status == "pending"
