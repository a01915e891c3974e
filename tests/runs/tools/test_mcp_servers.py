"""MCP servers added in the app, against real MCP servers written with the SDK (stdio and Streamable HTTP): saved through the API with the allow-list and the outbound guard, their tools beside the built-ins, called from a graph with the step's idempotency key in ``_meta``, arguments checked before the call, a server down or hung failing the step quickly, repeat safety as the operator's trust says."""
from __future__ import annotations

import threading

import psutil
import pytest
from django.contrib.auth import get_user_model

from approvals.models import ApprovalRequest
from audit.models import AuditEntry
from runs.models import McpServer, Step
from runs.nodes import get_kind
from runs.nodes.tool import ToolConfig
from runs.services import run_start
from runs.tools import ToolContext, UnknownTool, get_tool
from runs.tools.mcp_servers import McpTool, services
from runs.tools.mcp_servers.pool import POOL
from runs.vocabulary import NodeError, StepCancelled
from tests.support.bounded import finishes_within, wait_until
from tests.support.cluster import wait_for_status
from tests.support.mcp_servers import PYTHON, SCRIPT, http_server, seen, stdio_args
from tests.support.specs import chain, graph, node, publish, run_local
from tests.support.world import client_with_token

pytestmark = pytest.mark.django_db(transaction=True)

# Tests that start an MCP server (a Python interpreter, over stdio or HTTP) are in the process tier.
SERVER_PROCESS = pytest.mark.process
ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}


@pytest.fixture
def mcp_settings(settings):
    """The test interpreter allowed as a stdio command; short bounds so a down server fails fast."""
    settings.BALLAST_MCP_STDIO_COMMANDS = [PYTHON]
    settings.BALLAST_MCP_CONNECT_TIMEOUT = 30.0  # a stdio server is a Python start on a loaded machine
    settings.BALLAST_MCP_CALL_TIMEOUT = 30.0
    settings.BALLAST_OUTBOUND_ALLOW = []
    settings.BALLAST_MCP_SESSION_IDLE_SECONDS = 0.0  # a session per call (the pool's own tests turn it on)
    return settings


@pytest.fixture
def pooled(mcp_settings):
    """Sessions kept between calls; every one closed after the test."""
    mcp_settings.BALLAST_MCP_SESSION_IDLE_SECONDS = 60.0
    yield POOL
    POOL.close_all()
    wait_until(lambda: our_server_processes() == [], 30, "the pooled servers' processes to be gone")


@pytest.fixture
def staff():
    """An API client of a staff user (no password: nothing to hash)."""
    user = get_user_model().objects.create_superuser("ops", "ops@localhost", None)
    return client_with_token(user)


@pytest.fixture
def log(tmp_path):
    return tmp_path / "mcp-calls.jsonl"


def stdio_server(log, name: str = "local", **fields) -> McpServer:
    return services.mcp_server_create(data={"name": name, "transport": "stdio", "command": PYTHON, "args": stdio_args(log), **fields})


def tool_spec(tool: str, args: dict, **fields) -> dict:
    return graph(
        [node("start", "start"), node("call", "tool", config={"tool": tool, "args": args, "output_key": "result"}, **fields), node("end", "end")],
        chain("start", "call", "end"),
    )


def our_server_processes() -> list[psutil.Process]:
    """The test servers' processes this one started that still run (a zombie has ended)."""
    running = []
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and SCRIPT in " ".join(process.cmdline()):
                running.append(process)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return running


# --- saving and listing ----------------------------------------------------------------------
@SERVER_PROCESS
def test_a_stdio_server_saved_through_the_api_lists_its_tools_beside_the_built_ins(mcp_settings, staff, log):
    response = staff.post("/api/v1/mcp-servers/", {"name": "local", "transport": "stdio", "command": PYTHON, "args": stdio_args(log)}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["last_error"] == "" and body["tools_listed_at"]
    assert [t["name"] for t in body["tools"]] == ["mcp__local__add", "mcp__local__record", "mcp__local__fail", "mcp__local__slow"]
    add = body["tools"][0]
    assert add["annotations"] == {"readOnlyHint": True, "idempotentHint": True} and add["repeat_safe"] is False  # not trusted

    tools = {t["name"]: t for t in staff.get("/api/v1/tools/").json()["tools"]}
    assert "http_request" in tools and tools["http_request"]["mcp_server"] is None
    listed = tools["mcp__local__add"]
    assert listed["mcp_server"] == "local" and listed["repeat_safe"] is False
    assert listed["args_schema"]["properties"] == {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}}
    assert AuditEntry.objects.filter(action="mcp_server.create", data__name="local").count() == 1
    assert our_server_processes() == []  # the listing's server process was stopped with its session


def test_a_stdio_command_not_in_the_allow_list_is_refused_at_save_with_the_field_named(mcp_settings, staff, log):
    response = staff.post("/api/v1/mcp-servers/", {"name": "sh", "transport": "stdio", "command": "/bin/sh", "args": ["-c", "true"]}, format="json")
    assert response.status_code == 400
    assert "BALLAST_MCP_STDIO_COMMANDS" in response.json()["error"]["fields"]["command"][0]
    bad = staff.post("/api/v1/mcp-servers/", {"name": "bad name", "transport": "http", "url": "ftp://x"}, format="json")
    assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) == {"name", "url"}
    assert not McpServer.objects.exists()


def test_writes_are_staff_only(mcp_settings, log):
    user = get_user_model().objects.create_user("viewer", password=None)
    response = client_with_token(user).post("/api/v1/mcp-servers/", {"name": "x", "transport": "stdio", "command": PYTHON}, format="json")
    assert response.status_code == 403 and not McpServer.objects.exists()


# --- calls from a graph -----------------------------------------------------------------------
@SERVER_PROCESS
def test_a_graph_calls_a_stdio_tool_with_the_steps_idempotency_key_in_meta(mcp_settings, log):
    stdio_server(log)
    run = run_local(tool_spec("mcp__local__record", {"text": "{{ input.note }}"}), {"note": "hello"})
    assert run.status == "succeeded", run.error
    assert run.state["result"] == {"recorded": "hello"}
    step = Step.objects.get(run=run, node_id="call")
    calls = seen(log)
    assert [(c["tool"], c["arguments"]) for c in calls] == [("record", {"text": "hello"})]
    assert calls[0]["meta"]["ballast/idempotency_key"] == step.idempotency_key
    assert our_server_processes() == []  # no server process outlives its call


@SERVER_PROCESS
def test_over_http_through_the_outbound_guard_with_encrypted_headers(mcp_settings, staff, log):
    with http_server(log) as server:
        created = staff.post(
            "/api/v1/mcp-servers/",
            {"name": "remote", "transport": "http", "url": server.url, "headers": {"Authorization": "Bearer s3cret"}},
            format="json",
        )
        assert created.status_code == 201, created.content
        body = created.json()
        # 127.0.0.1 is not public: the guard refused the listing, and the save kept the error.
        assert body["tools"] == [] and "127.0.0.1" in body["last_error"] and body["has_headers"] is True
        assert "headers" not in body and "s3cret" not in created.content.decode()
        assert "s3cret" not in McpServer.objects.get(name="remote").headers_encrypted

        mcp_settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
        tested = staff.post("/api/v1/mcp-servers/remote/test/").json()
        assert tested["ok"] is True and [t["tool"] for t in tested["server"]["tools"]][:2] == ["add", "record"]

        run = run_local(tool_spec("mcp__remote__add", {"a": 2, "b": 3}))
        assert run.status == "succeeded", run.error
        assert run.state["result"] == {"result": 5}
        step = Step.objects.get(run=run, node_id="call")
        call = [c for c in seen(log) if c["tool"] == "add"][-1]
        assert call["meta"]["ballast/idempotency_key"] == step.idempotency_key
        assert call["authorization"] == "Bearer s3cret"


def test_arguments_are_checked_against_the_tools_schema_before_any_call(mcp_settings, log):
    McpServer.objects.create(name="local", transport="stdio", command=PYTHON, args=stdio_args(log), tools=[{"name": "add", "input_schema": ADD_SCHEMA}])
    # At validation: a literal argument of the wrong type and a missing required one, by field.
    issues = get_kind("tool").check("call", ToolConfig(tool="mcp__local__add", args={"a": "x"}), set())
    assert {(i.field, i.code) for i in issues} == {("config.args.a", "tool_arguments"), ("config.args.b", "tool_arguments")}
    # At run time: a templated value that turns out wrong fails the step, and nothing is sent.
    run = run_local(tool_spec("mcp__local__add", {"a": "{{ input.a }}", "b": 2}), {"a": "seven"})
    assert run.status == "failed"
    error = Step.objects.get(run=run, node_id="call").error
    assert error["code"] == "tool_arguments" and error["details"]["errors"][0]["field"] == "a"
    assert seen(log) == [] and our_server_processes() == []


@SERVER_PROCESS
def test_a_tool_error_fails_the_step_without_retry(mcp_settings, log):
    stdio_server(log)
    with pytest.raises(NodeError) as caught:
        get_tool("mcp__local__fail").call({"reason": "no stock"}, ToolContext(idempotency_key="k-fail"))
    assert caught.value.code == "mcp_tool_error" and not caught.value.retryable
    assert "refused: no stock" in caught.value.message


@SERVER_PROCESS
def test_an_agent_calls_an_mcp_tool_as_a_durable_child_step(pooled, log):
    stdio_server(log)
    script = [
        {"turn": 0, "reply": "", "tool_calls": [{"id": "c1", "name": "mcp__local__add", "arguments": {"a": 20, "b": 22}}]},
        {"reply": "The sum is 42."},
    ]
    config = {"provider": "mock", "model": "mock-1", "prompt": "Add 20 and 22.", "tools": ["mcp__local__add"], "options": {"script": script}}
    run = run_local(graph([node("start", "start"), node("agent", "agent", config=config), node("end", "end")], chain("start", "agent", "end")))
    assert run.status == "succeeded", run.error
    call = Step.objects.get(run=run, node_id="agent#0/tool-0-c1")
    assert call.output == {"result": 42}
    assert [c["meta"]["ballast/idempotency_key"] for c in seen(log)] == [call.idempotency_key]


@SERVER_PROCESS
def test_a_qcluster_worker_calls_a_stdio_tool_run_after_run_on_one_pooled_server(mcp_settings, log, cluster_factory):
    stdio_server(log)
    version = publish(tool_spec("mcp__local__record", {"text": "{{ input.note }}"}))
    cluster = cluster_factory("mcp", workers=1, extra_env={"BALLAST_MCP_STDIO_COMMANDS": PYTHON, "BALLAST_MCP_SESSION_IDLE_SECONDS": "60"}).start()
    cluster.wait_ready()
    runs = []
    for i in range(3):
        run = run_start(version=version, run_input={"note": f"run {i}"})
        wait_for_status(run, "succeeded", clusters=[cluster], timeout=120)
        runs.append(run)
    calls = seen(log)
    keys = [Step.objects.get(run=r, node_id="call").idempotency_key for r in runs]
    assert [c["meta"]["ballast/idempotency_key"] for c in calls] == keys
    assert len({c["pid"] for c in calls}) == 1  # one server process served the worker's three calls
    cluster.stop()
    wait_until(lambda: not _running(calls[0]["pid"]), 30, "the pooled server to end with its worker")


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# --- a server down, hung, or cancelled --------------------------------------------------------
@SERVER_PROCESS
def test_a_stopped_http_server_fails_the_call_quickly_with_a_retryable_error(mcp_settings, log):
    mcp_settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    with http_server(log) as server:
        services.mcp_server_create(data={"name": "remote", "transport": "http", "url": server.url})
        assert get_tool("mcp__remote__add")
    # Stopped now: the stored tool list remains, the call cannot connect.
    with finishes_within(10, "a call to a stopped server"), pytest.raises(NodeError) as caught:
        get_tool("mcp__remote__add").call({"a": 1, "b": 2}, ToolContext(idempotency_key="k-down"))
    assert caught.value.code == "mcp_unavailable" and caught.value.retryable and caught.value.not_sent


@SERVER_PROCESS
def test_a_stdio_server_that_dies_at_start_fails_with_a_retryable_error(mcp_settings, log, tmp_path):
    McpServer.objects.create(name="broken", transport="stdio", command=PYTHON, args=["-c", "raise SystemExit(3)"], tools=[{"name": "add", "input_schema": ADD_SCHEMA}])
    with finishes_within(30, "a call to a server that exits at start"), pytest.raises(NodeError) as caught:
        get_tool("mcp__broken__add").call({"a": 1, "b": 2}, ToolContext(idempotency_key="k-dead"))
    assert caught.value.code == "mcp_unavailable" and caught.value.retryable and caught.value.not_sent


@SERVER_PROCESS
def test_a_hung_call_is_bounded_by_the_call_timeout_and_may_have_been_sent(mcp_settings, log):
    mcp_settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    mcp_settings.BALLAST_MCP_CALL_TIMEOUT = 1.0
    with http_server(log) as server:
        services.mcp_server_create(data={"name": "remote", "transport": "http", "url": server.url})
        with finishes_within(15, "a call that hangs"), pytest.raises(NodeError) as caught:
            get_tool("mcp__remote__slow").call({"seconds": 60}, ToolContext(idempotency_key="k-hung"))
    assert caught.value.code == "mcp_unavailable" and caught.value.retryable
    assert not caught.value.not_sent  # it reached the server: a step not safe to repeat is parked, not retried


@SERVER_PROCESS
def test_the_steps_cancel_signal_ends_a_running_call(mcp_settings, log):
    mcp_settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    with http_server(log) as server:
        services.mcp_server_create(data={"name": "remote", "transport": "http", "url": server.url})
        ctx = ToolContext(idempotency_key="k-cancel")
        threading.Timer(0.5, ctx.cancelled.set).start()
        with finishes_within(15, "a cancelled call"), pytest.raises(StepCancelled):
            get_tool("mcp__remote__slow").call({"seconds": 60}, ctx)


@SERVER_PROCESS
def test_a_cancelled_or_hung_stdio_call_leaves_no_server_process(mcp_settings, log):
    McpServer.objects.create(name="local", transport="stdio", command=PYTHON, args=stdio_args(log), tools=[{"name": "slow", "input_schema": {"type": "object"}}])
    ctx = ToolContext(idempotency_key="k-cancel-stdio")
    # Cancelled once the server has the call (it logs it before sleeping).
    watcher = threading.Thread(target=lambda: (wait_until(lambda: seen(log), 60, "the call to reach the server"), ctx.cancelled.set()))
    watcher.start()
    with finishes_within(70, "a cancelled stdio call"), pytest.raises(StepCancelled):
        get_tool("mcp__local__slow").call({"seconds": 600}, ctx)
    watcher.join()
    wait_until(lambda: our_server_processes() == [], 10, "the stdio server's process to be gone")

    mcp_settings.BALLAST_MCP_CALL_TIMEOUT = 1.0
    with finishes_within(60, "a hung stdio call"), pytest.raises(NodeError) as caught:
        get_tool("mcp__local__slow").call({"seconds": 600}, ToolContext(idempotency_key="k-hung-stdio"))
    assert caught.value.code == "mcp_unavailable" and not caught.value.not_sent
    wait_until(lambda: our_server_processes() == [], 10, "the stdio server's process to be gone")


@SERVER_PROCESS
def test_a_timed_out_call_of_an_untrusted_tool_is_parked_for_a_person_not_sent_again(mcp_settings, log):
    mcp_settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    mcp_settings.BALLAST_MCP_CALL_TIMEOUT = 1.0
    with http_server(log) as server:
        services.mcp_server_create(data={"name": "remote", "transport": "http", "url": server.url})
        run = run_local(tool_spec("mcp__remote__slow", {"seconds": 30}, retry={"max_attempts": 3, "backoff_seconds": 0}), timeout=60)
        assert run.status == "waiting", run.error
        step = Step.objects.get(run=run, node_id="call")
        assert step.status == "parked" and step.attempt == 1 and step.error["code"] == "mcp_unavailable", step.error
        assert len([c for c in seen(log) if c["tool"] == "slow"]) == 1
        assert ApprovalRequest.objects.get(run=run, purpose="recovery").payload["idempotency_key"] == step.idempotency_key

        # The node saying it is safe to repeat keeps plain retries: three calls, one key.
        retried = run_local(
            tool_spec("mcp__remote__slow", {"seconds": 30}, retry={"max_attempts": 3, "backoff_seconds": 0}, repeat_safe=True), timeout=60
        )
        assert retried.status == "failed" and retried.error["code"] == "mcp_unavailable", retried.error
        keys = [c["meta"]["ballast/idempotency_key"] for c in seen(log) if c["tool"] == "slow"][1:]
        assert len(keys) == 3 and len(set(keys)) == 1


@SERVER_PROCESS
def test_pooled_sessions_serve_calls_from_one_server_process_and_outlive_its_death(pooled, log):
    stdio_server(log)
    record = get_tool("mcp__local__record")
    assert record.call({"text": "one"}, ToolContext(idempotency_key="k-1")) == {"recorded": "one"}
    assert record.call({"text": "two"}, ToolContext(idempotency_key="k-2")) == {"recorded": "two"}
    calls = seen(log)
    assert [c["meta"]["ballast/idempotency_key"] for c in calls] == ["k-1", "k-2"]
    assert calls[0]["pid"] == calls[1]["pid"] and [p.pid for p in our_server_processes()] == [calls[0]["pid"]]

    # The server dies while idle: the next call is not lost to it (a ping finds it dead first).
    psutil.Process(calls[0]["pid"]).kill()
    assert record.call({"text": "three"}, ToolContext(idempotency_key="k-3")) == {"recorded": "three"}
    assert seen(log)[-1]["pid"] != calls[0]["pid"]

    # Idle past BALLAST_MCP_SESSION_IDLE_SECONDS: closed, its process stopped.
    assert pooled.sweep(idle_seconds=0) == 1
    wait_until(lambda: our_server_processes() == [], 30, "the idle server's process to be gone")


@SERVER_PROCESS
def test_a_pooled_session_whose_call_timed_out_is_closed_not_reused(pooled, mcp_settings, log):
    stdio_server(log)
    get_tool("mcp__local__add").call({"a": 1, "b": 1}, ToolContext(idempotency_key="k-warm"))
    first = seen(log)[-1]["pid"]
    mcp_settings.BALLAST_MCP_CALL_TIMEOUT = 1.0
    with finishes_within(30, "a pooled call that hangs"), pytest.raises(NodeError) as caught:
        get_tool("mcp__local__slow").call({"seconds": 600}, ToolContext(idempotency_key="k-hung-pooled"))
    assert caught.value.code == "mcp_unavailable" and caught.value.retryable and not caught.value.not_sent
    wait_until(lambda: first not in [p.pid for p in our_server_processes()], 30, "the hung session's server to be stopped")
    mcp_settings.BALLAST_MCP_CALL_TIMEOUT = 30.0
    assert get_tool("mcp__local__add").call({"a": 2, "b": 3}, ToolContext(idempotency_key="k-after")) == {"result": 5}
    assert seen(log)[-1]["pid"] != first


# --- repeat safety ----------------------------------------------------------------------------
def test_repeat_safety_follows_the_operators_trust_in_the_servers_annotations(mcp_settings, log):
    listing = [
        {"name": "add", "input_schema": ADD_SCHEMA, "annotations": {"readOnlyHint": True, "idempotentHint": True}},
        {"name": "record", "input_schema": {"type": "object"}, "annotations": {}},
    ]
    server = McpServer.objects.create(name="local", transport="stdio", command=PYTHON, args=[], tools=listing)
    tool_kind = get_kind("tool")
    add, record = ToolConfig(tool="mcp__local__add"), ToolConfig(tool="mcp__local__record")
    assert not tool_kind.is_repeat_safe(add) and not tool_kind.is_repeat_safe(record)  # annotations are the server's claims
    assert tool_kind.is_step_repeat_safe(record, True)  # unless the node says otherwise

    server.trust_annotations = True
    server.save()
    assert tool_kind.is_repeat_safe(add) and not tool_kind.is_repeat_safe(record)
    assert isinstance(get_tool("mcp__local__add"), McpTool)

    server.enabled = False
    server.save()
    with pytest.raises(UnknownTool):
        get_tool("mcp__local__add")


def test_header_tokens_are_bound_to_their_server_and_rotate_with_the_credentials_key(mcp_settings):
    from cryptography.fernet import Fernet

    from runs.providers.credentials import credentials_rotate
    from runs.tools.mcp_servers import endpoint_of

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    mcp_settings.BALLAST_CREDENTIALS_KEY = old
    data = {"transport": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer s3cret"}}
    first = services.mcp_server_create(data={"name": "one", **data}, refresh=False)
    second = services.mcp_server_create(data={"name": "two", **data}, refresh=False)
    # A token copied onto another server's row does not decrypt there.
    McpServer.objects.filter(pk=second.pk).update(headers_encrypted=first.headers_encrypted)
    second.refresh_from_db()
    with pytest.raises(NodeError) as caught:
        endpoint_of(second)
    assert caught.value.code == "credentials" and "s3cret" not in caught.value.message

    McpServer.objects.filter(pk=second.pk).update(headers_encrypted="")
    mcp_settings.BALLAST_CREDENTIALS_KEY = f"{new},{old}"
    assert credentials_rotate() == 1
    mcp_settings.BALLAST_CREDENTIALS_KEY = new
    first.refresh_from_db()
    assert endpoint_of(first).headers == {"Authorization": "Bearer s3cret"}
