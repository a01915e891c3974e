"""The ``agent`` node kind: a tool-calling LLM loop whose every model turn and tool call is a committed child step.

``execute`` is a deterministic replay over the committed children (``ctx.children``),
as in Temporal and DBOS workflows: it rebuilds the conversation from the children that
finished and asks the engine for the next ones.

    turn-0 (model_turn) -> tool-0-<call id> ... (tool_call, parallel) -> turn-1 -> ...

until a model turn answers without tool calls (the answer is written to ``output_key``)
or ``max_turns`` model turns were used (the step fails with ``max_turns``). A finished
child is a fact: a crash or a replay never calls the model or a tool again for it, and
never pays for a finished model turn twice. Model turns carry their usage and cost on
their own step; the agent step itself spends nothing.

A tool call that fails for good is told to the model as an error result (it may try
something else); a model turn that fails for good fails the agent step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import Field, field_validator, model_validator

from runs.nodes import llm_call
from runs.nodes.base import ChildCall, Issue, NodeContext, NodeResult, Wait
from runs.nodes.graph_tools import GraphTool, graph_calls
from runs.nodes.llm_call import LLMCallConfig, LLMCallKind, prompt_messages
from runs.nodes.shared import STATE_KEY_PATTERN, expression_names
from runs.providers import spans
from runs.providers.base import (
    INVALID_ARGUMENTS_KEY,
    MESSAGE_OVERHEAD_TOKENS,
    LLMRequest,
    Message,
    ToolCall,
    ToolDefinition,
)
from runs.tools import ToolContext, UnknownTool, get_tool, require_tool
from runs.vocabulary import NodeError

MODEL_TURN = "model_turn"
TOOL_CALL = "tool_call"
# Child keys name steps (``<node>#<iteration>/<key>``): keep provider call ids to a safe
# alphabet and length.
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
MAX_CALL_ID_CHARS = 64
TRUNCATION_NOTE = "... [truncated {n} characters]"


class AgentConfig(LLMCallConfig):
    """Config of an ``agent`` node: the model call of every turn (:class:`LLMCallConfig`;
    ``system``/``prompt`` start the conversation, ``max_tokens`` bounds each turn's
    output, ``options`` go to the provider, e.g. the mock's ``script`` with ``turn``
    rules) plus

    - ``tools``: registered tool names offered to the model (their descriptions and
      argument JSON Schemas are sent with every turn).
    - ``repeat_safe_tools``: tool name (one of ``tools``) -> whether a call of it that a
      crash interrupted may simply run again, overriding the tool's own ``repeat_safe``
      (``{"http_request": true}`` for a GET the agent may repeat; ``{"kb_search":
      false}`` to have a person decide). A tool not named follows its own setting. A
      call that is not safe to repeat is parked for a person after a crash (retry, skip
      with a given result, which the model then sees as the tool's result, or fail).
    - ``max_turns``: model turns at most; a reply that still asks for tools on the last
      turn fails the step with ``max_turns`` (its tools are not run).
    - ``max_tool_calls_per_turn``: calls beyond this in one reply are not run; the model
      is told so in their results.
    - ``max_tool_result_chars``: a tool result is cut to this many characters before it
      is sent back to the model (bounds every later turn's input, and so the budget's
      worst case).
    - ``output_key`` (default ``answer``): the state key the final answer (text) is
      written to.
    - ``graph_tools``: published graphs offered as tools (:class:`GraphTool`); a call
      runs the graph as a durable child run (runs.subgraphs.tools) and its output is the
      tool's result. ``tools`` may be empty when there are graph tools.
    """

    tools: list[str] = Field(default_factory=list, max_length=64, title="Tools", description="Registered tools the model may call.")
    graph_tools: list[GraphTool] = Field(
        default_factory=list, max_length=32, title="Graph tools", description="Published graphs the model may call as tools; each call is a child run."
    )
    repeat_safe_tools: dict[str, bool] = Field(
        default_factory=dict,
        title="Tools safe to repeat",
        description="Per tool: whether a call interrupted by a crash may run again (overrides the tool's own setting).",
    )
    max_turns: int = Field(8, ge=1, le=50, title="Maximum model turns", description="Model calls at most; a reply still asking for tools on the last turn fails the step.")
    max_tool_calls_per_turn: int = Field(
        8, ge=1, le=64, title="Maximum tool calls per turn", description="Calls beyond this in one reply are not run; the model is told so."
    )
    max_tool_result_chars: int = Field(
        20_000,
        ge=100,
        le=1_000_000,
        title="Maximum tool result length (characters)",
        description="A tool result is cut to this length before the model sees it.",
    )
    output_key: str = Field("answer", pattern=STATE_KEY_PATTERN, title="Output state key", description="The state key the final answer is written to.")

    @field_validator("tools")
    @classmethod
    def _unique(cls, tools: list[str]) -> list[str]:
        if len(set(tools)) != len(tools):
            raise ValueError("tool names must be unique")
        return tools

    @model_validator(mode="after")
    def _some_tool(self) -> AgentConfig:
        if not self.tools and not self.graph_tools:
            raise ValueError("give the agent at least one tool or graph tool")
        return self

    def graph_tool(self, name: str) -> GraphTool | None:
        """The graph tool the model calls ``name``, or None."""
        return next((t for t in self.graph_tools if t.name == name), None)

    def tool_names(self) -> list[str]:
        """Every tool name the model is offered: registered tools, then graph tools."""
        return [*self.tools, *(t.name for t in self.graph_tools)]


class AgentNode(LLMCallKind[AgentConfig]):
    """An LLM that calls registered tools in a loop, each turn and call a durable child step."""

    kind = "agent"
    config_model = AgentConfig
    # The agent's own step is a replay; its tool calls follow their tools (repeat_safe_tools).
    uses_repeat_safe = False
    repeat_safe_instead = "config.repeat_safe_tools (per tool)"
    description = "An LLM agent with tools: model turns and tool calls are durable child steps."
    title, category = "Agent", "ai"  # builder palette (builder.selectors.node_kind_catalogue)

    # ----------------------------------------------------------------- validation
    def check(self, node_id: str, config: AgentConfig, known_names: set[str]) -> list[Issue]:
        """The model call's issues (as on the llm node), unknown tools, and
        ``repeat_safe_tools`` entries for tools the agent is not given (they would have no
        effect)."""
        issues = super().check(node_id, config, known_names)
        for i, name in enumerate(config.tools):
            try:
                get_tool(name)
            except UnknownTool:
                issues.append(Issue(node_id, f"config.tools[{i}]", f"unknown tool {name!r}", code="unknown_tool"))
        seen = set(config.tools)
        for i, graph_tool in enumerate(config.graph_tools):
            if graph_tool.name in seen:
                other = "a registered tool" if graph_tool.name in config.tools else "another graph tool"
                issues.append(Issue(node_id, f"config.graph_tools[{i}].name", f"{graph_tool.name!r} is also the name of {other}", code="tool_name_clash"))
            seen.add(graph_tool.name)
        for name in config.repeat_safe_tools:
            if config.graph_tool(name) is not None:
                issues.append(
                    Issue(
                        node_id,
                        f"config.repeat_safe_tools.{name}",
                        f"{name!r} is a graph tool: its call is a child run created once, always safe to repeat",
                        code="unknown_tool",
                    )
                )
            elif name not in config.tools:
                issues.append(
                    Issue(
                        node_id,
                        f"config.repeat_safe_tools.{name}",
                        f"{name!r} is not one of this agent's tools ({', '.join(config.tools)})",
                        code="unknown_tool",
                    )
                )
        return issues

    # ----------------------------------------------------------------- the loop (replay)
    def execute(self, config: AgentConfig, ctx: NodeContext) -> NodeResult:
        """Replay the loop over ``ctx.children`` and return the next children to run, or
        the answer.

        Returns ``NodeResult(spawn=[...])`` with the next model turn or the tool calls of
        the last reply (all of them at once: they run as parallel steps), or the final
        ``NodeResult(updates={output_key: answer}, output={"answer", "turns",
        "tool_calls", "stop_reason", "model"})``.

        Raises NodeError (not retryable: a replay would see the same facts):
        ``template``/``unknown_tool`` for a broken config, the failed model turn's own
        code when a model turn failed for good, ``max_turns`` when the model still asks
        for tools on its last turn.
        """
        self._definitions(config)  # every tool must exist before anything is spent
        first = ctx.children.get("turn-0")
        if first is not None and first.get("status") == "succeeded" and "prompt" in (first.get("output") or {}):
            # The conversation starts with what turn 0 was really sent: the state may have
            # changed since (a parallel branch committed), and a replay must not diverge.
            messages = [_load_message(m) for m in first["output"]["prompt"]]
        else:
            messages = prompt_messages(config, expression_names(ctx))
        tool_calls_run = 0
        turn = 0
        while True:
            key = f"turn-{turn}"
            child = ctx.children.get(key)
            if child is None:
                return NodeResult(
                    spawn=[ChildCall(key, MODEL_TURN, {"turn": turn, "messages": [_dump_message(m) for m in messages]})]
                )
            if child.get("status") != "succeeded":
                error = child.get("error") or {}
                raise NodeError(
                    f"model turn {turn} failed: {error.get('message', 'unknown error')}",
                    code=str(error.get("code") or "model_turn_failed"),
                    retryable=False,
                    details={"turn": turn, "error": error},
                )
            reply = child["output"]
            calls = [ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in reply.get("tool_calls") or []]
            messages.append(Message(role="assistant", content=reply.get("text") or "", tool_calls=calls or None))
            if not calls:
                answer = reply.get("text") or ""
                return NodeResult(
                    updates={config.output_key: answer},
                    output={
                        "answer": answer,
                        "turns": turn + 1,
                        "tool_calls": tool_calls_run,
                        "stop_reason": reply.get("stop_reason"),
                        "model": reply.get("model"),
                    },
                )
            if turn + 1 >= config.max_turns:
                raise NodeError(
                    f"the agent used its {config.max_turns} model turn(s) and the model still asks for tools",
                    code="max_turns",
                    retryable=False,
                    details={"turns": turn + 1, "tool_calls": [c.name for c in calls]},
                )
            keyed = _tool_keys(turn, calls)
            runnable = keyed[: config.max_tool_calls_per_turn]
            missing = [
                ChildCall(key, TOOL_CALL, {"tool": c.name, "arguments": c.arguments, "call_id": c.id, "turn": turn})
                for key, c in runnable
                if key not in ctx.children
            ]
            if missing:
                return NodeResult(spawn=missing)
            for i, (key, call) in enumerate(keyed):
                if i >= config.max_tool_calls_per_turn:
                    content = _error_content(
                        "too_many_tool_calls",
                        f"not run: at most {config.max_tool_calls_per_turn} tool calls per turn",
                    )
                    messages.append(Message(role="tool", content=content, tool_call_id=call.id, is_error=True))
                    continue
                result = ctx.children[key]
                tool_calls_run += 1
                if result.get("status") == "succeeded":
                    content = _result_content(result.get("output"), config.max_tool_result_chars)
                    messages.append(Message(role="tool", content=content, tool_call_id=call.id))
                else:
                    error = result.get("error") or {}
                    content = _error_content(str(error.get("code") or "tool_failed"), str(error.get("message") or ""))
                    messages.append(Message(role="tool", content=content, tool_call_id=call.id, is_error=True))
            turn += 1

    # ----------------------------------------------------------------- children
    def execute_child(self, config: AgentConfig, call: ChildCall, ctx: NodeContext) -> NodeResult:
        """Run one child: a model turn (one provider call; usage and cost recorded on this
        child) or a tool call (the registered tool, with this child's idempotency key).

        Raises ProviderError from the model call (retryable ones follow the agent node's
        retry policy), and for tool calls NodeError ``tool_arguments`` (the model's
        arguments were not a JSON object or do not fit the tool), ``unknown_tool`` (a tool
        that was not offered), or whatever the tool raises.
        """
        ctx.check_cancelled()
        if call.label == MODEL_TURN:
            return self._model_turn(config, call, ctx)
        if call.label == TOOL_CALL:
            return self._tool_call(config, call, ctx)
        raise NodeError(f"unknown agent child {call.label!r}", code="spawn", retryable=False)

    def _model_turn(self, config: AgentConfig, call: ChildCall, ctx: NodeContext) -> NodeResult:
        provider = llm_call.provider_of(config)
        messages = [_load_message(m) for m in call.input.get("messages", [])]
        request = llm_call.llm_request(
            config, messages, ctx, tools=self._definitions(config), idempotency_key=ctx.idempotency_key
        )
        response = spans.complete(provider, request)
        usage = response.usage
        usage.price_version = provider.price_version(usage.model)
        output: dict[str, Any] = {
            "text": response.text,
            "tool_calls": [c.as_dict() for c in response.tool_calls],
            "stop_reason": response.stop_reason,
            "model": response.model,
        }
        if call.input.get("turn") == 0:
            # The rendered prompt, kept with the first turn's result: replays rebuild the
            # conversation from it (ctx.children carries outputs, not inputs).
            output["prompt"] = call.input.get("messages", [])
        return NodeResult(output=output, usage=usage, cost_usd=provider.price(usage.model, usage))

    def _tool_call(self, config: AgentConfig, call: ChildCall, ctx: NodeContext) -> NodeResult:
        name = str(call.input.get("tool", ""))
        arguments = call.input.get("arguments") or {}
        graph_tool = config.graph_tool(name)
        if name not in config.tools and graph_tool is None:
            raise NodeError(
                f"the model called {name!r}, which is not one of this agent's tools ({', '.join(config.tool_names())})",
                code="unknown_tool",
                retryable=False,
            )
        if not isinstance(arguments, Mapping) or INVALID_ARGUMENTS_KEY in arguments:
            raw = arguments.get(INVALID_ARGUMENTS_KEY) if isinstance(arguments, Mapping) else arguments
            raise NodeError(
                f"the arguments for {name!r} were not a JSON object: {str(raw)[:500]}",
                code="tool_arguments",
                retryable=False,
            )
        if graph_tool is not None:
            # A durable child run: this step waits for it as a row (on_wait creates it).
            return graph_calls().call(graph_tool, arguments, ctx)
        return NodeResult(output=require_tool(name).call(arguments, ToolContext.for_step(ctx)))

    def waits(self, config: AgentConfig) -> bool:
        """Only an agent with graph tools waits (its calls' child runs)."""
        return bool(config.graph_tools)

    def on_wait(self, *, run: Any, step: Any, wait: Wait) -> None:
        """A graph tool's call waits (a child step): create its child run in that commit."""
        graph_calls().start(run=run, step=step, wait=wait)

    def is_child_repeat_safe(self, config: AgentConfig, call: ChildCall) -> bool:
        """A tool call is as repeat-safe as ``repeat_safe_tools`` says for its tool, else
        as its tool (an email is not: a crash mid-call parks the run for a person); a
        model turn may simply run again (it may be paid twice, which the attempts record
        shows)."""
        if call.label != TOOL_CALL:
            return True
        name = str(call.input.get("tool", ""))
        if name not in config.tools:
            return True  # it fails before doing anything, or is a graph tool (its child run is created once)
        if name in config.repeat_safe_tools:
            return config.repeat_safe_tools[name]
        try:
            return get_tool(name).repeat_safe
        except UnknownTool:
            return True

    # ----------------------------------------------------------------- budgets
    def estimate_child_cost(
        self, config: AgentConfig, call: ChildCall, state: Mapping[str, Any]
    ) -> tuple[Decimal | None, int]:
        """Worst case of one child: for a model turn, its actual messages and the tool
        definitions (estimated tokens) plus ``max_tokens`` output at the model's price;
        a tool call costs (0, 0). USD is None when the price or provider is unknown."""
        if call.label != MODEL_TURN:
            return Decimal(0), 0
        provider = llm_call.provider_or_none(config)
        messages = [_load_message(m) for m in call.input.get("messages", [])]
        request = LLMRequest(model=config.model, messages=messages, tools=self._definitions(config, strict=False))
        input_tokens = llm_call.request_tokens(provider, request)
        return llm_call.worst_case_usd(provider, config, input_tokens, config.max_tokens), input_tokens + config.max_tokens

    def estimate_cost(self, config: AgentConfig, state: Mapping[str, Any]) -> tuple[Decimal | None, int]:
        """Worst case of the whole loop, for the pre-run estimate (validate_graph
        --estimate): ``max_turns`` model turns, each resending the conversation so far,
        which grows per turn by at most a full reply (``max_tokens``) and
        ``max_tool_calls_per_turn`` results of ``max_tool_result_chars``. The engine does
        not use this for the agent step's budget check: it checks every model turn before
        it starts (:meth:`estimate_child_cost`)."""
        provider = llm_call.provider_or_none(config)
        messages = prompt_messages(config, state, strict=False)
        tools = self._definitions(config, strict=False)
        first = llm_call.request_tokens(provider, LLMRequest(model=config.model, messages=messages, tools=tools))
        result_tokens = MESSAGE_OVERHEAD_TOKENS + llm_call.count_tokens(
            provider, "x" * (config.max_tool_result_chars + len(TRUNCATION_NOTE) + 12)
        )
        growth = MESSAGE_OVERHEAD_TOKENS + config.max_tokens + config.max_tool_calls_per_turn * result_tokens
        input_tokens = sum(first + k * growth for k in range(config.max_turns))
        output_tokens = config.max_turns * config.max_tokens
        return llm_call.worst_case_usd(provider, config, input_tokens, output_tokens), input_tokens + output_tokens

    # ----------------------------------------------------------------- helpers
    def _definitions(self, config: AgentConfig, *, strict: bool = True) -> list[ToolDefinition]:
        """The tool definitions sent to the model. ``strict``: raise NodeError for an
        unknown tool (else skip it: estimates)."""
        definitions = []
        for name in config.tools:
            try:
                registered = require_tool(name)
            except NodeError:
                if strict:
                    raise
                continue
            definitions.append(ToolDefinition(name=name, description=registered.description, parameters=registered.json_schema()))
        for graph_tool in config.graph_tools:
            try:
                definitions.append(graph_calls().definition(graph_tool))
            except NodeError:
                if strict:
                    raise
        return definitions


def _tool_keys(turn: int, calls: list[ToolCall]) -> list[tuple[str, ToolCall]]:
    """``(child key, call)`` for each call of one reply: ``tool-<turn>-<call id>``, the id
    cut to a safe alphabet; a missing or repeated id gets the call's position instead."""
    keyed = []
    seen: set[str] = set()
    for i, call in enumerate(calls):
        ident = _KEY_UNSAFE.sub("_", call.id or "")[:MAX_CALL_ID_CHARS] or f"call{i}"
        key = f"tool-{turn}-{ident}"
        if key in seen:
            key = f"tool-{turn}-{ident}-{i}"
        seen.add(key)
        keyed.append((key, call))
    return keyed


def _result_content(output: Any, limit: int) -> str:
    """A tool result as the text sent to the model (JSON; strings as they are), cut to
    ``limit`` characters."""
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, separators=(",", ":"))
    if len(text) > limit:
        text = text[:limit] + TRUNCATION_NOTE.format(n=len(text) - limit)
    return text


def _error_content(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message[:2000]}}, ensure_ascii=False)


def _dump_message(message: Message) -> dict[str, Any]:
    """A message as JSON for a model turn's child input."""
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["tool_calls"] = [c.as_dict() for c in message.tool_calls]
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    if message.is_error:
        data["is_error"] = True
    return data


def _load_message(data: Mapping[str, Any]) -> Message:
    calls = [ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in data.get("tool_calls") or []]
    return Message(
        role=data["role"],
        content=data.get("content") or "",
        tool_calls=calls or None,
        tool_call_id=data.get("tool_call_id"),
        is_error=bool(data.get("is_error")),
    )
