"""The approval node kind: pause the run as a row until a person decides."""
from __future__ import annotations

from pydantic import Field

from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeKind, NodeResult, Wait


class ApprovalConfig(NodeConfig):
    """``prompt`` (a template over the state) is shown to the approver; ``approvers`` and
    ``approver_groups`` (usernames, group names) say who may decide, empty = anyone with
    the approver role; the decision is written to state under ``output_key``."""

    prompt: str = Field("Approve?", max_length=10000)
    approvers: list[str] = Field(default_factory=list)
    approver_groups: list[str] = Field(default_factory=list)
    output_key: str = "approval"


class ApprovalNode(NodeKind):
    """Commits an approval request and sets the run waiting; routes ``approved`` or
    ``rejected`` on the decision. An unwired ``rejected`` fails the run."""

    kind = "approval"
    Config = ApprovalConfig
    description = "Wait for a person to approve or reject (minutes or weeks)."
    title, category = "Approval", "human"  # builder palette (builder.selectors.node_kind_catalogue)

    def output_handles(self, config: ApprovalConfig) -> list[str]:
        return ["approved", "rejected"]

    def optional_handles(self, config: ApprovalConfig) -> set[str]:
        return {"rejected"}

    def writes(self, config: ApprovalConfig) -> set[str]:
        return {config.output_key}

    def check(self, node_id: str, config: ApprovalConfig, known_names: set[str]) -> list[Issue]:
        from runs.expressions import ExpressionError
        from runs.templating import template_names

        try:
            unknown = sorted(template_names(config.prompt) - known_names)
        except ExpressionError as exc:
            return [Issue(node_id, "config.prompt", exc.message, "template_syntax")]
        return [Issue(node_id, "config.prompt", f"unknown variable '{name}'", "unknown_variable") for name in unknown]

    def execute(self, config: ApprovalConfig, ctx: NodeContext) -> NodeResult:
        from runs.expressions import ExpressionError
        from runs.nodes.base import NodeError
        from runs.templating import render_template

        try:
            prompt = render_template(config.prompt, ctx.state)
        except ExpressionError as exc:
            raise NodeError(f"approval prompt: {exc.message}", code="template", retryable=False) from None
        payload = {"prompt": prompt, "approvers": config.approvers, "approver_groups": config.approver_groups}
        return NodeResult(output={"prompt": prompt}, wait=Wait("approval", payload))

    def on_wait(self, *, run, step, wait: Wait) -> None:
        from approvals.models import ApprovalRequest

        ApprovalRequest.objects.create(
            run_id=run.pk,
            step_id=step.pk,
            node_id=step.node_id,
            purpose="gate",
            prompt=wait.payload.get("prompt", ""),
            payload=wait.payload,
            approvers=wait.payload.get("approvers", []),
            approver_groups=wait.payload.get("approver_groups", []),
        )
