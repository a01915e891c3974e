"""Outputs and inputs of the report pages' API: cost rows, totals and budgets, audit entries, verification and export, workers, run alerts."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from audit.models import AuditEntry
from runs.api.serializer_fields import JSONObjectField, writable_context
from runs.api.serializers import MAX_INT, DecimalDigits
from runs.reports.selectors import COST_GROUPS, COST_ORDERS, audit_version_id, audit_versions
from runs.selectors import (
    RunFilter,
    day_bounds,
)


def cost_filters(q: dict[str, Any]) -> dict[str, Any]:
    """The selector arguments of a validated cost query (CostQueryInput): the runs it
    covers as one :class:`RunFilter` (its UTC day range as a time range) and the model."""
    start, end = day_bounds(q.get("since"), q.get("until"))
    runs = RunFilter(run_id=q.get("run"), graph_id=q.get("graph"), start=start, end=end, include_tests=q["include_tests"])
    return {"filters": runs, "model": q.get("model")}




class CostQueryInput(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=COST_GROUPS, required=False, default="run")
    run = serializers.IntegerField(min_value=1, max_value=MAX_INT, required=False)
    graph = serializers.IntegerField(min_value=1, max_value=MAX_INT, required=False)
    model = serializers.CharField(max_length=200, required=False)
    since = serializers.DateField(required=False, help_text="First day (UTC), inclusive.")
    until = serializers.DateField(required=False, help_text="Last day (UTC), inclusive.")
    include_tests = serializers.BooleanField(required=False, default=False, help_text="Also count one-node test runs from the builder.")
    order = serializers.ChoiceField(choices=COST_ORDERS, required=False, default="key", help_text="key: by the group; -cost_usd: costliest first.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("since") and attrs.get("until") and attrs["since"] > attrs["until"]:
            raise serializers.ValidationError({"until": ["The last day comes before the first day (since)."]})
        return attrs


class CostTotalsQueryInput(CostQueryInput):
    """The filters of the cost rows, without grouping or order."""

    group_by = None  # type: ignore[assignment]  # DRF drops an inherited field set to None
    order = None  # type: ignore[assignment]  # DRF drops an inherited field set to None


class AuditQueryInput(serializers.Serializer):
    action = serializers.CharField(max_length=64, required=False)
    actor = serializers.CharField(max_length=200, required=False)
    actor_type = serializers.CharField(max_length=16, required=False)
    object_type = serializers.CharField(max_length=64, required=False)
    object_id = serializers.CharField(max_length=64, required=False)
    scope = serializers.CharField(max_length=100, required=False)
    since = serializers.DateField(required=False, help_text="First day (UTC) an entry was written, inclusive.")
    until = serializers.DateField(required=False, help_text="Last day (UTC), inclusive.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("since") and attrs.get("until") and attrs["since"] > attrs["until"]:
            raise serializers.ValidationError({"until": ["The last day comes before the first day (since)."]})
        return attrs



class CostRowOutput(serializers.Serializer):
    """Spend of one group: ``key`` is the step/run/graph id, the model name or the day."""

    key = serializers.SerializerMethodField()
    label = serializers.SerializerMethodField()  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    run = serializers.IntegerField(required=False, help_text="The step's run (group_by=step).")
    graph = serializers.IntegerField(required=False, help_text="The node's graph (group_by=node).")
    cost_usd = serializers.DecimalField(max_digits=20, decimal_places=6, help_text="Spend of the priced attempts.")
    unpriced_attempts = serializers.IntegerField(help_text="Attempts with usage but no known price: their cost is unknown, not in cost_usd.")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cached_input_tokens = serializers.IntegerField(help_text="Prompt-cache reads (inside input_tokens).")
    cache_write_tokens = serializers.IntegerField(help_text="Prompt-cache writes (inside input_tokens).")
    attempts = serializers.IntegerField()
    retry_cost_usd = serializers.DecimalField(max_digits=20, decimal_places=6, help_text="Part of cost_usd spent by retries (the attempt before failed).")
    retry_attempts = serializers.IntegerField()
    retry_unpriced_attempts = serializers.IntegerField()
    crash_rerun_cost_usd = serializers.DecimalField(max_digits=20, decimal_places=6, help_text="Part of cost_usd spent re-running steps whose worker died.")
    crash_rerun_attempts = serializers.IntegerField()
    crash_rerun_unpriced_attempts = serializers.IntegerField()

    def get_key(self, row: dict[str, Any]) -> str:
        value = row.get("key")
        return "" if value is None else (value.isoformat() if hasattr(value, "isoformat") else str(value))

    def get_label(self, row: dict[str, Any]) -> str:
        return "" if row.get("label") is None else str(row["label"])


class AuditListOutput(serializers.ListSerializer):
    """Audit entries in a list: the graph versions they name are read once for the whole page."""

    def to_representation(self, data: Any) -> list[Any]:
        entries = list(data.all() if hasattr(data, "all") else data)
        writable_context(self)["versions"] = audit_versions(entries=entries)
        return super().to_representation(entries)


class AuditVersionOutput(serializers.Serializer):
    """The graph version an audit entry names, as people know it (its graph and number)."""

    id = serializers.IntegerField()
    number = serializers.IntegerField(help_text="The version's number in its graph (0: a node-test snapshot).")
    graph = serializers.IntegerField()
    graph_name = serializers.CharField()
    is_test = serializers.BooleanField()


class AuditEntryOutput(serializers.Serializer):
    """One audit entry with its place in its hash chain."""

    class Meta:
        list_serializer_class = AuditListOutput

    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    actor_type = serializers.CharField()
    actor = serializers.CharField()
    action = serializers.CharField()
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    data = JSONObjectField()  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    scope = serializers.CharField()
    seq = serializers.IntegerField()
    prev_hash = serializers.CharField()
    hash = serializers.CharField()
    version = serializers.SerializerMethodField(
        help_text="The graph version the entry names (its object, or data.graph_version), with its graph and number; "
        "null when it names none or the version was deleted. Not part of the chained entry."
    )

    @extend_schema_field(AuditVersionOutput(allow_null=True))
    def get_version(self, obj: AuditEntry) -> dict[str, Any] | None:
        version_id = audit_version_id(obj)
        if version_id is None:
            return None
        known = self.context.get("versions")
        if known is None:
            known = audit_versions(entries=[obj])
        return known.get(version_id)

MONEY: DecimalDigits = {"max_digits": 20, "decimal_places": 6}


class CostTotalsOutput(serializers.Serializer):
    """The totals of the cost rows over the same filters (one aggregate query)."""

    cost_usd = serializers.DecimalField(**MONEY, help_text="Spend of the priced attempts.")
    unpriced_attempts = serializers.IntegerField(help_text="Attempts whose price is unknown: their cost is not in cost_usd.")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cached_input_tokens = serializers.IntegerField(help_text="Prompt-cache reads (inside input_tokens).")
    cache_write_tokens = serializers.IntegerField(help_text="Prompt-cache writes (inside input_tokens).")
    attempts = serializers.IntegerField()
    first_cost_usd = serializers.SerializerMethodField(help_text="Spend of first attempts: cost_usd less retries and crash re-runs.")
    first_attempts = serializers.SerializerMethodField()
    first_unpriced_attempts = serializers.SerializerMethodField()
    retry_cost_usd = serializers.DecimalField(**MONEY)
    retry_attempts = serializers.IntegerField()
    retry_unpriced_attempts = serializers.IntegerField()
    crash_rerun_cost_usd = serializers.DecimalField(**MONEY)
    crash_rerun_attempts = serializers.IntegerField()
    crash_rerun_unpriced_attempts = serializers.IntegerField()

    def get_first_cost_usd(self, row: dict[str, Any]) -> str:
        value = row["cost_usd"] - row["retry_cost_usd"] - row["crash_rerun_cost_usd"]
        return serializers.DecimalField(**MONEY).to_representation(value)

    def get_first_attempts(self, row: dict[str, Any]) -> int:
        return int(row["attempts"] - row["retry_attempts"] - row["crash_rerun_attempts"])

    def get_first_unpriced_attempts(self, row: dict[str, Any]) -> int:
        return int(row["unpriced_attempts"] - row["retry_unpriced_attempts"] - row["crash_rerun_unpriced_attempts"])


class CostBudgetOutput(serializers.Serializer):
    """Spend against budgets of one graph's runs that carried a USD budget."""

    graph = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    runs = serializers.IntegerField()
    budget_usd = serializers.DecimalField(**MONEY, help_text="The largest per-run budget among these runs.")
    cost_usd = serializers.DecimalField(**MONEY)
    max_run_cost_usd = serializers.DecimalField(**MONEY)
    near_budget = serializers.IntegerField(help_text="Runs that spent 80% of their budget or more.")
    stopped_by_budget = serializers.IntegerField(help_text="Runs stopped before a step would have exceeded the budget.")


class CostExportInput(serializers.Serializer):
    """The file kind of a cost export: csv. (Not ``format``: DRF keeps that name for
    choosing a renderer.)"""

    kind = serializers.ChoiceField(choices=["csv"], required=False, default="csv")


class AuditExportInput(AuditQueryInput):
    """The audit list's filters and the file ``kind``: csv or jsonl (JSON Lines)."""

    kind = serializers.ChoiceField(choices=["csv", "jsonl"], required=False, default="csv")


class AuditVerifyInput(serializers.Serializer):
    scope = serializers.CharField(max_length=100, required=False, help_text="Verify one chain only (run:42, graph:3, user:1, auth).")


class AuditProblemOutput(serializers.Serializer):
    scope = serializers.CharField()
    entry_id = serializers.IntegerField(allow_null=True)
    seq = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()


class AuditVerifyOutput(serializers.Serializer):
    """The result of recomputing the audit hash chains (``manage.py verify_audit``)."""

    ok = serializers.BooleanField()
    entries = serializers.IntegerField()
    chains = serializers.IntegerField()
    problems = AuditProblemOutput(many=True)
    scope = serializers.CharField(allow_null=True)
    verified_at = serializers.DateTimeField()
    seconds = serializers.FloatField(help_text="How long the verification took.")


class AuditFacetsOutput(serializers.Serializer):
    action = serializers.ListField(child=serializers.CharField())
    actor_type = serializers.ListField(child=serializers.CharField())
    object_type = serializers.ListField(child=serializers.CharField())


class InFlightStepOutput(serializers.Serializer):
    id = serializers.IntegerField()
    run = serializers.IntegerField(source="run_id")
    graph = serializers.CharField(source="run.graph_version.graph.name")
    node_id = serializers.CharField()
    attempt = serializers.IntegerField()
    lease_owner = serializers.CharField()
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)


class WorkerOutput(serializers.Serializer):
    name = serializers.CharField()
    host = serializers.CharField()
    pid = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    heartbeat_at = serializers.DateTimeField()
    seconds_since_heartbeat = serializers.FloatField()
    alive = serializers.BooleanField()
    in_flight = InFlightStepOutput(many=True)
    in_flight_hidden = serializers.IntegerField(help_text="Steps it runs for runs the caller may not read (counted, not listed).")


class QueueDepthOutput(serializers.Serializer):
    ready = serializers.IntegerField(help_text="Pending steps that may run now.")
    scheduled = serializers.IntegerField(help_text="Pending steps waiting for a retry backoff.")
    waiting = serializers.IntegerField(help_text="Steps at an approval gate.")
    parked = serializers.IntegerField(help_text="Steps parked for a decision after a crash.")
    running = serializers.IntegerField()


class WorkersOutput(serializers.Serializer):
    workers = WorkerOutput(many=True)
    unattributed = InFlightStepOutput(many=True, help_text="Running steps no registered worker holds (their worker stopped heartbeating).")
    unattributed_hidden = serializers.IntegerField(help_text="Such steps of runs the caller may not read (counted, not listed).")
    queue = QueueDepthOutput()
    heartbeat_window_seconds = serializers.FloatField()
    checked_at = serializers.DateTimeField()


class RunAlertInput(serializers.Serializer):
    on_failed = serializers.BooleanField()
    on_parked = serializers.BooleanField()


class RunAlertOutput(serializers.Serializer):
    graph = serializers.IntegerField()
    subscribed = serializers.BooleanField()
    on_failed = serializers.BooleanField()
    on_parked = serializers.BooleanField()
    email = serializers.CharField(allow_blank=True, help_text="Where the emails go (the user's address; empty: none is sent).")

