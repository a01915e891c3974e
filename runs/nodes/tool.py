"""The ``tool`` node kind: render arguments from run state and call a registered tool once."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.fields import field_path
from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeKind, NodeResult
from runs.nodes.shared import STATE_KEY_PATTERN, check_template_values, expression_names, render_template_values
from runs.tools import ToolContext, UnknownTool, get_tool, require_tool


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
        issues, read = check_template_values(node_id, "config.args", config.args, known_names)
        templated = {key for key, names in read.items() if names is None or names or _has_template(config.args[key])}

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
        args = render_template_values("config.args", config.args, expression_names(ctx))
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
