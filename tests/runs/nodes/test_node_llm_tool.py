"""Tests of the llm and tool node kinds, executed directly with a NodeContext (no engine, no database)."""

import threading
import time
from decimal import Decimal

import pytest
from pydantic import BaseModel, ValidationError

import runs.tools as tools
from runs.nodes import get_kind
from runs.nodes.base import NodeContext
from runs.nodes.llm import LLMNode
from runs.nodes.tool import ToolNode
from runs.providers import get_provider
from runs.providers.base import ProviderError
from runs.tools import ToolContext, get_tool, tool
from runs.vocabulary import NodeError, StepCancelled
from tests.support.bounded import TIME_SLACK, finishes_within

SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10}, "why": {"type": "string"}},
    "required": ["score"],
    "additionalProperties": False,
}


def make_ctx(state=None, *, attempt=1, deadline=None, key="run-1:review:0"):
    state = dict(state or {})
    return NodeContext(
        run_id=1,
        run_uuid="00000000-0000-0000-0000-000000000001",
        step_id=42,
        node_id="review",
        iteration=0,
        attempt=attempt,
        idempotency_key=key,
        state=state,
        run_input=state,
        deadline=deadline,
    )


def llm_config(**fields):
    fields.setdefault("prompt", "Hello {{ name }}")
    return LLMNode.config_model.model_validate(fields)


def tool_config(**fields):
    return ToolNode.config_model.model_validate(fields)


# --- llm: execution -----------------------------------------------------------------
def test_registry_resolves_both_kinds():
    assert isinstance(get_kind("llm"), LLMNode)
    assert isinstance(get_kind("tool"), ToolNode)


def test_llm_renders_prompt_and_records_usage_and_cost():
    node = LLMNode()
    config = llm_config(system="You help {{ name }}.", output_key="greeting")
    result = node.execute(config, make_ctx({"name": "Ada"}))
    assert result.updates == {"greeting": "Echo: Hello Ada"}
    assert result.output == {
        "text": "Echo: Hello Ada",
        "provider": "mock",
        "model": "mock-1",
        "stop_reason": "stop",
        "calls": 1,
    }
    assert result.usage.provider == "mock" and result.usage.model == "mock-1"
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.cost_usd == get_provider("mock").price("mock-1", result.usage)
    assert result.cost_usd > 0


def test_llm_scripted_reply_and_tool_calls_in_output():
    config = llm_config(
        prompt="find {{ topic }}",
        options={
            "script": [
                {"when": "find", "reply": "calling", "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}
            ]
        },
    )
    result = LLMNode().execute(config, make_ctx({"topic": "ballast"}))
    assert result.updates == {"reply": "calling"}
    assert result.output["tool_calls"] == [{"id": "call_1", "name": "search", "arguments": {"q": "x"}}]
    assert result.output["stop_reason"] == "tool_calls"


def test_llm_structured_output_is_parsed():
    config = llm_config(output_key="verdict", output_schema=SCHEMA, options={"script": [{"reply": {"score": 7}}]})
    result = LLMNode().execute(config, make_ctx({"name": "Ada"}))
    assert result.updates == {"verdict": {"score": 7}}
    assert result.output["json"] == {"score": 7} and result.output["calls"] == 1


def test_llm_structured_output_tolerates_a_code_fence():
    config = llm_config(output_schema=SCHEMA, options={"script": [{"reply": '```json\n{"score": 3}\n```'}]})
    assert LLMNode().execute(config, make_ctx({"name": "Ada"})).updates == {"reply": {"score": 3}}


def test_llm_invalid_reply_is_asked_again_within_the_step():
    script = [
        {"when": "previous reply was not valid", "reply": {"score": 4, "why": "fixed"}},
        {"reply": {"score": "high"}},
    ]
    config = llm_config(output_schema=SCHEMA, options={"script": script})
    single = LLMNode().execute(
        llm_config(options={"script": [{"reply": {"score": "high"}}]}), make_ctx({"name": "Ada"})
    )
    result = LLMNode().execute(config, make_ctx({"name": "Ada"}))
    assert result.updates == {"reply": {"score": 4, "why": "fixed"}}
    assert result.output["calls"] == 2
    # Both calls are paid for: the re-ask resends the conversation plus the correction.
    assert result.usage.input_tokens > 2 * single.usage.input_tokens
    assert result.cost_usd == get_provider("mock").price("mock-1", result.usage)


def test_llm_re_asks_use_their_own_idempotency_keys(monkeypatch):
    provider = get_provider("mock")
    seen = []
    original = provider.complete

    def spy(request):
        seen.append((request.idempotency_key, request.attempt, [m.role for m in request.messages]))
        return original(request)

    monkeypatch.setattr(provider, "complete", spy)
    config = llm_config(output_schema=SCHEMA, schema_retries=2, options={"script": [{"reply": "nope"}]})
    with pytest.raises(NodeError):
        LLMNode().execute(config, make_ctx({"name": "Ada"}, attempt=3))
    assert seen == [
        ("run-1:review:0", 3, ["user"]),
        ("run-1:review:0:reask-1", 3, ["user", "assistant", "user"]),
        ("run-1:review:0:reask-2", 3, ["user", "assistant", "user", "assistant", "user"]),
    ]


def test_llm_gives_up_with_invalid_output():
    config = llm_config(output_schema=SCHEMA, schema_retries=1, options={"script": [{"reply": "I think 7"}]})
    with pytest.raises(NodeError) as caught:
        LLMNode().execute(config, make_ctx({"name": "Ada"}))
    error = caught.value
    assert (error.code, error.retryable) == ("invalid_output", False)
    assert "not JSON" in error.details["errors"][0]
    assert error.details["reply"] == "I think 7"
    assert error.details["usage"]["output_tokens"] > 0
    assert Decimal(error.details["cost_usd"]) > 0


def test_llm_schema_errors_name_the_path():
    config = llm_config(output_schema=SCHEMA, schema_retries=0, options={"script": [{"reply": {"score": 11, "x": 1}}]})
    with pytest.raises(NodeError) as caught:
        LLMNode().execute(config, make_ctx({"name": "Ada"}))
    errors = caught.value.details["errors"]
    assert any(e.startswith("$.score:") for e in errors)
    assert any("'x'" in e for e in errors)


def test_llm_transient_provider_failure_depends_on_attempt():
    config = llm_config(options={"fail_times": 1})
    with pytest.raises(ProviderError) as caught:
        LLMNode().execute(config, make_ctx({"name": "Ada"}, attempt=1))
    assert caught.value.retryable and caught.value.status == 503
    assert LLMNode().execute(config, make_ctx({"name": "Ada"}, attempt=2)).updates == {"reply": "Echo: Hello Ada"}


def test_llm_timeout_comes_from_the_step_deadline():
    config = llm_config(options={"latency_ms": 60_000})
    with finishes_within(2 * TIME_SLACK, "a 60 s answer under a 0.1 s step deadline"), pytest.raises(NodeError) as caught:
        LLMNode().execute(config, make_ctx({"name": "Ada"}, deadline=time.monotonic() + 0.1))
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)
    with pytest.raises(NodeError) as caught:
        LLMNode().execute(llm_config(), make_ctx({"name": "Ada"}, deadline=time.monotonic() - 1))
    assert caught.value.code == "timeout"


def test_llm_cancellation():
    ctx = make_ctx({"name": "Ada"})
    ctx.cancel_event.set()
    with pytest.raises(StepCancelled):
        LLMNode().execute(llm_config(), ctx)
    ctx = make_ctx({"name": "Ada"})
    threading.Timer(0.05, ctx.cancel_event.set).start()
    with pytest.raises(StepCancelled):
        LLMNode().execute(llm_config(options={"latency_ms": 10_000}), ctx)


@pytest.mark.django_db  # a name settings do not know is looked up among the providers added in the app
def test_llm_unknown_provider_at_run_time(settings):
    config = llm_config(provider="gone")
    with pytest.raises(NodeError) as caught:
        LLMNode().execute(config, make_ctx({"name": "Ada"}))
    assert (caught.value.code, caught.value.retryable) == ("unknown_provider", False)


# --- llm: config, validation and cost -----------------------------------------------
def test_llm_config_defaults_and_limits():
    config = llm_config()
    assert (config.provider, config.model, config.output_key, config.max_tokens, config.schema_retries) == (
        "mock",
        "mock-1",
        "reply",
        1024,
        2,
    )
    assert LLMNode().writes(config) == {"reply"}
    for bad in (
        {"prompt": ""},
        {"output_key": "not a key"},
        {"max_tokens": 0},
        {"temperature": 3},
        {"output_schema": {"type": "nonsense"}},
        {"unknown": 1},
    ):
        with pytest.raises(ValidationError):
            llm_config(**bad)


def test_llm_check_valid_config_has_no_issues():
    config = llm_config(system="Be kind to {{ name }}.", output_schema=SCHEMA, options={"script": [{"reply": "x"}]})
    assert LLMNode().check("ask", config, {"name"}) == []


@pytest.mark.django_db  # a name settings do not know is looked up among the providers added in the app
def test_llm_check_reports_provider_model_options_and_templates():
    node = LLMNode()
    issues = node.check("ask", llm_config(provider="nope"), {"name"})
    assert [(i.node_id, i.field, i.code) for i in issues] == [("ask", "config.provider", "unknown_provider")]

    issues = node.check("ask", llm_config(model="gpt-99", options={"scirpt": []}), {"name"})
    assert [(i.field, i.code) for i in issues] == [
        ("config.model", "unknown_model"),
        ("config.options", "invalid_option"),
    ]
    assert "mock-1" in issues[0].message

    issues = node.check("ask", llm_config(system="{{ persona }}", prompt="{{ name }} and {{ missing }}"), {"name"})
    assert [(i.field, i.code) for i in issues] == [
        ("config.system", "unknown_variable"),
        ("config.prompt", "unknown_variable"),
    ]
    assert "missing" in issues[1].message

    issues = node.check("ask", llm_config(prompt="{{ name "), {"name"})
    assert [(i.field, i.code) for i in issues] == [("config.prompt", "invalid_template")]


def test_llm_estimate_cost_is_a_worst_case():
    node = LLMNode()
    state = {"name": "Ada"}
    config = llm_config(max_tokens=100)
    usd, tokens = node.estimate_cost(config, state)
    result = node.execute(config, make_ctx(state))
    assert tokens >= result.usage.total_tokens
    assert usd >= result.cost_usd
    # prompt tokens + max_tokens, priced at mock-1's simulated rates
    input_tokens = tokens - 100
    assert usd == (Decimal(input_tokens) * 1 + Decimal(100) * 2) / Decimal(1_000_000)

    large_usd, _ = node.estimate_cost(llm_config(max_tokens=100, model="mock-large"), state)
    assert large_usd > usd


def test_llm_estimate_cost_covers_schema_re_asks():
    node = LLMNode()
    state = {"name": "Ada"}
    plain_usd, plain_tokens = node.estimate_cost(llm_config(max_tokens=50), state)
    config = llm_config(
        max_tokens=50, output_schema=SCHEMA, schema_retries=2, options={"script": [{"reply": "x" * 400}]}
    )
    usd, tokens = node.estimate_cost(config, state)
    assert tokens > 3 * plain_tokens
    with pytest.raises(NodeError) as caught:
        node.execute(config, make_ctx(state))
    spent = caught.value.details["usage"]
    assert spent["input_tokens"] + spent["output_tokens"] <= tokens
    assert Decimal(caught.value.details["cost_usd"]) <= usd


@pytest.mark.django_db  # a name settings do not know is looked up among the providers added in the app
def test_llm_estimate_cost_unknown_provider_or_price():
    usd, tokens = LLMNode().estimate_cost(llm_config(provider="nope", max_tokens=10), {"name": "Ada"})
    assert usd is None and tokens > 10


# --- tool node ----------------------------------------------------------------------
class AddArgs(BaseModel):
    a: int
    b: int = 0
    label: str = ""


@pytest.fixture
def calls(monkeypatch):
    """Register an ``add`` tool in a private copy of the registry; yields its calls."""
    get_tool("http_request")
    monkeypatch.setattr(tools, "_REGISTRY", dict(tools._REGISTRY))
    seen = []

    @tool("add")
    def add(args: AddArgs, ctx: ToolContext):
        seen.append((args, ctx))
        return {"sum": args.a + args.b, "label": args.label}

    return seen


def test_tool_node_renders_args_and_stores_result(calls):
    config = tool_config(tool="add", args={"a": "{{ x }}", "b": 2, "label": "x is {{ x }}"}, output_key="total")
    ctx = make_ctx({"x": 40}, attempt=2, deadline=time.monotonic() + 30)
    result = ToolNode().execute(config, ctx)
    assert result.updates == {"total": {"sum": 42, "label": "x is 40"}}
    assert result.output == {"sum": 42, "label": "x is 40"}
    args, tool_ctx = calls[0]
    assert args.a == 40
    assert (tool_ctx.idempotency_key, tool_ctx.run_id, tool_ctx.step_id, tool_ctx.node_id, tool_ctx.attempt) == (
        "run-1:review:0",
        1,
        42,
        "review",
        2,
    )
    assert 0 < tool_ctx.timeout <= 30


def test_tool_node_without_output_key_writes_nothing(calls):
    config = tool_config(tool="add", args={"a": 1})
    result = ToolNode().execute(config, make_ctx())
    assert result.updates == {} and result.output == {"sum": 1, "label": ""}
    assert ToolNode().writes(config) == set()
    assert ToolNode().writes(tool_config(tool="add", output_key="out")) == {"out"}


def test_tool_node_invalid_rendered_args(calls):
    config = tool_config(tool="add", args={"a": "{{ x }}"})
    with pytest.raises(NodeError) as caught:
        ToolNode().execute(config, make_ctx({"x": "not a number"}))
    assert (caught.value.code, caught.value.retryable) == ("tool_arguments", False)
    assert calls == []


def test_tool_node_unknown_tool_at_run_time():
    with pytest.raises(NodeError) as caught:
        ToolNode().execute(tool_config(tool="nope"), make_ctx())
    assert (caught.value.code, caught.value.retryable) == ("unknown_tool", False)


def test_tool_node_repeat_safety_follows_the_tool(calls):
    node = ToolNode()
    assert node.is_repeat_safe(tool_config(tool="add")) is True
    assert node.is_repeat_safe(tool_config(tool="http_request")) is False
    assert node.is_repeat_safe(tool_config(tool="send_email")) is False
    assert node.is_repeat_safe(tool_config(tool="nope")) is False


def test_tool_node_check(calls):
    node = ToolNode()
    assert node.check("t", tool_config(tool="add", args={"a": "{{ x }}", "label": "{{ x }}!"}), {"x"}) == []

    issues = node.check("t", tool_config(tool="nope"), set())
    assert [(i.field, i.code) for i in issues] == [("config.tool", "unknown_tool")]

    issues = node.check("t", tool_config(tool="add", args={"a": "{{ y }}", "b": "{{ x }}"}), {"x"})
    assert [(i.field, i.code) for i in issues] == [("config.args.a", "unknown_variable")]

    # Literal values are checked against the args model; templated ones wait for run time.
    issues = node.check("t", tool_config(tool="add", args={"b": "two"}), set())
    assert sorted((i.field, i.code) for i in issues) == [
        ("config.args.a", "tool_arguments"),
        ("config.args.b", "tool_arguments"),
    ]
    issues = node.check("t", tool_config(tool="http_request", args={"url": "{{ u }}", "colour": 1}), {"u"})
    assert [(i.field, i.code) for i in issues] == [("config.args.colour", "tool_arguments")]

    issues = node.check("t", tool_config(tool="add", args={"a": "{{ x "}), {"x"})
    assert [(i.field, i.code) for i in issues] == [("config.args.a", "invalid_template")]


def test_tool_node_config_validation():
    with pytest.raises(ValidationError):
        tool_config(args={})
    with pytest.raises(ValidationError):
        tool_config(tool="add", output_key="bad key")


@pytest.fixture
def local_server(settings):
    from http.server import ThreadingHTTPServer

    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]  # loopback is refused by default
    from tests.support.http_server import Handler

    Handler.received, Handler.answered = [], []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_tool_node_http_request_end_to_end(local_server):
    from tests.support.http_server import Handler

    config = tool_config(
        tool="http_request",
        args={"method": "POST", "url": "{{ base }}/json", "json": {"name": "{{ name }}", "n": "{{ n }}"}},
        output_key="response",
    )
    result = ToolNode().execute(config, make_ctx({"base": local_server, "name": "Ada", "n": 3}))
    assert result.updates["response"]["json"]["body"] == {"name": "Ada", "n": 3}
    assert Handler.received[0]["headers"]["Idempotency-Key"] == "run-1:review:0"


def test_templates_see_the_run_input_and_fail_clearly_on_unknown_names(calls):
    ctx = make_ctx({"name": "Ada"})
    ctx.run_input = {"topic": "durability"}
    result = LLMNode().execute(llm_config(prompt="{{ name }} asks about {{ input.topic }}"), ctx)
    assert result.updates == {"reply": "Echo: Ada asks about durability"}

    with pytest.raises(NodeError) as caught:
        LLMNode().execute(llm_config(prompt="Hi {{ missing }}"), make_ctx({"name": "Ada"}))
    error = caught.value
    assert (error.code, error.retryable, error.details["error_code"]) == ("template", False, "unknown_name")
    assert "missing" in error.message

    # A tool argument's error names the argument, and reads as what the user wrote: a template.
    with pytest.raises(NodeError) as caught:
        ToolNode().execute(tool_config(tool="add", args={"a": 1, "b": "{{ query }}"}), make_ctx({"topic": "x"}))
    assert caught.value.message == "config.args.b: the template uses `query`, which is not in the state (known: input, topic)"

    with pytest.raises(NodeError) as caught:
        ToolNode().execute(tool_config(tool="add", args={"a": "{{ 1 / zero }}"}), make_ctx({"zero": 0}))
    assert (caught.value.code, caught.value.retryable) == ("template", False)
    assert calls == []
