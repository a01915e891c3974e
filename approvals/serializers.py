"""Input and output serializers of the approvals API."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals import preview
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import GATE_DECISIONS, RECOVERY_DECISIONS, user_may_decide
from runs.api.serializer_fields import JSONObjectField, writable_context
from runs.models import RunStatus

# A request's version token as the API shows it (approvals.preview.version_token:
# "<row version>:<digest>"); anything else is a malformed request (400), not a stale one (409).
VERSION_TOKEN = r"^[0-9]{1,18}(:[^\s:]*)?$"
VERSION_TOKEN_HELP = "Not a version token: send back the request's version as the API showed it, such as '3:9f2c1a…'."


class ApprovalListQueryInput(serializers.Serializer):
    status = serializers.ChoiceField(choices=ApprovalStatus.choices, required=False, default=ApprovalStatus.PENDING)


class ApprovalDecideInput(serializers.Serializer):
    """``approve``/``reject`` for a gate; ``retry``/``skip``/``fail`` for a recovery
    request (``output``: the state updates a skipped step stands for; for an agent's tool
    call, the result the model is given)."""

    decision = serializers.ChoiceField(choices=sorted(GATE_DECISIONS | RECOVERY_DECISIONS))
    comment = serializers.CharField(max_length=5000, required=False, allow_blank=True, default="")
    output = JSONObjectField(required=False, allow_null=True, default=None)
    version = serializers.RegexField(
        VERSION_TOKEN, max_length=64, error_messages={"invalid": VERSION_TOKEN_HELP},
        help_text="The request's ``version`` as it was shown; a request that moved on since is refused with 409.",
    )
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="", help_text="A rejection's reason: one the node declares.")
    values = JSONObjectField(required=False, allow_null=True, default=None, help_text="Edited state values on an approval (the node's edit_schema).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Fields this input does not declare, and an ``output`` with a gate's decision
        (only a parked step's decision takes one), are refused naming them: a client's
        mistake must not pass for a recorded value. Raises ValidationError (400)."""
        sent = self.initial_data if isinstance(self.initial_data, dict) else {}
        errors = {name: ["Unknown field: a decision takes " + ", ".join(self.fields) + "."] for name in sorted(set(sent) - set(self.fields))}
        if attrs.get("output") is not None and attrs.get("decision") in GATE_DECISIONS:
            errors["output"] = ["An output goes with a parked step's decision (retry, skip, fail), not with approve or reject."]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class ApprovalClaimManyInput(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), min_length=1, max_length=200)


class ApprovalReassignInput(serializers.Serializer):
    """Exactly one of ``to_user`` (a username) or ``to_group`` (a group name)."""

    to_user = serializers.CharField(max_length=150, required=False, allow_null=True, default=None)
    to_group = serializers.CharField(max_length=150, required=False, allow_null=True, default=None)
    version = serializers.RegexField(
        VERSION_TOKEN, max_length=64, required=False, allow_null=True, default=None, error_messages={"invalid": VERSION_TOKEN_HELP}
    )
    comment = serializers.CharField(max_length=5000, required=False, allow_blank=True, default="")


class InboxQueryInput(serializers.Serializer):
    list = serializers.ChoiceField(choices=["assigned", "group", "decided"], default="assigned")
    q = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class InboxCountsOutput(serializers.Serializer):
    assigned = serializers.IntegerField()
    group = serializers.IntegerField()
    decided = serializers.IntegerField()
    waiting = serializers.IntegerField(help_text="Assigned to me plus unclaimed group requests: what waits for me.")


class ClaimManyOutput(serializers.Serializer):
    claimed = serializers.ListField(child=serializers.IntegerField())
    refused = serializers.ListField(child=serializers.DictField())


class VoteOutput(serializers.Serializer):
    """One approver's vote on a request with a quorum."""

    by = serializers.CharField()
    decision = serializers.CharField()
    comment = serializers.CharField()
    at = serializers.DateTimeField()


class NextActionOutput(serializers.Serializer):
    """A node the run goes on to if the request is approved (approvals.preview.next_actions)."""

    node_id = serializers.CharField()
    kind = serializers.CharField(help_text="A node kind registered on the server (GET /api/v1/node-kinds/; plug-ins add their own).")
    label = serializers.CharField()  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    arguments = serializers.DictField(help_text="The node's config rendered from the current state.")


class RunApprovalOutput(serializers.Serializer):
    """A pending request of a run, as the run page links to it: which step waits, and
    whether the caller may decide it (the request's page checks that again)."""

    id = serializers.IntegerField()
    step = serializers.IntegerField(source="step_id")
    node_id = serializers.CharField()
    purpose = serializers.ChoiceField(choices=["gate", "recovery"], help_text="gate: an approval node; recovery: a parked step (retry, skip or fail).")
    created_at = serializers.DateTimeField()
    may_decide = serializers.BooleanField(source="user_may_decide", help_text="Whether the caller may decide it.")


class ApprovalOutput(serializers.Serializer):
    """An approval request; ``may_decide`` says whether the caller may decide it."""

    id = serializers.IntegerField()
    run = serializers.IntegerField(source="run_id")
    step = serializers.IntegerField(source="step_id")
    graph = serializers.IntegerField(source="run.graph_version.graph_id")
    graph_name = serializers.CharField(source="run.graph_version.graph.name")
    node_id = serializers.CharField()
    purpose = serializers.ChoiceField(choices=["gate", "recovery"], help_text="gate: an approval node; recovery: a parked step (retry, skip or fail).")
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
    version = serializers.SerializerMethodField(help_text="Send it back with a decision: ``<n>:<digest of the next action>``.")
    last_change = serializers.CharField()
    claimed_by = serializers.CharField(source="claimed_by_name")
    claimed_at = serializers.DateTimeField(allow_null=True)
    quorum = serializers.IntegerField()
    votes = serializers.SerializerMethodField()
    reason = serializers.CharField()
    values = serializers.JSONField(allow_null=True)
    run_status = serializers.ChoiceField(source="run.status", choices=RunStatus.choices)
    started_by = serializers.SerializerMethodField()
    cost_usd = serializers.DecimalField(source="run.cost_usd", max_digits=24, decimal_places=6)
    budget_usd = serializers.DecimalField(source="run.budget_usd", max_digits=24, decimal_places=6, allow_null=True)
    next_actions = serializers.SerializerMethodField(help_text="What the run does next if approved: node, kind, arguments rendered from the current state.")
    state = serializers.SerializerMethodField(help_text="The part of the run's state the gate shows (all of it when it names no keys).")
    reject_reasons = serializers.SerializerMethodField()
    edit_schema = serializers.SerializerMethodField()
    starter_counts = serializers.SerializerMethodField()
    deadline = serializers.SerializerMethodField(help_text="The node's deadline as written (``4h``), or null without one.")
    due_at = serializers.DateTimeField(allow_null=True, help_text="When the deadline falls due (null: no deadline).")
    escalation = serializers.CharField(help_text="What happens then: notify, reassign or timeout ('' without a deadline).")
    escalated_at = serializers.DateTimeField(allow_null=True, help_text="When the deadline fired (null: not yet).")
    run_event_seq = serializers.SerializerMethodField(help_text="The run's last event seq: follow ws/runs/ from it to hear of changes.")

    def get_deadline(self, obj: ApprovalRequest) -> str | None:
        value = (obj.payload or {}).get("deadline")
        return value if isinstance(value, str) else None

    def get_run_event_seq(self, obj: ApprovalRequest) -> int:
        if hasattr(obj, "run_event_seq"):  # annotated by selectors.approval_list
            return int(obj.run_event_seq or 0)
        return obj.run.read_event_seq()

    def _config(self, obj: ApprovalRequest) -> Any:
        cache = writable_context(self).setdefault("_configs", {})
        if obj.pk not in cache:
            cache[obj.pk] = preview.gate_config(obj)
        return cache[obj.pk]

    def get_version(self, obj: ApprovalRequest) -> str:
        return preview.version_token(obj)

    @extend_schema_field(VoteOutput(many=True))
    def get_votes(self, obj: ApprovalRequest) -> list[dict[str, Any]]:
        return [{"by": v.user_name, "decision": v.decision, "comment": v.comment, "at": v.created_at.isoformat()} for v in obj.votes.all()]

    def get_started_by(self, obj: ApprovalRequest) -> str:
        user = obj.run.created_by
        return user.get_username() if user is not None else ""

    @extend_schema_field(NextActionOutput(many=True))
    def get_next_actions(self, obj: ApprovalRequest) -> list[dict[str, Any]]:
        return preview.next_actions(obj)

    def get_state(self, obj: ApprovalRequest) -> dict[str, Any]:
        return preview.shown_state(obj)

    def get_reject_reasons(self, obj: ApprovalRequest) -> list[str]:
        config = self._config(obj)
        return list(config.reject_reasons) if config is not None else []

    def get_edit_schema(self, obj: ApprovalRequest) -> dict[str, Any] | None:
        config = self._config(obj)
        return config.edit_schema if config is not None else None

    def get_starter_counts(self, obj: ApprovalRequest) -> bool:
        config = self._config(obj)
        return bool(config.starter_counts) if config is not None else True

    def get_may_decide(self, obj: ApprovalRequest) -> bool:
        request: Any = self.context.get("request")
        if obj.status != ApprovalStatus.PENDING or request is None:
            return False
        annotated = getattr(obj, "user_may_decide", None)  # selectors.with_may_decide
        return annotated if annotated is not None else user_may_decide(request.user, obj)
