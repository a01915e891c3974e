"""Output serializers of the run action API's answers (actions allowed, previews, two runs compared): their schema.

The views build these bodies as plain dicts (runs.api.previews, runs.api.compare); these
serializers describe them for the OpenAPI document (and the front end's types generated
from it). tests/core/test_schemathesis.py checks every answer against that document.
"""
from __future__ import annotations

from rest_framework import serializers

from runs.models import RunStatus, StepStatus

USD_HELP = "USD as a decimal string."


class ActionAllowedOutput(serializers.Serializer):
    allowed = serializers.BooleanField()
    reason = serializers.CharField(allow_blank=True, help_text="Why not ('' when allowed).")


class RunActionsOutput(serializers.Serializer):
    """GET /runs/<id>/actions/: each action allowed now, or why not."""

    may_act = serializers.BooleanField(help_text="Whether the caller is an operator of the run's graph.")
    status = serializers.ChoiceField(choices=RunStatus.choices)
    cancel = ActionAllowedOutput()
    resume = ActionAllowedOutput()
    retry = ActionAllowedOutput()
    fork = ActionAllowedOutput()


class StepEstimateOutput(serializers.Serializer):
    """The worst case of one execution of a node."""

    usd = serializers.CharField(allow_null=True, help_text="USD as a decimal string; null when unknown.")
    tokens = serializers.IntegerField()


class PreviewStepOutput(serializers.Serializer):
    """A step an action reopens, re-queues or (a fork) creates."""

    step = serializers.IntegerField(allow_null=True, help_text="Null for a step a fork creates.")
    node_id = serializers.CharField()
    iteration = serializers.IntegerField()
    parent = serializers.IntegerField(allow_null=True)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    status = serializers.ChoiceField(choices=StepStatus.choices, help_text="The status the step gets.")
    max_attempts = serializers.IntegerField()
    estimate = StepEstimateOutput(allow_null=True, help_text="Null for a child step (counted in its parent's).")


class KeptStepOutput(serializers.Serializer):
    """A committed step that stays a fact."""

    step = serializers.IntegerField()
    node_id = serializers.CharField()
    iteration = serializers.IntegerField()
    parent = serializers.IntegerField(allow_null=True)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    cost_usd = serializers.CharField(allow_null=True, help_text=USD_HELP)


class ThenNodeOutput(serializers.Serializer):
    node_id = serializers.CharField()
    estimate = StepEstimateOutput()


class TailEstimateOutput(serializers.Serializer):
    """The worst case of the rest of the run."""

    usd = serializers.CharField(help_text="The priced nodes' part, USD as a decimal string.")
    tokens = serializers.IntegerField()
    unpriced = serializers.ListField(child=serializers.CharField(), help_text="Node ids with no known price.")


class StepAtOutput(serializers.Serializer):
    step = serializers.IntegerField()
    node_id = serializers.CharField()
    iteration = serializers.IntegerField()


class ActionPreviewOutput(serializers.Serializer):
    """POST /runs/<id>/{resume,retry,fork}/preview/: what the action would do now (nothing changes)."""

    action = serializers.ChoiceField(choices=["resume", "retry", "fork"])
    run = serializers.IntegerField()
    kept = KeptStepOutput(many=True)
    kept_cost_usd = serializers.CharField(help_text=USD_HELP)
    run_again = PreviewStepOutput(many=True)
    then = ThenNodeOutput(many=True, help_text="Nodes after them on the costliest path.")
    estimate = TailEstimateOutput()
    mode = serializers.ChoiceField(choices=["failed", "parked"], required=False, help_text="Resume and retry: what kind of stop is resumed.")
    anchor = StepAtOutput(required=False, help_text="Fork: the step forked at.")
    state = serializers.DictField(required=False, help_text="Fork: the new run's state.")
    state_keys = serializers.ListField(child=serializers.CharField(), required=False, help_text="Fork: the keys a patch may write.")
    patched = serializers.ListField(child=serializers.CharField(), required=False, help_text="Fork: the keys the patch writes.")
    dropped = StepAtOutput(many=True, required=False, help_text="Fork: the source's committed top-level steps not kept.")


class CompareRunOutput(serializers.Serializer):
    """One run of a comparison."""

    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    version = serializers.IntegerField()
    is_test = serializers.BooleanField()
    cost_usd = serializers.CharField(help_text=USD_HELP)
    seconds = serializers.FloatField(allow_null=True)
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField(allow_null=True)
    forked_from = serializers.IntegerField(allow_null=True)
    error = serializers.JSONField(allow_null=True)


class CompareRunsOutput(serializers.Serializer):
    a = CompareRunOutput()
    b = CompareRunOutput()


class CompareSideOutput(serializers.Serializer):
    """A node's top-level steps in one run: the last iteration's status and output, cost and time over all of them."""

    steps = serializers.IntegerField()
    attempts = serializers.IntegerField()
    seconds = serializers.FloatField(allow_null=True)
    step = serializers.IntegerField()
    status = serializers.ChoiceField(choices=StepStatus.choices)
    output = serializers.JSONField(allow_null=True)
    updates = serializers.JSONField(allow_null=True)
    error = serializers.JSONField(allow_null=True)
    cost_usd = serializers.CharField(allow_null=True, help_text="USD as a decimal string; null when unknown.")


class CompareNodeOutput(serializers.Serializer):
    node_id = serializers.CharField()
    kind = serializers.CharField(allow_blank=True, help_text="Its node kind; '' for a node neither version declares.")
    a = CompareSideOutput(allow_null=True, help_text="Null when run a has no step of it.")
    b = CompareSideOutput(allow_null=True, help_text="Null when run b has no step of it.")
    same_output = serializers.BooleanField()


class StateKeyChangeOutput(serializers.Serializer):
    key = serializers.CharField()
    change = serializers.ChoiceField(choices=["same", "changed", "only_a", "only_b"])
    a = serializers.JSONField(allow_null=True)
    b = serializers.JSONField(allow_null=True)


class RunComparisonOutput(serializers.Serializer):
    """GET /runs/compare/?a=&b=: two runs of one graph side by side."""

    graph = serializers.IntegerField()
    graph_name = serializers.CharField()
    runs = CompareRunsOutput()
    nodes = CompareNodeOutput(many=True)
    state = StateKeyChangeOutput(many=True)
    state_differs = serializers.ListField(child=serializers.CharField())
