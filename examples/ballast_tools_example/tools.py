"""Two tools of your own: ``send_message`` (a side effect, not safe to repeat, sends the step's idempotency key on) and ``wait_for_reply`` (long, safe to repeat, stops when the step is cancelled).

Name this module in BALLAST_EXTRA_TOOL_MODULES (``ballast_tools_example.tools``) in every
web and worker process; the ``@tool`` decorators register the tools when Ballast imports
it. A tool is ``fn(args: PydanticModel, ctx: ToolContext) -> JSON``: the model validates
the arguments (its JSON Schema is what the builder and the models see), ``ctx`` carries
the step's idempotency key and cancel signal.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ballast_tools_example import outbox
from runs.tools import ToolContext, tool
from runs.vocabulary import NodeError


class MessageArgs(BaseModel):
    """Arguments of ``send_message``."""

    channel: str = Field(pattern=r"^#[a-z0-9_-]{1,40}$", description="The channel, e.g. #support.")
    text: str = Field(min_length=1, max_length=4000, description="The message.")


@tool("send_message", description="Post a message to a channel of the example messaging service.", repeat_safe=False)
def send_message(args: MessageArgs, ctx: ToolContext) -> dict[str, Any]:
    """Send ``args.text`` to ``args.channel``; return ``{"message_id", "duplicate"}``.

    Not safe to repeat (``repeat_safe=False``): a crash after the send and before the
    step's commit leaves Ballast not knowing whether the message went, so recovery parks
    the run for a person instead of sending again. The step's idempotency key, the same
    on every attempt, goes to the service, which answers a key it has seen with the
    first message (``duplicate`` true) instead of sending twice. Over HTTP it would be
    a header: ``httpx.post(url, json=..., headers={"Idempotency-Key": ctx.idempotency_key})``.
    """
    ctx.check_cancelled()  # a run cancelled before the send sends nothing
    return outbox.send(args.channel, args.text, idempotency_key=ctx.idempotency_key)


class ReplyArgs(BaseModel):
    """Arguments of ``wait_for_reply``."""

    message_id: str = Field(min_length=1, max_length=64, description="The message whose reply to wait for.")
    max_wait_seconds: float = Field(300.0, gt=0, le=86400, description="Give up (reply null) after this long.")
    poll_seconds: float = Field(0.2, gt=0, le=60, description="How often to look for the reply.")


@tool("wait_for_reply", description="Wait for a reply to a message of the example messaging service.")
def wait_for_reply(args: ReplyArgs, ctx: ToolContext) -> dict[str, Any]:
    """Poll the service for a reply to ``args.message_id``; return ``{"reply": text}``, or
    ``{"reply": None}`` after ``max_wait_seconds`` (or the step's ``timeout``, if sooner).

    Safe to repeat (the default): it only reads, so a crash simply runs it again. It waits
    on ``ctx.cancelled`` between polls instead of sleeping, so a cancelled run, a lost
    lease or a step timeout ends it at once with StepCancelled (code ``cancelled``).
    Raises NodeError ``no_such_message`` (not retryable) for an id the service never sent.
    """
    if not any(e.get("message_id") == args.message_id for e in outbox.entries()):
        raise NodeError(f"no message {args.message_id!r} was sent", code="no_such_message", retryable=False)
    budget = args.max_wait_seconds if ctx.timeout is None else min(args.max_wait_seconds, ctx.timeout)
    waited = 0.0
    while True:
        ctx.check_cancelled()
        text = outbox.reply_to(args.message_id)
        if text is not None or waited >= budget:
            return {"reply": text}
        step = min(args.poll_seconds, budget - waited)
        ctx.cancelled.wait(step)  # returns at once when the step is cancelled
        waited += step
