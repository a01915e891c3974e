"""A node kind for tests that spawns child steps in rounds (the agent node's shape)."""
from __future__ import annotations

import json
import os

from pydantic import Field

from runs.nodes.base import ChildCall, NodeConfig, NodeContext, NodeKind, NodeResult
from runs.vocabulary import NodeError
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


# Values JSON cannot carry faithfully, by name, each with the path a step error must name
# (below the node's output key when it writes state, e.g. ``output.result.items[1].price``).
def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


NOT_JSON = {
    "nan": ({"items": [{"price": 1.0}, {"price": float("nan")}]}, "items[1].price", "NaN is not a JSON number"),
    "infinity": ({"total": float("inf")}, "total", "Infinity is not a JSON number"),
    "minus_infinity": ({"low": [0, float("-inf")]}, "low[1]", "-Infinity is not a JSON number"),
    "set": ({"tags": {"a", "b"}}, "tags", "a set is not JSON (use a list)"),
    "complex": ({"z": 1 + 2j}, "z", "complex is not a JSON type"),
    "bytes": ({"blob": b"\x01\x02"}, "blob", "bytes are not JSON (decode them to a string first)"),
    "int_key": ({"counts": {1: "one"}}, "counts[1]", "an object key must be a string, not int (1)"),
    "colliding_keys": (
        {"counts": {1: "int", "1": "str"}},
        "counts[1]",
        'an object key must be a string, not int (1); as JSON it would become the key "1", which this object already has',
    ),
    "decimal": ({"price": __import__("decimal").Decimal("1.50")}, "price", "decimal.Decimal is not a JSON type"),
    "datetime": ({"at": __import__("datetime").datetime(2026, 1, 1)}, "at", "datetime.datetime is not a JSON type"),
    "nul": ({"text": "a\x00b"}, "text", "a string with a NUL character (\\u0000), which PostgreSQL cannot store"),
    "too_deep": ({"tree": _deep(300)}, "tree" + "[0]" * 255, "nested deeper than 256 levels"),
}


class EmitConfig(NodeConfig):
    """``value``: a name in NOT_JSON (or ``tuple``, ``big``); ``where``: ``updates`` (written to
    ``output_key``) or ``output`` (recorded output only); ``size``: characters of ``big``."""

    value: str
    where: str = "updates"
    output_key: str = "result"
    size: int = 0


class EmitNode(NodeKind[EmitConfig]):
    """Test kind: returns a value that is (or is not) JSON, as a buggy or careless node would."""

    kind = "emit"
    config_model = EmitConfig
    description = "Test kind: emits a chosen value."

    def writes(self, config: EmitConfig) -> set[str]:
        return {config.output_key}

    def execute(self, config: EmitConfig, ctx: NodeContext) -> NodeResult:
        if config.value == "tuple":
            value: object = {"pair": (1, (2, 3))}
        elif config.value == "big":
            value = "x" * config.size
        else:
            value = NOT_JSON[config.value][0]
        if config.where == "output":
            return NodeResult(output=value)
        return NodeResult(updates={config.output_key: value})
