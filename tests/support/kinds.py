"""A node kind for tests that spawns child steps in rounds (the agent node's shape)."""
from __future__ import annotations

import json
import os

from pydantic import Field

from runs.nodes.base import ChildCall, NodeConfig, NodeContext, NodeError, NodeKind, NodeResult
from tests.support.tools import effects_path


class SpawnerConfig(NodeConfig):
    """``rounds``: child keys per round; a round starts when the previous one finished.
    ``fail``: keys whose child fails for good; ``unsafe``: keys not safe to repeat."""

    rounds: list[list[str]] = Field(default_factory=list)
    fail: list[str] = Field(default_factory=list)
    unsafe: list[str] = Field(default_factory=list)
    output_key: str = "children"


class SpawnerNode(NodeKind[SpawnerConfig]):
    """Deterministic replay over ``ctx.children``: spawn the first unfinished round."""

    kind = "spawner"
    config_model = SpawnerConfig
    description = "Test kind: spawns child steps in rounds."

    def writes(self, config: SpawnerConfig) -> set[str]:
        return {config.output_key}

    def execute(self, config: SpawnerConfig, ctx: NodeContext) -> NodeResult:
        for number, keys in enumerate(config.rounds):
            missing = [k for k in keys if k not in ctx.children]
            if missing:
                return NodeResult(spawn=[ChildCall(k, "tool_call", {"round": number, "fail": k in config.fail}) for k in missing])
        summary = {k: v.get("status") for k, v in sorted(ctx.children.items())}
        return NodeResult(updates={config.output_key: summary})

    def execute_child(self, config: SpawnerConfig, call: ChildCall, ctx: NodeContext) -> NodeResult:
        with open(effects_path(), "a") as fh:
            fh.write(json.dumps({"label": call.key, "key": ctx.idempotency_key, "attempt": ctx.attempt, "pid": os.getpid()}) + "\n")
        from runs.engine import faults

        faults.point("child_execute", node_id=call.key, step_id=ctx.step_id)
        if call.input.get("fail"):
            raise NodeError(f"child {call.key} failed", code="child_failed", retryable=False)
        return NodeResult(output={"key": call.key, "round": call.input["round"]})

    def is_child_repeat_safe(self, config: SpawnerConfig, call: ChildCall) -> bool:
        return call.key not in config.unsafe
