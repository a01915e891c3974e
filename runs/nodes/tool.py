"""The ``tool`` node kind: render arguments from run state and call a registered tool once."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.fields import field_path
from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeKind, NodeResult
from runs.nodes.shared import STATE_KEY_PATTERN, expression_names, unknown_variables
from runs.sandbox.expressions import ExpressionError
from runs.sandbox.templating import render_value, value_names
from runs.tools import ToolContext, UnknownTool, get_tool, require_tool
from runs.vocabulary import NodeError


class ToolConfig(NodeConfig):
    """Config of a ``tool`` node.

    - ``tool``: registered tool name.
    - ``args``: the arguments object; string values may be templates rendered against
      the run state (a string that is exactly ``{{ expr }}`` keeps the value's type).
    - ``output_key``: state key the tool's result is written to (None: not stored in
      state; the step output still records it).
    """

    tool: str = Field(min_length=1, title="Tool", description="A registered tool.")
    args: dict[str, Any] = Field(
        default_factory=dict,
        title="Arguments",
        description="The tool's arguments; text values may be templates, e.g. {{ order_id }}.",
    )
    output_key: str | None = Field(
        None, pattern=STATE_KEY_PATTERN, title="Output state key", description="The state key the result is written to; leave empty to keep it out of the state."
    )


class ToolNode(NodeKind[ToolConfig]):
    """Calls one registered tool with the step's idempotency key; repeat-safe as the tool is."""

    kind = "tool"
    config_model = ToolConfig
    description = "Call a tool (HTTP request, email, your own functions) with arguments from the state."
    title, category = "Tool", "tools"  # builder palette (builder.selectors.node_kind_catalogue)

    def writes(self, config: ToolConfig) -> set[str]:
        return {config.output_key} if config.output_key else set()

    def is_repeat_safe(self, config: ToolConfig) -> bool:
        """The tool's own ``repeat_safe``; an unknown tool counts as unsafe (validation
        rejects it anyway)."""
        try:
            return get_tool(config.tool).repeat_safe
        except UnknownTool:
            return False

    def check(self, node_id: str, config: ToolConfig, known_names: set[str]) -> list[Issue]:
        """Unknown tool, template errors and unknown names in ``args``, and argument errors
        that do not depend on templates (missing required or unexpected arguments,
        literal values of the wrong type)."""
        issues: list[Issue] = []
        templated: set[str] = set()
        for key, value in config.args.items():
            field = f"config.args.{key}"
            try:
                names = value_names(value)
            except ExpressionError as exc:
                issues.append(Issue(node_id, field, exc.message, code="invalid_template"))
                templated.add(key)
                continue
            if names or _has_template(value):
                templated.add(key)
            issues.extend(unknown_variables(node_id, field, names, known_names))

        try:
            registered = get_tool(config.tool)
        except UnknownTool:
            issues.append(Issue(node_id, "config.tool", f"unknown tool {config.tool!r}", code="unknown_tool"))
            return issues
        for loc, message in registered.argument_problems(config.args):
            # A templated argument's value is only known at run time.
            if loc and loc[0] in templated:
                continue
            issues.append(Issue(node_id, field_path(loc, "config.args"), message, code="tool_arguments"))
        return issues

    def execute(self, config: ToolConfig, ctx: NodeContext) -> NodeResult:
        """Render ``args`` against the state and call the tool.

        Returns updates ``{output_key: result}`` (or none) and the result as output.
        Raises NodeError: ``unknown_tool`` and ``template`` (not retryable),
        ``tool_arguments`` (not retryable), or whatever the tool raises.
        """
        registered = require_tool(config.tool)
        names = expression_names(ctx)
        args: dict[str, Any] = {}
        # One argument at a time, so that an error names its field (config.args.query).
        for key, value in config.args.items():
            try:
                args[key] = render_value(value, names)
            except ExpressionError as exc:
                raise NodeError(
                    f"config.args.{key}: {exc.message}", code="template", retryable=False, details={"error_code": exc.code}
                ) from exc
        ctx.check_cancelled()
        result = registered.call(args, ToolContext.for_step(ctx))
        updates = {config.output_key: result} if config.output_key else {}
        return NodeResult(updates=updates, output=result)


def _has_template(value: Any) -> bool:
    """Whether a (nested) value contains a template string (even one naming nothing)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value or "{#" in value
    if isinstance(value, dict):
        return any(_has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_template(v) for v in value)
    return False
