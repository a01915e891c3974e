"""Outputs and inputs of the report pages' API: cost totals and budgets, audit verification and export, workers, run alerts."""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from runs.api.serializers import AuditQueryInput, DecimalDigits

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

