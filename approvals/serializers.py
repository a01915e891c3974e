"""Input and output serializers of the approvals API."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import GATE_DECISIONS, RECOVERY_DECISIONS, user_may_decide
from builder.serializers import JSONObjectField


class ApprovalListQueryInput(serializers.Serializer):
    status = serializers.ChoiceField(choices=ApprovalStatus.choices, required=False, default=ApprovalStatus.PENDING)


class ApprovalDecideInput(serializers.Serializer):
    """``approve``/``reject`` for a gate; ``retry``/``skip``/``fail`` for a recovery
    request (``output``: the state updates a skipped step stands for; for an agent's tool
    call, the result the model is given)."""

    decision = serializers.ChoiceField(choices=sorted(GATE_DECISIONS | RECOVERY_DECISIONS))
    comment = serializers.CharField(max_length=5000, required=False, allow_blank=True, default="")
    output = JSONObjectField(required=False, allow_null=True, default=None)


class ApprovalOutput(serializers.Serializer):
    """An approval request; ``may_decide`` says whether the caller may decide it."""

    id = serializers.IntegerField()
    run = serializers.IntegerField(source="run_id")
    step = serializers.IntegerField(source="step_id")
    graph = serializers.IntegerField(source="run.graph_version.graph_id")
    graph_name = serializers.CharField(source="run.graph_version.graph.name")
    node_id = serializers.CharField()
    purpose = serializers.CharField()
    status = serializers.ChoiceField(choices=ApprovalStatus.choices)
    prompt = serializers.CharField()
    payload = serializers.JSONField()
    approvers = serializers.ListField(child=serializers.CharField())
    approver_groups = serializers.ListField(child=serializers.CharField())
    decision = serializers.CharField()
    comment = serializers.CharField()
    decided_by = serializers.CharField(source="decided_by_name")
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
    may_decide = serializers.SerializerMethodField()

    def get_may_decide(self, obj: ApprovalRequest) -> bool:
        request: Any = self.context.get("request")
        if obj.status != ApprovalStatus.PENDING or request is None:
            return False
        annotated = getattr(obj, "user_may_decide", None)  # selectors.with_may_decide
        return annotated if annotated is not None else user_may_decide(request.user, obj)
