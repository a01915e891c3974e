"""A local HTTP server speaking OpenAI Chat Completions and the Anthropic Messages API, for tests.

The real ``openai`` and ``anthropic`` SDKs talk to it over HTTP on 127.0.0.1 (random
port), so tests exercise the SDKs' own request building, response parsing and error
classes. It answers:

- ``POST /v1/chat/completions`` (OpenAI; base URL ``<url>/v1``) and ``POST /v1/messages``
  (Anthropic; base URL ``<url>``), with text, tool calls, JSON (structured output) and
  full usage blocks (cached, cache-write and reasoning tokens);
- scripted failures, one per request, in order: any status with an error body in the
  vendor's shape, a ``Retry-After`` header, or a delay past the client's timeout.

Replies are chosen by the model turn: the number of assistant messages in the request
(turn 0 is the first call of a conversation). A script is ``{turn: Reply}`` or a list;
without one the server echoes the last user message. It checks what the real APIs check
and a Ballast bug would break: the key (``Authorization: Bearer`` or ``x-api-key``),
tool results answering the previous turn's tool calls, no ``temperature`` on Anthropic's
2026-10-21 API, no streaming (Ballast does not stream). Every request is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEST_KEY = "sk-test-0123456789abcdefSECRET"


@dataclass
class Reply:
    """One scripted model answer.

    ``text`` (str, or a JSON value sent as its JSON text); ``tool_calls`` items are
    ``{"name", "arguments", "id"?}``; ``usage`` is ``{"input", "output", "cached",
    "cache_write", "cache_write_1h", "reasoning"}`` (tokens; missing ones are estimated or
    0; ``cache_write_1h``, the one-hour part of ``cache_write``, makes an Anthropic answer
    carry the ``cache_creation`` breakdown);
    ``stop``: ``"max_tokens"`` to report a cut-off reply.
    """

    text: Any = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    stop: str | None = None


@dataclass
class Fault:
    """A one-shot failure: answer ``status`` with ``message`` (and ``Retry-After:
    retry_after`` when set), or, with ``delay``, sleep that long before answering normally
    (a client with a shorter timeout gives up first). ``path`` limits it to one endpoint;
    ``after`` lets that many requests through normally first."""

    status: int | None = None
    message: str = "scripted failure"
    error_type: str | None = None
    retry_after: str | None = None
    delay: float = 0.0
    path: str | None = None
    after: int = 0


@dataclass
class Recorded:
    """A request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    turn: int
    status: int = 0
    response: dict[str, Any] | None = None


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


class LLMServer:
    """The server; use as a context manager or call :meth:`start`/:meth:`stop`."""

    def __init__(self, *, api_key: str = TEST_KEY) -> None:
        self.api_key = api_key
        self.script: dict[int, Reply] = {}
        self.faults: deque[Fault] = deque()
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> LLMServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # ------------------------------------------------------------------ scripting
    def set_script(self, replies: dict[int, Reply] | list[Reply]) -> None:
        """Answers by model turn (a list is turns 0, 1, ...)."""
        with self.lock:
            self.script = dict(enumerate(replies)) if isinstance(replies, list) else dict(replies)

    def fail(self, *faults: Fault) -> None:
        """Queue one-shot failures, used by the next requests in order."""
        with self.lock:
            self.faults.extend(faults)

    def calls(self, path: str | None = None) -> list[Recorded]:
        """Requests received (optionally for one endpoint), in order."""
        with self.lock:
            return [r for r in self.requests if path is None or r.path == path]

    # ------------------------------------------------------------------ answering
    def _next_fault(self, path: str) -> Fault | None:
        with self.lock:
            for fault in list(self.faults):
                if fault.path is None or fault.path == path:
                    if fault.after > 0:
                        fault.after -= 1
                        return None
                    self.faults.remove(fault)
                    return fault
        return None

    def reply_for(self, turn: int, body: dict[str, Any], last_user: str) -> Reply:
        with self.lock:
            reply = self.script.get(turn)
        return reply if reply is not None else Reply(text=f"Echo: {last_user}")


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) closes its socket: not worth a traceback.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: LLMServer
    protocol_version = "HTTP/1.1"
    # One write per response, no Nagle: headers and body sent apart would meet the
    # client's delayed ACK and add ~40 ms to every call.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?", 1)[0]
        anthropic = path == "/v1/messages"
        if path not in ("/v1/chat/completions", "/v1/messages"):
            return self._error(404, f"unknown path {path}", anthropic)
        turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        record = Recorded(path=path, headers=headers, body=body, turn=turn)
        with self.owner.lock:
            self.owner.requests.append(record)

        fault = self.owner._next_fault(path)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.status:
            record.status = fault.status
            extra = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
            return self._error(fault.status, fault.message, anthropic, error_type=fault.error_type, headers=extra)

        problem = self._check(body, headers, anthropic)
        if problem is not None:
            record.status = problem[0]
            return self._error(problem[0], problem[1], anthropic)
        reply = self.owner.reply_for(turn, body, _last_user(body, anthropic))
        record.status = 200
        payload = _anthropic_message(body, reply, turn) if anthropic else _openai_completion(body, reply, turn)
        record.response = payload
        self._send(200, payload)

    # ------------------------------------------------------------------ checks
    def _check(self, body: dict[str, Any], headers: dict[str, str], anthropic: bool) -> tuple[int, str] | None:
        """What the real API would refuse (a 4xx), or None."""
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if key != self.owner.api_key:
            shown = f"{key[:6]}****{key[-4:]}" if len(key) > 10 else "****"
            # Real APIs echo part of a wrong key; Ballast must redact what it can.
            return 401, f"Incorrect API key provided: {key if key.startswith('sk-') else shown}"
        if body.get("stream"):
            return 400, "this test server does not stream"
        if not body.get("model"):
            return 400, "model: field required"
        messages = body.get("messages") or []
        if not messages:
            return 400, "messages: at least one message is required"
        if anthropic:
            if "temperature" in body:
                return 400, "temperature: Extra inputs are not permitted"
            if not isinstance(body.get("max_tokens"), int):
                return 400, "max_tokens: field required"
            return _check_anthropic_tools(messages)
        if "max_tokens" not in body and "max_completion_tokens" not in body:
            return 400, "max_tokens or max_completion_tokens is required by this server"
        return _check_openai_tools(messages)

    # ------------------------------------------------------------------ output
    def _error(self, status: int, message: str, anthropic: bool, *, error_type: str | None = None, headers: dict | None = None) -> None:
        kind = error_type or _ERROR_TYPES.get(status, "api_error")
        if anthropic:
            payload = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_test"}
        else:
            payload = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self._send(status, payload, headers=headers)

    def _send(self, status: int, payload: dict[str, Any], *, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", "req_test")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to answer


def _last_user(body: dict[str, Any], anthropic: bool) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        if texts:
            return " ".join(texts)
    return ""


def _check_openai_tools(messages: list[dict[str, Any]]) -> tuple[int, str] | None:
    pending: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return 400, f"tool message for unknown tool_call_id {message.get('tool_call_id')!r}"
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return 400, f"tool_calls without a tool message answering them: {sorted(pending)}"
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                json.loads(call["function"]["arguments"] or "{}")
                pending.add(call["id"])
    return None


def _check_anthropic_tools(messages: list[dict[str, Any]]) -> tuple[int, str] | None:
    previous_role = None
    pending: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant"):
            return 400, f"messages: unexpected role {role!r}"
        if role == previous_role:
            return 400, "messages: roles must alternate between user and assistant"
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if role == "user":
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if answered != pending:
                return 400, f"tool_use ids {sorted(pending)} must be answered by tool_result blocks, got {sorted(answered)}"
            pending = set()
        else:
            for block in blocks:
                if block.get("type") == "text" and not block.get("text"):
                    return 400, "text content blocks must be non-empty"
            pending = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        previous_role = role
    return None


def _text_of(reply: Reply) -> str:
    return reply.text if isinstance(reply.text, str) else json.dumps(reply.text)


def _estimate(data: Any) -> int:
    return max(1, len(json.dumps(data)) // 4)


def _call_id(reply_call: dict[str, Any], turn: int, index: int, prefix: str) -> str:
    return reply_call.get("id") or f"{prefix}_{turn}_{index}"


def _openai_completion(body: dict[str, Any], reply: Reply, turn: int) -> dict[str, Any]:
    text = _text_of(reply)
    calls = [
        {
            "id": _call_id(c, turn, i, "call"),
            "type": "function",
            "function": {"name": c["name"], "arguments": c.get("raw_arguments") or json.dumps(c.get("arguments", {}))},
        }
        for i, c in enumerate(reply.tool_calls)
    ]
    usage = reply.usage
    prompt = usage.get("input", _estimate(body.get("messages")))
    completion = usage.get("output", _estimate([text, calls]))
    finish = "length" if reply.stop == "max_tokens" else ("tool_calls" if calls else "stop")
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-test-{turn}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": usage.get("cached", 0), "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": usage.get("reasoning", 0), "audio_tokens": 0},
        },
    }


def _anthropic_message(body: dict[str, Any], reply: Reply, turn: int) -> dict[str, Any]:
    text = _text_of(reply)
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": _call_id(c, turn, i, "toolu"), "name": c["name"], "input": c.get("arguments", {})}
        for i, c in enumerate(reply.tool_calls)
    ]
    usage = reply.usage
    total_input = usage.get("input", _estimate([body.get("system"), body.get("messages")]))
    cached = usage.get("cached", 0)
    written = usage.get("cache_write", 0)
    stop = "max_tokens" if reply.stop == "max_tokens" else ("tool_use" if reply.tool_calls else "end_turn")
    out_usage: dict[str, Any] = {
        # The API's input_tokens exclude cache reads and writes.
        "input_tokens": total_input - cached - written,
        "output_tokens": usage.get("output", _estimate(content)),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": written,
    }
    if "cache_write_1h" in usage:
        hour = usage["cache_write_1h"]
        out_usage["cache_creation"] = {"ephemeral_5m_input_tokens": written - hour, "ephemeral_1h_input_tokens": hour}
    if usage.get("reasoning"):
        out_usage["output_tokens_details"] = {"thinking_tokens": usage["reasoning"]}
    return {
        "id": f"msg_test_{turn}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": out_usage,
    }


# ---------------------------------------------------------------------- pytest fixtures
# A plugin of every test (pytest_plugins in tests/conftest.py): a test asks for them by name.
import pytest  # noqa: E402


@pytest.fixture
def llm_server():
    """A running :class:`LLMServer` (stopped after the test)."""
    with LLMServer() as server:
        yield server


@pytest.fixture
def sdk_providers(llm_server, settings, monkeypatch):
    """The ``openai`` and ``anthropic`` providers pointed at ``llm_server``, priced as the
    real vendors' models (genai-prices), keys in the environment; returns the server."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    settings.BALLAST_PROVIDER_SETTINGS = {
        "openai": {
            "base_url": llm_server.openai_base_url,
            "price_provider": "openai",
            "max_tokens_param": "max_completion_tokens",
            "timeout": 10,
            "allowed_api_key_envs": ["BALLAST_TEST_OTHER_KEY"],
        },
        "anthropic": {"base_url": llm_server.anthropic_base_url, "price_provider": "anthropic", "timeout": 10},
    }
    return llm_server


def assert_stored_cost(stored, exact) -> None:
    """``stored`` (a cost column: 6 decimal places) is ``exact`` rounded. PostgreSQL rounds
    half away from zero, SQLite keeps the value as a float; either way within half a
    micro-dollar."""
    from decimal import Decimal

    assert stored is not None and abs(Decimal(stored) - Decimal(exact)) <= Decimal("0.0000005"), (stored, exact)
