"""Tests of the tool registry and the built-in tools (http_request against a local server, send_email)."""

import smtplib
import socket
import time
from decimal import Decimal
from email.utils import formatdate

import pytest
from django.core.mail.backends.base import BaseEmailBackend
from pydantic import BaseModel

import runs.tools as tools
from runs.retry_after import MAX_RETRY_AFTER_SECONDS
from runs.tools import RegisteredTool, ToolContext, UnknownTool, all_tools, get_tool, tool
from runs.tools.builtins import message_id_for
from runs.vocabulary import NodeError
from tests.support.bounded import TIME_SLACK, finishes_within
from tests.support.http_server import Handler

CTX = ToolContext(idempotency_key="run-1:step-7", run_id=1, step_id=7, node_id="fetch", attempt=1)


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the registry: tools registered by a test vanish after it."""
    get_tool("http_request")  # load the built-ins into the real registry first
    monkeypatch.setattr(tools, "_REGISTRY", dict(tools._REGISTRY))
    return tools._REGISTRY


class GreetArgs(BaseModel):
    name: str
    times: int = 1


# --- registry -----------------------------------------------------------------------
def test_builtins_load_lazily_from_settings():
    http = get_tool("http_request")
    email = get_tool("send_email")
    assert isinstance(http, RegisteredTool)
    assert http.repeat_safe is False and email.repeat_safe is False
    assert {"http_request", "send_email"} <= set(all_tools())
    assert "Idempotency-Key" in http.description
    schema = http.json_schema()
    assert "url" in schema["properties"] and "json" in schema["properties"]
    assert schema["required"] == ["url"]


def test_unknown_tool():
    with pytest.raises(UnknownTool):
        get_tool("does_not_exist")


def test_register_with_defaults(registry):
    @tool
    def greet(args: GreetArgs, ctx: ToolContext):
        """Say hello."""
        return {"greeting": f"hello {args.name}" * args.times, "key": ctx.idempotency_key}

    registered = get_tool("greet")
    assert registered.name == "greet"
    assert registered.description == "Say hello."
    assert registered.args_model is GreetArgs
    assert registered.repeat_safe is True
    assert registered.json_schema()["required"] == ["name"]
    assert registered.call({"name": "Ada"}, CTX) == {"greeting": "hello Ada", "key": "run-1:step-7"}


def test_register_with_name_and_options(registry):
    @tool("shout", description="Shout a name.", repeat_safe=False)
    def _shout(args: GreetArgs, ctx: ToolContext):
        return args.name.upper()

    registered = get_tool("shout")
    assert (registered.description, registered.repeat_safe) == ("Shout a name.", False)
    assert registered.call({"name": "ada"}, CTX) == "ADA"


def test_args_annotation_must_be_a_model(registry):
    with pytest.raises(TypeError):

        @tool
        def bad(args: dict, ctx: ToolContext):
            return None

    with pytest.raises(TypeError):

        @tool
        def lonely(args: GreetArgs):
            return None


def test_duplicate_name_from_another_function_is_refused(registry):
    @tool("dup")
    def one(args: GreetArgs, ctx: ToolContext):
        return 1

    with pytest.raises(ValueError, match="already registered"):

        @tool("dup")
        def two(args: GreetArgs, ctx: ToolContext):
            return 2


def test_invalid_arguments_are_a_non_retryable_error_with_fields(registry):
    @tool
    def greet2(args: GreetArgs, ctx: ToolContext):
        return None

    with pytest.raises(NodeError) as caught:
        get_tool("greet2").call({"times": "many"}, CTX)
    error = caught.value
    assert (error.code, error.retryable) == ("tool_arguments", False)
    fields = {e["field"]: e["type"] for e in error.details["errors"]}
    assert fields == {"name": "missing", "times": "int_parsing"}
    assert "name" in error.message


def test_results_become_plain_json(registry):
    class Out(BaseModel):
        total: Decimal

    @tool
    def amounts(args: GreetArgs, ctx: ToolContext):
        return {"prices": ("1.50", 2), "model": Out(total=Decimal("2"))}

    @tool
    def model_out(args: GreetArgs, ctx: ToolContext):
        return Out(total=Decimal("3.25"))

    # Pydantic models are dumped in JSON mode (their Decimal fields as text), tuples become lists.
    assert get_tool("amounts").call({"name": "x"}, CTX) == {"prices": ["1.50", 2], "model": {"total": "2"}}
    assert get_tool("model_out").call({"name": "x"}, CTX) == {"total": "3.25"}


def test_a_bare_decimal_in_a_result_is_refused_not_turned_into_text(registry):
    @tool
    def bare_amount(args: GreetArgs, ctx: ToolContext):
        return {"items": [{"price": 1}, {"price": Decimal("1.50")}]}

    with pytest.raises(NodeError) as caught:
        get_tool("bare_amount").call({"name": "x"}, CTX)
    assert (caught.value.code, caught.value.retryable) == ("invalid_output", False)
    assert caught.value.details == {"path": "output.items[1].price", "reason": "decimal.Decimal is not a JSON type"}


def test_non_json_result_and_crashing_tool(registry):
    @tool
    def returns_object(args: GreetArgs, ctx: ToolContext):
        return object()

    @tool
    def crashes(args: GreetArgs, ctx: ToolContext):
        raise RuntimeError("kaput")

    with pytest.raises(NodeError) as caught:
        get_tool("returns_object").call({"name": "x"}, CTX)
    assert (caught.value.code, caught.value.retryable) == ("invalid_output", False)
    with pytest.raises(NodeError) as caught:
        get_tool("crashes").call({"name": "x"}, CTX)
    assert caught.value.code == "tool_error" and "kaput" in caught.value.message


# --- http_request against a real local server (tests/support/http_server.py) ------
def http(args, ctx=CTX):
    return get_tool("http_request").call(args, ctx)


def test_http_get_json_sends_idempotency_key(server):
    result = http({"url": f"{server}/json", "params": {"q": "ballast", "n": 2}})
    assert result["status"] == 200
    assert result["json"] == {
        "method": "GET",
        "query": {"q": ["ballast"], "n": ["2"]},
        "body": None,
        "idempotency_key": "run-1:step-7",
    }
    assert result["headers"]["content-type"] == "application/json"
    assert result["headers"]["x-request-id"] == "abc"
    assert "x-noise" not in result["headers"]
    assert Handler.received[0]["headers"]["Idempotency-Key"] == "run-1:step-7"


def test_http_post_json_body_same_key_on_every_attempt(server):
    for attempt in (1, 2):
        ctx = ToolContext(idempotency_key="run-1:step-8", attempt=attempt)
        result = http({"method": "post", "url": f"{server}/json", "json": {"a": [1, 2]}}, ctx)
        assert result["json"]["method"] == "POST"
        assert result["json"]["body"] == {"a": [1, 2]}
    assert [r["headers"]["Idempotency-Key"] for r in Handler.received] == ["run-1:step-8", "run-1:step-8"]


def test_http_caller_idempotency_key_is_kept(server):
    result = http({"url": f"{server}/json", "headers": {"idempotency-key": "mine"}})
    assert result["json"]["idempotency_key"] == "mine"


def test_http_text_is_truncated_in_characters(server):
    result = http({"url": f"{server}/text", "max_chars": 10})
    assert result["text"] == "é" * 10
    assert result["truncated"] is True
    full = http({"url": f"{server}/text"})
    assert full["text"] == "é" * 50 and full["truncated"] is False


def test_http_follows_redirects_for_get_only(server):
    assert http({"url": f"{server}/redirect"})["json"]["method"] == "GET"
    posted = http({"method": "POST", "url": f"{server}/redirect"})
    assert posted["status"] == 302 and posted["headers"]["location"] == "/json"


@pytest.mark.parametrize(
    "status, code, retryable",
    [
        (500, "http_5xx", True),
        (503, "http_5xx", True),
        (404, "http_4xx", False),
        (400, "http_4xx", False),
        (429, "rate_limited", True),
    ],
)
def test_http_error_status_classification(server, status, code, retryable):
    with pytest.raises(NodeError) as caught:
        http({"url": f"{server}/status/{status}"})
    error = caught.value
    assert (error.code, error.retryable) == (code, retryable)
    assert error.details["status"] == status
    assert "nope" in error.details["body"]
    if status == 429:
        assert error.details["retry_after"] == 7.0


def test_http_retry_after_is_read_as_the_providers_read_it(server):
    # One parser (runs.retry_after): an HTTP date counts from now, and a server asking for
    # a day gets the same cap as a provider would.
    from urllib.parse import quote

    soon = formatdate(time.time() + 60, usegmt=True)
    with pytest.raises(NodeError) as caught:
        http({"url": f"{server}/status/429?retry_after={quote(soon)}"})
    assert 50 <= caught.value.details["retry_after"] <= 60
    tomorrow = formatdate(time.time() + 86_400, usegmt=True)
    with pytest.raises(NodeError) as caught:
        http({"url": f"{server}/status/429?retry_after={quote(tomorrow)}"})
    assert caught.value.details["retry_after"] == MAX_RETRY_AFTER_SECONDS


def test_http_timeout_is_retryable(server):
    # /hold answers only when the test ends: a late client thread cannot be answered first.
    with finishes_within(2 * TIME_SLACK, "an answer held past a 0.2 s timeout"), pytest.raises(NodeError) as caught:
        http({"url": f"{server}/hold", "timeout": 0.2})
    assert (caught.value.code, caught.value.retryable) == ("http_timeout", True)


def test_http_timeout_bounded_by_step_time_left(server):
    ctx = ToolContext(idempotency_key="k", timeout=0.2)
    with pytest.raises(NodeError) as caught:
        http({"url": f"{server}/hold", "timeout": 30}, ctx)
    assert caught.value.code == "http_timeout"


def test_http_request_in_flight_stops_at_once_when_its_step_is_cancelled(server):
    """The step's cancel shuts the request's connection down (runs.abort): the tool ends
    with StepCancelled at once, not at its 30 s timeout nor when /hold answers."""
    import threading

    from runs.vocabulary import CancelEvent, StepCancelled
    from tests.support.bounded import wait_until

    ctx = ToolContext(idempotency_key="k", cancelled=CancelEvent())
    outcome: list = []

    def call() -> None:
        try:
            outcome.append(http({"url": f"{server}/hold", "timeout": 30}, ctx))
        except BaseException as exc:  # looked at below
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    wait_until(lambda: len(Handler.received) == 1, 30, "the request at the server")
    with finishes_within(2 * TIME_SLACK, "the request after its step's cancel"):
        ctx.cancelled.set()
        caller.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], StepCancelled), outcome
    assert Handler.answered == []  # the server never got to answer


def test_http_connection_refused_is_retryable(settings):
    settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    with socket.socket() as s:  # find a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(NodeError) as caught:
        http({"url": f"http://127.0.0.1:{port}/", "timeout": 2})
    assert (caught.value.code, caught.value.retryable) == ("http_connection", True)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "/relative", "not a url"])
def test_http_rejects_non_http_urls(url):
    with pytest.raises(NodeError) as caught:
        http({"url": url})
    assert caught.value.code == "tool_arguments"
    assert caught.value.details["errors"][0]["field"] == "url"


# --- send_email ---------------------------------------------------------------------
def email(args, ctx=CTX):
    return get_tool("send_email").call(args, ctx)


def test_send_email_uses_backend_and_stable_message_id(settings, mailoutbox):
    settings.DEFAULT_FROM_EMAIL = "Ballast <noreply@example.com>"
    result = email({"to": "ada@example.com", "subject": "Hi", "body": "Hello Ada"})
    again = email({"to": ["ada@example.com"], "subject": "Hi", "body": "Hello Ada"})
    assert result == again
    assert result["to"] == ["ada@example.com"] and result["sent"] == 1
    assert result["message_id"] == message_id_for("run-1:step-7")
    assert result["message_id"].startswith("<") and result["message_id"].endswith("@example.com>")
    assert len(mailoutbox) == 2
    sent = mailoutbox[0]
    assert (sent.subject, sent.body, sent.to, sent.from_email) == (
        "Hi",
        "Hello Ada",
        ["ada@example.com"],
        "Ballast <noreply@example.com>",
    )
    assert sent.message()["Message-ID"] == result["message_id"]


def test_send_email_message_id_differs_per_step():
    assert message_id_for("run-1:step-7") != message_id_for("run-1:step-8")


@pytest.mark.parametrize(
    "args, field",
    [
        ({"to": "not-an-address", "subject": "s", "body": "b"}, "to"),
        ({"to": [], "subject": "s", "body": "b"}, "to"),
        ({"to": "a@example.com", "subject": "two\nlines", "body": "b"}, "subject"),
        ({"to": "a@example.com", "body": "b"}, "subject"),
    ],
)
def test_send_email_invalid_arguments(mailoutbox, args, field):
    with pytest.raises(NodeError) as caught:
        email(args)
    assert caught.value.code == "tool_arguments" and not caught.value.retryable
    assert caught.value.details["errors"][0]["field"] == field
    assert mailoutbox == []


class RefusingBackend(BaseEmailBackend):
    def send_messages(self, messages):
        raise smtplib.SMTPRecipientsRefused({"a@example.com": (550, b"no such user")})


class FlakyBackend(BaseEmailBackend):
    def send_messages(self, messages):
        raise ConnectionRefusedError("smtp down")


class TemporaryFailureBackend(BaseEmailBackend):
    def send_messages(self, messages):
        raise smtplib.SMTPDataError(451, b"try later")


@pytest.mark.parametrize(
    "backend, code, retryable",
    [
        ("RefusingBackend", "email_rejected", False),
        ("FlakyBackend", "email_error", True),
        ("TemporaryFailureBackend", "email_error", True),
    ],
)
def test_send_email_failures(settings, backend, code, retryable):
    settings.EMAIL_BACKEND = f"{__name__}.{backend}"
    with pytest.raises(NodeError) as caught:
        email({"to": "a@example.com", "subject": "s", "body": "b"})
    assert (caught.value.code, caught.value.retryable) == (code, retryable)
