"""The approval node kind: pause the run as a row until a person decides, then route by the decision."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import Field

from runs.expressions import ExpressionError
from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeError, NodeKind, NodeResult, Wait
from runs.nodes.shared import check_template, expression_names
from runs.templating import render_template

# The handles of an approval node: a decision takes exactly one.
APPROVED = "approved"
REJECTED = "rejected"


class ApprovalConfig(NodeConfig):
    """``prompt`` (a template over the state) is shown to the approver; ``approvers`` and
    ``approver_groups`` (usernames, group names) say who may decide, empty = anyone with
    the approver role; the decision is written to state under ``output_key``."""

    prompt: str = Field("Approve?", max_length=10000, title="Prompt", description="Shown to the approver; a template over the state.")
    approvers: list[str] = Field(default_factory=list, title="Approvers", description="Usernames who may decide; leave empty for anyone with the approver role.")
    approver_groups: list[str] = Field(default_factory=list, title="Approver groups", description="Groups whose members may decide.")
    output_key: str = Field("approval", title="Output state key", description="The state key the decision is written to.")


class ApprovalNode(NodeKind[ApprovalConfig]):
    """Commits an approval request and sets the run waiting; routes ``approved`` or
    ``rejected`` on the decision. An unwired ``rejected`` fails the run."""

    kind = "approval"
    config_model = ApprovalConfig
    uses_repeat_safe: ClassVar[bool] = False  # its request is created in the commit: safe to repeat
    description = "Wait for a person to approve or reject (minutes or weeks)."
    title, category = "Approval", "human"  # builder palette (builder.selectors.node_kind_catalogue)

    def output_handles(self, config: ApprovalConfig) -> list[str]:
        return [APPROVED, REJECTED]

    def optional_handles(self, config: ApprovalConfig) -> set[str]:
        return {REJECTED}

    def writes(self, config: ApprovalConfig) -> set[str]:
        return {config.output_key}

    def check(self, node_id: str, config: ApprovalConfig, known_names: set[str]) -> list[Issue]:
        """The prompt template parses and names only known variables."""
        return check_template(node_id, "config.prompt", config.prompt, known_names)

    def execute(self, config: ApprovalConfig, ctx: NodeContext) -> NodeResult:
        """Render the prompt and wait. Raises NodeError(code="template", not retryable)."""
        try:
            prompt = render_template(config.prompt, expression_names(ctx))
        except ExpressionError as exc:
            raise NodeError(f"approval prompt: {exc.message}", code="template", retryable=False) from None
        payload = {"prompt": prompt, "approvers": config.approvers, "approver_groups": config.approver_groups}
        return NodeResult(output={"prompt": prompt}, wait=Wait("approval", payload))

    def on_wait(self, *, run: Any, step: Any, wait: Wait) -> None:
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

    def decision_result(
        self, config: ApprovalConfig, *, approved: bool, comment: str, by: str, wired_handles: Iterable[str]
    ) -> NodeResult | None:
        """The waiting step's result for a decision: ``{"decision": "approved"|"rejected",
        "comment", "by"}`` written to ``output_key`` and recorded as the output, routed down
        the handle of that name. ``wired_handles``: the source handles of the node's
        outgoing edges. Returns None for a rejection when ``rejected`` is not wired: the
        run then fails (there is nowhere to go)."""
        if not approved and REJECTED not in set(wired_handles):
            return None
        verdict = APPROVED if approved else REJECTED
        record = {"decision": verdict, "comment": comment, "by": by}
        return NodeResult(updates={config.output_key: record}, output=record, route=[verdict])
