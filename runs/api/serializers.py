"""Input and output serializers of the run API: runs, steps, events (costs and audit entries: runs.reports.serializers)."""
from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict, cast

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from graphs.bounds import BUDGET_USD_DECIMAL_PLACES, BUDGET_USD_MAX_DIGITS, MAX_BIGINT
from runs.api.serializer_fields import (
    EngineErrorField,
    JSONObjectField,
    UsageField,
    writable_context,
)
from runs.engine.api import flow_queue_place, steps_worker_alive
from runs.models import AttemptStatus, Run, RunEventKind, RunStatus, Step, StepAttempt, StepStatus
from runs.selectors import (
    WAITING_FOR,
    RunFilter,
    attempts_with_retry,
    run_fork_origin,
    run_parent,
    run_started_from,
    run_tested_node,
    run_waiting_for,
    runs_started_from,
)
from runs.subgraphs.costs import run_totals

MAX_INT = MAX_BIGINT


class DecimalDigits(TypedDict):
    """The digits of a DecimalField, spread into it as keyword arguments."""

    max_digits: int
    decimal_places: int


# A USD budget's digits, as a graph's settings.budget_usd takes them (graphs.bounds).
BUDGET_USD: DecimalDigits = {"max_digits": BUDGET_USD_MAX_DIGITS, "decimal_places": BUDGET_USD_DECIMAL_PLACES}
DATE_INPUT_FORMATS = ["iso-8601", "%Y-%m-%d"]


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


# --------------------------------------------------------------------------- inputs


class RunListFilterInput(serializers.Serializer):
    """Query filters of GET /runs/."""

    status = serializers.ChoiceField(choices=RunStatus.choices, required=False)
    waiting_for = serializers.ChoiceField(
        choices=WAITING_FOR, required=False, help_text="Runs waiting at an approval gate, parked for a decision after a crash, or waiting for a child run they called."
    )
    graph = serializers.IntegerField(min_value=1, max_value=MAX_INT, required=False)
    user = serializers.CharField(max_length=150, required=False, help_text="Username of who started the run.")
    version = serializers.IntegerField(min_value=1, max_value=MAX_INT, required=False, help_text="A version number of `graph` (needs graph).")
    created_after = serializers.DateTimeField(required=False, input_formats=DATE_INPUT_FORMATS, help_text="Inclusive.")
    created_before = serializers.DateTimeField(required=False, input_formats=DATE_INPUT_FORMATS, help_text="Exclusive.")
    search = serializers.CharField(
        max_length=200, required=False, allow_blank=True, trim_whitespace=True,
        help_text="A run id (123 or #123), or text the run's input JSON contains (case-insensitive).",
    )
    include_tests = serializers.BooleanField(required=False, default=False, help_text="Also list one-node test runs from the builder.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("version") is not None and attrs.get("graph") is None:
            raise serializers.ValidationError({"version": ["A version number needs a graph: give graph too."]})
        after, before = attrs.get("created_after"), attrs.get("created_before")
        if after and before and after >= before:
            raise serializers.ValidationError({"created_before": ["Must come after created_after."]})
        if "\x00" in attrs.get("search", ""):
            raise serializers.ValidationError({"search": ["No NUL characters."]})
        return attrs


def run_filter(q: dict[str, Any]) -> RunFilter:
    """The :class:`RunFilter` of a validated run list query (RunListFilterInput)."""
    return RunFilter(
        status=q.get("status"),
        waiting_for=q.get("waiting_for"),
        graph_id=q.get("graph"),
        version=q.get("version"),
        user=q.get("user"),
        search=q.get("search") or None,
        start=q.get("created_after"),
        end=q.get("created_before"),
        include_tests=q["include_tests"],
    )


class RunStartInput(serializers.Serializer):
    """POST /runs/: which graph (and version; default the latest) with which input."""

    graph = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    version = serializers.IntegerField(min_value=1, max_value=2**31 - 1, required=False, help_text="Version number (default: latest).")
    input = JSONObjectField(required=False, default=dict)
    budget_usd = serializers.DecimalField(**BUDGET_USD, min_value=0, required=False, allow_null=True)
    budget_tokens = serializers.IntegerField(min_value=0, max_value=MAX_INT, required=False, allow_null=True)
    # Handled by triggers (runs.start_options): the run's own completion callback.
    callback_url = serializers.CharField(max_length=2000, required=False, allow_null=True,
                                         help_text="Send this run's completion callback here (README \"Run-completion callbacks\"); its secret is in the answer, once.")
    callback_events = serializers.ListField(child=serializers.CharField(max_length=16), required=False, allow_null=True, max_length=4,
                                            help_text="Events for callback_url: succeeded, failed, waiting, parked (default: succeeded, failed).")


class RunCancelInput(serializers.Serializer):
    reason = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")


class RunSummaryInput(serializers.Serializer):
    hours = serializers.IntegerField(min_value=1, max_value=24 * 90, required=False, default=24, help_text="The window: runs created in the last N hours.")
    include_tests = serializers.BooleanField(required=False, default=False)


class RunSummaryOutput(serializers.Serializer):
    since = serializers.DateTimeField(help_text="Start of the window (now - hours).")
    total = serializers.IntegerField()
    by_status = serializers.DictField(child=serializers.IntegerField(), help_text="Every run status, with 0 for none.")


MAX_BULK = 500


class RunBulkCancelInput(serializers.Serializer):
    """POST /runs/cancel/: the runs to cancel (ids, 1 to MAX_BULK, each once) and a reason."""

    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_INT), min_length=1, max_length=MAX_BULK,
        help_text=f"Run ids, 1 to {MAX_BULK}, each once.",
    )
    reason = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")

    def validate_runs(self, value: list[int]) -> list[int]:
        if len(set(value)) != len(value):
            raise serializers.ValidationError("Each run at most once.")
        return value


class RefusalOutput(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class BulkCancelResultOutput(serializers.Serializer):
    """What became of one run of a bulk cancel: ``ok``, and else why not (``error``:
    ``not_found`` (no such run, or one you may not read), ``not_allowed`` (you may read it
    but not cancel it), ``invalid_state`` (it had already ended)); ``status`` is the
    run's status after the request (null when not found)."""

    run = serializers.IntegerField()
    ok = serializers.BooleanField()
    status = serializers.ChoiceField(choices=RunStatus.choices, allow_null=True)
    error = RefusalOutput(allow_null=True, help_text="Why not, when ok is false.")


class BulkCancelOutput(serializers.Serializer):
    results = BulkCancelResultOutput(many=True, help_text="One per requested run, in the order asked.")
    cancelled = serializers.IntegerField()
    refused = serializers.IntegerField()


class RunResumeInput(serializers.Serializer):
    """A new budget may be given when the run stopped for its budget."""

    budget_usd = serializers.DecimalField(**BUDGET_USD, min_value=0, required=False, allow_null=True)
    budget_tokens = serializers.IntegerField(min_value=0, max_value=MAX_INT, required=False, allow_null=True)


class RunForkInput(serializers.Serializer):
    """Fork at a committed step, with keys of the state replaced by ``state_patch``."""

    step = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    state_patch = JSONObjectField(required=False, default=dict)


class EventsQueryInput(serializers.Serializer):
    """Keyset page of a run's events: after an event id, at most ``page_size`` of them."""

    after = serializers.IntegerField(min_value=0, max_value=MAX_INT, required=False, default=0, help_text="The last event id seen (0: from the start).")
    page_size = serializers.IntegerField(min_value=1, max_value=1000, required=False, help_text="Events per page: 1 to 1000 (default 100).")
    limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, help_text="Older name of page_size.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "page_size" in attrs and "limit" in attrs and attrs["page_size"] != attrs["limit"]:
            raise serializers.ValidationError({"limit": ["Give page_size or limit (its older name), not two different sizes."]})
        attrs["page_size"] = attrs.get("page_size", attrs.get("limit", 100))
        return attrs


# --------------------------------------------------------------------------- outputs


class StepListOutput(serializers.ListSerializer):
    """Steps in a list: the liveness of their workers is worked out once for the whole
    list (one Worker query at most), not once per step."""

    def to_representation(self, data: Any) -> list[Any]:
        steps = list(data.all() if hasattr(data, "all") else data)
        writable_context(self)["worker_alive"] = steps_worker_alive(steps)
        return super().to_representation(steps)


class StepOutput(serializers.Serializer):
    """One step: a node's execution (``iteration`` counts loop passes).

    A running step holds a lease: ``lease_owner`` (worker id ``host:pid:start``) until
    ``lease_expires_at``; ``worker_alive`` says whether that worker is alive, worked out
    when read (false once the lease expired, once the owner process on the server's host
    is gone, or once every cluster on the owner's host stopped heartbeating), so a step
    whose worker vanished shows as stale before recovery takes it back. Not running:
    empty owner, null expiry, null ``worker_alive``.
    """

    class Meta:
        list_serializer_class = StepListOutput

    id = serializers.IntegerField()
    run = serializers.IntegerField(source="run_id")
    parent = serializers.IntegerField(source="parent_id", allow_null=True)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    node_id = serializers.CharField()
    kind = serializers.CharField(help_text="Its node's kind (GET /api/v1/node-kinds/), or for an agent's child step model_turn or tool_call.")
    iteration = serializers.IntegerField()
    status = serializers.ChoiceField(choices=StepStatus.choices)
    attempt = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    lease_owner = serializers.CharField(help_text="Worker id (host:pid:start) holding the running step; empty otherwise.")
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    worker_alive = serializers.SerializerMethodField(
        help_text="Whether the running step's worker is alive (worked out when read); null when not running."
    )
    output = serializers.JSONField(allow_null=True)
    updates = serializers.JSONField(allow_null=True)
    error = EngineErrorField(allow_null=True)
    usage = UsageField(allow_null=True)
    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(serializers.BooleanField(allow_null=True))
    def get_worker_alive(self, obj: Step) -> bool | None:
        known = self.context.get("worker_alive")
        if known is None or obj.pk not in known:
            known = steps_worker_alive([obj])
        return known[obj.pk]


RETRY_AT_HELP = (
    "A failed attempt that was retried: when the next attempt was due (the end of its backoff), as the step_retrying "
    "event recorded it; null for any other attempt (and for a retry recorded before events carried the attempt number)."
)


def retry_at(attempt: StepAttempt) -> str | None:
    """The ``retry_due`` annotation of runs.selectors.attempts_with_retry (the ISO text an
    event recorded) in the API's datetime format; None without one (or an unreadable one)."""
    due = getattr(attempt, "retry_due", None)
    if not due:
        return None
    try:
        when = datetime.fromisoformat(due)
    except ValueError:
        return None
    return serializers.DateTimeField().to_representation(when)


class AttemptOutput(serializers.Serializer):
    number = serializers.IntegerField()
    worker = serializers.CharField()
    build = serializers.CharField(
        help_text="The build of the code that ran the attempt: BALLAST_BUILD, or the package version and git revision "
        "(0.1.0+3f9c2a1b7e04); empty for an attempt recorded before builds were kept."
    )
    status = serializers.ChoiceField(choices=AttemptStatus.choices)
    error = EngineErrorField(allow_null=True)
    usage = UsageField(allow_null=True)
    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    retry_at = serializers.SerializerMethodField(help_text=RETRY_AT_HELP)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_retry_at(self, obj: StepAttempt) -> str | None:
        return retry_at(obj)


class ChildStepOutput(serializers.Serializer):
    """One child step of an agent step (a model turn or a tool call), in creation order:
    the transcript is these children, each the committed fact of one turn or call.
    ``input`` leaves out a model turn's ``messages`` (the conversation so far, which the
    earlier children already show); ``message_count`` says how many it carried."""

    id = serializers.IntegerField()
    node_id = serializers.CharField()
    child_key = serializers.CharField()
    kind = serializers.CharField(help_text="Its node's kind (GET /api/v1/node-kinds/), or for an agent's child step model_turn or tool_call.")
    status = serializers.ChoiceField(choices=StepStatus.choices)
    attempt = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    input = serializers.SerializerMethodField()
    message_count = serializers.SerializerMethodField()
    output = serializers.JSONField(allow_null=True)
    error = EngineErrorField(allow_null=True)
    usage = UsageField(allow_null=True)
    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    child_run = serializers.SerializerMethodField(help_text="The run a graph tool's call started (its child run), else null.")

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_child_run(self, obj: Step) -> int | None:
        return getattr(obj, "called_run", None)

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_input(self, obj: Step) -> Any:
        if isinstance(obj.input, dict) and "messages" in obj.input:
            return {k: v for k, v in obj.input.items() if k != "messages"}
        return obj.input

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_message_count(self, obj: Step) -> int | None:
        messages = obj.input.get("messages") if isinstance(obj.input, dict) else None
        return len(messages) if isinstance(messages, list) else None


class StepDetailOutput(StepOutput):
    """A step with its input (the state it was given), every attempt (failed and lost ones
    too, each with its own worker, usage and cost), its idempotency key (the same on every
    attempt), its scheduling times and, for an agent step, its child steps (``children``:
    the model turns and tool calls that committed, in order; [] for other kinds)."""

    input = serializers.JSONField(allow_null=True)
    attempts = AttemptOutput(many=True)
    idempotency_key = serializers.CharField()
    child_key = serializers.CharField()
    depth = serializers.IntegerField()
    available_at = serializers.DateTimeField(allow_null=True, help_text="A retry is not claimed before this time (backoff).")
    due_at = serializers.DateTimeField(allow_null=True)
    dispatched_at = serializers.DateTimeField(allow_null=True)
    state_seq = serializers.IntegerField(allow_null=True, help_text="The run version this step's commit produced (GET state/).")
    price_version = serializers.CharField()
    children = ChildStepOutput(many=True)


class StateChangeOutput(serializers.Serializer):
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    added = serializers.BooleanField(help_text="The key did not exist before this step.")


class StepStateOutput(serializers.Serializer):
    """A top-level step's view of the run state: what it was given and, once it
    succeeded, the state right after it and what it changed.

    ``input_state``: the state as committed when its latest attempt started. ``state``:
    every key after the step (null until it succeeded). ``changed``: key -> ``{before, after, added}`` for
    the keys the step wrote whose value changed (its difference from the state just
    before it committed). ``previous_step``: the step whose commit came just before
    (null for the first); ``seq``: the run version the commit produced (null for a step
    committed before state was kept per key, replayed instead)."""

    step = serializers.IntegerField(source="step_id")
    seq = serializers.IntegerField(allow_null=True)
    previous_step = serializers.IntegerField(allow_null=True)
    input_state = serializers.JSONField(allow_null=True, help_text="The state when the step's latest attempt started; null if it never started.")
    state = serializers.JSONField(allow_null=True, help_text="The state right after the step; null until it succeeded.")
    changed = serializers.DictField(child=StateChangeOutput())


class AttemptSpanOutput(serializers.Serializer):
    """When one attempt ran, how it ended and, after a failure that was retried, when the
    next attempt was due (the run page's timeline draws each attempt and each backoff)."""

    number = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AttemptStatus.choices)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    error_code = serializers.CharField(allow_null=True, help_text="The failed attempt's error code; null for one that did not fail.")
    retry_at = serializers.SerializerMethodField(help_text=RETRY_AT_HELP)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_retry_at(self, obj: StepAttempt) -> str | None:
        return retry_at(obj)


class RunStepOutput(StepOutput):
    """A step in a run's detail: with the span of each attempt (one query for the run's
    attempts, prefetched), so the timeline shows retries and their backoff."""

    attempts = AttemptSpanOutput(many=True)


def runs_interrupted(runs: list[Run]) -> set[int]:
    """Ids of the runs among ``runs`` with a running step whose worker is not alive
    (runs.engine.api.steps_worker_alive: lease expired, owner process gone, or its host's
    clusters stopped heartbeating), worked out when read: one query for the running steps
    of the live runs, at most one for the workers."""
    live = [r.pk for r in runs if r.status in (RunStatus.RUNNING, RunStatus.WAITING)]
    if not live:
        return set()
    steps = list(Step.objects.filter(run_id__in=live, status=StepStatus.RUNNING).only("id", "run_id", "status", "lease_owner", "lease_expires_at"))
    alive = steps_worker_alive(steps)
    return {s.run_id for s in steps if alive.get(s.pk) is False}


class RunListOutput(serializers.ListSerializer):
    """Runs in a list: which are interrupted is worked out once for the whole list."""

    def to_representation(self, data: Any) -> list[Any]:
        runs = list(data.all() if hasattr(data, "all") else data)
        writable_context(self)["interrupted"] = runs_interrupted(runs)
        writable_context(self)["started_from"] = runs_started_from(runs=runs)
        return super().to_representation(runs)


class QueuePlaceOutput(serializers.Serializer):
    """Where a queued run waits in its graph's line (flow control: runs.engine.store.flow)."""

    position = serializers.IntegerField(help_text="1 = the next run admitted; FIFO by start within the graph.")
    limit = serializers.ChoiceField(
        choices=["max_concurrent_runs", "concurrency_key", "schedule_overlap", "admitting"],
        help_text="The limit that holds it: the graph's max_concurrent_runs, its concurrency key's limit, its schedule's "
        "overlap policy queue (one run at a time), or admitting (it fits now and is admitted at the next claim).",
    )
    key = serializers.CharField(allow_null=True, help_text="The concurrency key value (or schedule line) that is full, if that is the limit.")
    max = serializers.IntegerField(allow_null=True, help_text="The size of that limit.")


class RunOutput(serializers.Serializer):
    """A run in a list."""

    class Meta:
        list_serializer_class = RunListOutput

    id = serializers.IntegerField()
    uuid = serializers.UUIDField()
    graph = serializers.IntegerField(source="graph_version.graph_id")
    graph_name = serializers.CharField(source="graph_version.graph.name")
    version = serializers.IntegerField(source="graph_version.number")
    status = serializers.ChoiceField(choices=RunStatus.choices)
    # A field named like Field.source: DRF's metaclass takes declared fields out of the class.
    source = serializers.CharField(help_text='What started the run when not a user directly: "webhook <name>"; "" otherwise.')  # type: ignore[assignment]
    waiting_for = serializers.SerializerMethodField(
        help_text="What a live run waits for: 'decision' when a step was parked after a crash (not safe to repeat: "
        "retry, skip or fail), else 'approval' when a step waits at an approval gate, else 'child_run' when a subgraph "
        "step waits for the run it called, else null. Parked is not a run "
        "status: a parked run's status is 'waiting' (or 'running' while other branches still run)."
    )
    queue = serializers.SerializerMethodField(
        help_text="While the run waits in line for its graph's flow control (status queued, no step yet): its position "
        "and the limit that holds it; null otherwise."
    )
    interrupted = serializers.SerializerMethodField(
        help_text="True while a running step's worker has stopped heartbeating (lease expired or owner gone), "
        "worked out when read; false again once recovery takes the step back or the worker continues."
    )
    event_seq = serializers.IntegerField(help_text="The seq of the run's last committed event: follow ws/runs/ from here.")
    error = EngineErrorField(allow_null=True)
    step_count = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=6)
    budget_usd = serializers.DecimalField(**BUDGET_USD, allow_null=True)
    budget_tokens = serializers.IntegerField(allow_null=True)
    is_test = serializers.BooleanField(help_text="A one-node test run from the builder.")
    forked_from = serializers.IntegerField(source="forked_from_id", allow_null=True)
    forked_from_step = serializers.IntegerField(source="forked_from_step_id", allow_null=True)
    created_by = serializers.SerializerMethodField()
    started_from = serializers.SerializerMethodField(
        help_text='"command line" for a run `manage.py run_graph` started (no user), else null: who started a run is '
        "created_by, else this."
    )
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_created_by(self, obj: Run) -> str | None:
        return _username(obj.created_by)

    def get_started_from(self, obj: Run) -> str | None:
        known = self.context.get("started_from")
        return known.get(obj.pk) if known is not None else run_started_from(run=obj)

    @extend_schema_field(serializers.ChoiceField(choices=WAITING_FOR, allow_null=True))
    def get_waiting_for(self, obj: Run) -> str | None:
        return run_waiting_for(run=obj)

    @extend_schema_field(QueuePlaceOutput(allow_null=True))
    def get_queue(self, obj: Run) -> dict[str, Any] | None:
        place = flow_queue_place(obj)
        return None if place is None else place.as_dict()

    @extend_schema_field(serializers.BooleanField())
    def get_interrupted(self, obj: Run) -> bool:
        known = self.context.get("interrupted")
        if known is None:
            known = runs_interrupted([obj])
        return obj.pk in known


class RunForkOriginOutput(serializers.Serializer):
    """Where a forked run came from (runs.selectors.run_fork_origin)."""

    run = serializers.IntegerField(help_text="The run it was forked from.")
    step = serializers.IntegerField(help_text="The step of that run it was forked at.")
    node_id = serializers.CharField(help_text="That step's node.")
    kept_nodes = serializers.ListField(child=serializers.CharField(), help_text="Nodes whose results were kept from the source, in commit order.")


class RunGraphOutput(serializers.Serializer):
    """The graph a run ran: its pinned version's number and spec. A node-test run's version
    is a hidden test snapshot (``is_test``, number 0): the tested node wired to an end node."""

    graph = serializers.IntegerField(source="graph_id")
    version = serializers.IntegerField(source="number")
    is_test = serializers.BooleanField()
    spec = serializers.JSONField()


class RunParentOutput(serializers.Serializer):
    """The run and step that called this run (a subgraph step: runs.subgraphs)."""

    run = serializers.IntegerField(help_text="The parent run.")
    step = serializers.IntegerField(help_text="The parent's subgraph step that waits for (or waited for) this run.")
    node_id = serializers.CharField(help_text="That step's node.")
    graph_name = serializers.CharField(help_text="The parent run's graph.")


class RunChildOutput(serializers.Serializer):
    """A run this run called (a subgraph step), directly or through a child of its own."""

    run = serializers.IntegerField(source="run_id")
    parent_run = serializers.IntegerField(source="parent_run_id", help_text="The run whose step called it (this run for a direct child).")
    step = serializers.IntegerField(source="step_id", help_text="The calling step.")
    node_id = serializers.CharField(help_text="The calling step's node.")
    depth = serializers.IntegerField(help_text="1 for a direct child, 2 for a child of a child ...")
    status = serializers.ChoiceField(choices=RunStatus.choices)
    graph = serializers.IntegerField(source="graph_id")
    graph_name = serializers.CharField()
    version = serializers.IntegerField(help_text="The pinned version it runs.")
    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=6, help_text="Its own spend (its children's are rows of their own).")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()


class RunTotalsOutput(serializers.Serializer):
    """The run's spend with every run it called rolled up (its own is ``cost_usd`` and the tokens)."""

    cost_usd = serializers.DecimalField(max_digits=14, decimal_places=6)
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()


class RunDetailOutput(RunOutput):
    """A run with its input, state, output and steps."""

    parent = serializers.SerializerMethodField(  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
        help_text="A child run (called by another run's subgraph step): {run, step, node_id, graph_name}; null otherwise."
    )
    children = serializers.SerializerMethodField(
        help_text="The runs this run called through subgraph steps, directly or through their own children, oldest first."
    )
    totals = serializers.SerializerMethodField(
        help_text="Spend with the children's rolled up: {cost_usd, input_tokens, output_tokens}; the run's own when it called none."
    )

    input = serializers.JSONField()
    state = serializers.JSONField()
    output = serializers.JSONField(allow_null=True)
    traceparent = serializers.CharField(
        help_text="The run's W3C trace context: the traceparent header of the request or webhook delivery that started it, "
        "else a new trace's; every step attempt's span is in this trace (README, Observability). Empty for runs started "
        "before traces were kept."
    )
    steps = serializers.SerializerMethodField()
    tested_node = serializers.SerializerMethodField(
        help_text="A node-test run (is_test): the node it tested (its first step; the rest is the test harness's end "
        "node). Null for other runs. GET runs/<id>/graph/ draws the one-node graph it ran."
    )
    fork_origin = serializers.SerializerMethodField(
        help_text="A forked run: {run, step, node_id, kept_nodes}: the source run, the step it was forked at and that "
        "step's node, and the nodes whose results the fork kept from its source (they have no step in this run). "
        "Null for a run that is not a fork."
    )

    def to_representation(self, instance: Run) -> dict[str, Any]:
        # The steps are read once: ``interrupted`` follows from their workers' liveness.
        steps = RunStepOutput(_run_steps(instance), many=True).data
        writable_context(self)["steps_of"] = {instance.pk: steps}
        stale = any(s["status"] == StepStatus.RUNNING and s["worker_alive"] is False for s in steps)
        writable_context(self)["interrupted"] = {instance.pk} if stale else set()
        return super().to_representation(instance)

    @extend_schema_field(RunStepOutput(many=True))
    def get_steps(self, obj: Run) -> list[dict[str, Any]]:
        known = self.context.get("steps_of", {})
        if obj.pk in known:
            return known[obj.pk]
        # many=True makes the list serializer, whose data is a list (the stubs cannot say so).
        return cast("list[dict[str, Any]]", RunStepOutput(_run_steps(obj), many=True).data)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_tested_node(self, obj: Run) -> str | None:
        return run_tested_node(run=obj, steps=self.context.get("steps_of", {}).get(obj.pk))

    @extend_schema_field(RunForkOriginOutput(allow_null=True))
    def get_fork_origin(self, obj: Run) -> dict[str, Any] | None:
        return run_fork_origin(run=obj)

    @extend_schema_field(RunParentOutput(allow_null=True))
    def get_parent(self, obj: Run) -> dict[str, Any] | None:
        return run_parent(run=obj)

    def _totals(self, obj: Run) -> dict[str, Any]:
        cache = writable_context(self).setdefault("totals_of", {})
        if obj.pk not in cache:
            cache[obj.pk] = run_totals(obj)
        return cast("dict[str, Any]", cache[obj.pk])

    @extend_schema_field(RunChildOutput(many=True))
    def get_children(self, obj: Run) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", RunChildOutput(self._totals(obj)["children"], many=True).data)

    @extend_schema_field(RunTotalsOutput())
    def get_totals(self, obj: Run) -> dict[str, Any]:
        return cast("dict[str, Any]", RunTotalsOutput(self._totals(obj)).data)


def _run_steps(run: Run) -> Any:
    """The run's steps in creation order with their attempts' spans, error codes and retry
    times (two queries, however many steps and attempts)."""
    spans = Prefetch("attempts", queryset=attempts_with_retry(StepAttempt.objects.only("id", "step_id", "number", "status", "started_at", "finished_at")))
    return Step.objects.filter(run=run).order_by("id").prefetch_related(spans)


class EventOutput(serializers.Serializer):
    """One run event; ``id`` is the cursor for ``?after=``; ``seq`` numbers the run's events
    1, 2, 3... with no gaps in commit order (the WebSocket cursor, runs.live.consumers)."""

    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    run = serializers.IntegerField(source="run_id")
    step = serializers.IntegerField(source="step_id", allow_null=True)
    kind = serializers.ChoiceField(choices=RunEventKind.choices)
    data = JSONObjectField()  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    created_at = serializers.DateTimeField()


class EventPageOutput(serializers.Serializer):
    """Events after the cursor; ask again with ``after=next_after`` (the ``next`` URL while ``has_more``)."""

    results = EventOutput(many=True)
    next = serializers.CharField(allow_null=True, help_text="URL of the next page while has_more, else null (poll next_after).")
    next_after = serializers.IntegerField()
    has_more = serializers.BooleanField()
    run_status = serializers.ChoiceField(choices=RunStatus.choices)
    run_waiting_for = serializers.ChoiceField(choices=WAITING_FOR, allow_null=True, help_text="The run's waiting_for, read with run_status.")


class RunStartOutput(RunDetailOutput):
    """POST /runs/'s answer: the run, and with ``callback_url`` its callback's id and secret (shown this once)."""

    callback = serializers.IntegerField(required=False, help_text="The run's own callback (with callback_url).")
    callback_secret = serializers.CharField(required=False, help_text="Its signing secret (whsec_...), shown this once.")
