"""Your own tools (README "Your own tools"): the example package loaded through BALLAST_EXTRA_TOOL_MODULES runs in a graph, gets the step's idempotency key and cancel signal, and a tool module that fails to import is named by the system check at start."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from runs.models import Run, Step
from runs.nodes.base import NodeContext
from runs.services import run_cancel
from runs.tools import ToolContext, ToolModuleError, all_tools, get_tool
from runs.tools.checks import CHECK_ID, tool_modules_importable
from runs.vocabulary import StepCancelled
from tests.support.bounded import wait_until
from tests.support.specs import publish
from tests.support.tool_modules import (
    EXAMPLE_GRAPH,
    EXAMPLE_TOOLS,
    EXAMPLES,
    REPO_ROOT,
    BackgroundRun,
    extra_tool_modules,
    write_module,
)

RAISES_AT_IMPORT = "raise RuntimeError('the vault is sealed')\n"
BAD_ANNOTATION = """
from runs.tools import ToolContext, tool


@tool
def shout(args: str, ctx: ToolContext) -> str:
    return args.upper()
"""


@pytest.fixture
def outbox_file(tmp_path, monkeypatch):
    """The example messaging service's file, fresh for the test."""
    path = tmp_path / "outbox.jsonl"
    monkeypatch.setenv("BALLAST_EXAMPLE_OUTBOX", str(path))
    return path


@pytest.fixture
def example_tools(settings, outbox_file):
    """The example package's tools registered as BALLAST_EXTRA_TOOL_MODULES would: its
    directory on sys.path, its module after the built-ins; the outbox module to read."""
    with extra_tool_modules(settings, EXAMPLE_TOOLS, path=EXAMPLES):
        from ballast_tools_example import outbox  # importable only now (examples/ on sys.path)

        yield outbox


def sent_messages(outbox) -> list[dict]:
    return [e for e in outbox.entries() if "message_id" in e]


# --- the example's tools --------------------------------------------------------------
def test_the_example_tools_register_with_their_models_and_repeat_safety(example_tools):
    tools = all_tools()
    send, wait = tools["send_message"], tools["wait_for_reply"]
    assert (send.repeat_safe, wait.repeat_safe) == (False, True)
    assert send.json_schema()["required"] == ["channel", "text"]
    assert send.fn.__module__ == EXAMPLE_TOOLS
    assert tool_modules_importable() == []  # the check is quiet when every module imports


def test_send_message_hands_the_idempotency_key_to_the_service_which_sends_once(example_tools):
    send = get_tool("send_message")
    first = send.call({"channel": "#support", "text": "hello"}, ToolContext(idempotency_key="run-9:step-3"))
    again = send.call({"channel": "#support", "text": "hello"}, ToolContext(idempotency_key="run-9:step-3", attempt=2))
    assert first == {"message_id": again["message_id"], "duplicate": False} and again["duplicate"] is True
    assert [m["idempotency_key"] for m in sent_messages(example_tools)] == ["run-9:step-3"]


def test_a_cancelled_context_sends_nothing_and_stops_the_wait(example_tools):
    cancelled = ToolContext(idempotency_key="k")
    cancelled.cancelled.set()
    with pytest.raises(StepCancelled):
        get_tool("send_message").call({"channel": "#support", "text": "hi"}, cancelled)
    assert sent_messages(example_tools) == []
    sent = get_tool("send_message").call({"channel": "#support", "text": "hi"}, ToolContext(idempotency_key="k2"))
    waiting = ToolContext(idempotency_key="k3")
    threading.Timer(0.1, waiting.cancelled.set).start()
    with pytest.raises(StepCancelled) as caught:  # max_wait_seconds is an hour: only the signal ends it
        get_tool("wait_for_reply").call({"message_id": sent["message_id"], "max_wait_seconds": 3600}, waiting)
    assert (caught.value.code, caught.value.retryable) == ("cancelled", False)


# --- ToolContext's cancel signal --------------------------------------------------------
def test_tool_context_for_step_carries_the_steps_cancel_event():
    ctx = NodeContext(
        run_id=1, run_uuid="u", step_id=2, node_id="wait", iteration=0, attempt=3, idempotency_key="run-1:step-2",
        state={}, run_input={},
    )  # fmt: skip
    tool_ctx = ToolContext.for_step(ctx)
    assert tool_ctx.cancelled is ctx.cancel_event
    assert (tool_ctx.idempotency_key, tool_ctx.attempt, tool_ctx.timeout) == ("run-1:step-2", 3, None)
    tool_ctx.check_cancelled()  # not set: returns
    ctx.cancel_event.set()
    with pytest.raises(StepCancelled):
        tool_ctx.check_cancelled()
    by_hand = ToolContext(idempotency_key="k")  # as existing callers make one: an event nothing sets
    assert not by_hand.cancelled.is_set() and by_hand == ToolContext(idempotency_key="k")


# --- in a graph, on the engine -----------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_example_graph_sends_once_with_the_steps_key_and_gets_the_reply(example_tools):
    version = publish(json.loads(EXAMPLE_GRAPH.read_text()))
    background = BackgroundRun(version, {"question": "Is the checkout down?"})
    message = wait_until(lambda: sent_messages(example_tools), 60, "the message sent by the ask step")[0]
    example_tools.reply(message["message_id"], "No, all green.")
    assert background.join(60) == "succeeded"
    run = Run.objects.get(pk=background.run_id)
    ask = Step.objects.get(run=run, node_id="ask")
    assert message["idempotency_key"] == ask.idempotency_key and message["text"] == "Is the checkout down?"
    assert run.output == {"sent": {"message_id": message["message_id"], "duplicate": False}, "answer": {"reply": "No, all green."}}
    assert len(sent_messages(example_tools)) == 1


@pytest.mark.django_db(transaction=True)
def test_cancelling_the_run_stops_the_tool_waiting_in_its_step(example_tools):
    # The cancel reaches the running step at once (its cancel event: runs.engine.threads),
    # not at a heartbeat a third of the lease (10 s) later.
    version = publish(json.loads(EXAMPLE_GRAPH.read_text()))
    background = BackgroundRun(version, {"question": "Anyone there?"})
    wait_until(lambda: sent_messages(example_tools), 60, "the message sent by the ask step")
    background.started.wait(60)
    wait_until(
        lambda: Step.objects.filter(run_id=background.run_id, node_id="wait", status="running").exists(),
        60, "the wait step running",
    )  # fmt: skip
    assert run_cancel(run=Run.objects.get(pk=background.run_id), actor="tester", reason="nobody answers")
    assert background.join(90) == "cancelled"  # the tool would wait 120 s for a reply that never comes
    wait = Step.objects.get(run_id=background.run_id, node_id="wait")
    assert wait.error["code"] == "cancelled" and wait.status == "cancelled", (wait.status, wait.error)


# --- a module that fails to import: named at start, and by the lazy loader ---------------
def test_the_check_names_a_module_that_does_not_exist(settings):
    with extra_tool_modules(settings, "no_such_tools_pkg.tools"):
        errors = tool_modules_importable()
        with pytest.raises(ToolModuleError) as caught:
            get_tool("http_request")  # the lazy loader names it too
    assert [(e.id, e.obj) for e in errors] == [(CHECK_ID, "no_such_tools_pkg.tools")]
    assert "'no_such_tools_pkg.tools'" in errors[0].msg and "ModuleNotFoundError" in errors[0].msg
    assert caught.value.module == "no_such_tools_pkg.tools" and "no_such_tools_pkg.tools" in str(caught.value)


def test_the_check_names_a_module_that_raises_and_one_whose_tool_is_refused(settings, tmp_path):
    raising = write_module(tmp_path, "sealed_tools", RAISES_AT_IMPORT)
    refused = write_module(tmp_path, "my_tools.shouting", BAD_ANNOTATION)
    with extra_tool_modules(settings, raising, refused, path=tmp_path):
        errors = tool_modules_importable()
        with pytest.raises(SystemCheckError) as caught:
            call_command("check")  # what every manage.py command that runs checks does at start
    assert [e.obj for e in errors] == ["sealed_tools", "my_tools.shouting"]
    assert "RuntimeError: the vault is sealed" in errors[0].msg
    assert "TypeError" in errors[1].msg and "shout" in errors[1].msg and "pydantic model" in errors[1].msg
    assert "sealed_tools" in str(caught.value) and CHECK_ID in str(caught.value)


@pytest.mark.process
def test_manage_py_check_and_qcluster_refuse_to_start_naming_the_broken_module(tmp_path):
    write_module(tmp_path, "broken_tools", RAISES_AT_IMPORT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BALLAST_FAULT", "PYTEST_"))}
    env.update(
        {
            "PYTHONPATH": str(tmp_path),
            "BALLAST_EXTRA_TOOL_MODULES": "broken_tools",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}",  # the check opens no database
            "DJANGO_SETTINGS_MODULE": "ballast.settings",
        }
    )
    for command in (["check"], ["qcluster", "--run-once"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode != 0, (command, done.stdout, done.stderr)
        assert "broken_tools" in done.stderr and CHECK_ID in done.stderr, (command, done.stderr)
        assert "RuntimeError: the vault is sealed" in done.stderr, (command, done.stderr)
