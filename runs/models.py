"""Runs, steps, run events, app-stored provider credentials and MCP servers: the rows the durable engine commits and reads
(its audit entries are audit.models')."""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class StepStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"  # at an approval gate: holds no worker and no lease
    PARKED = "parked"  # not safe to repeat after a crash: a person decides
    SUSPENDED = "suspended"  # waiting for its child steps: holds no worker and no lease
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AttemptStatus(models.TextChoices):
    """Status of one StepAttempt. ``lost``: its worker died before the commit (closed by
    recovery); ``suspended``: the step handed off to child steps and will replay."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"
    SUSPENDED = "suspended"


class RunEventKind(models.TextChoices):
    """Every kind of RunEvent, with the payload (``RunEvent.data``) each one carries.

    The engine writes every event; the raw SQL of its fast paths takes these values as
    parameters. Payloads (all keys JSON):

    - ``run_created``: ``{graph_version, input}``; a fork: ``{forked_from, forked_from_step, state_patch}``;
      a one-node test run: ``{graph_version, test: true, node_id}``.
    - ``run_started``: ``{}`` (the first claim moved the run from queued to running).
    - ``run_waiting``: ``{}`` or ``{node_id}``: no step can run until a person decides.
    - ``run_resumed``: ``{by, reason}`` (a decision), ``{by, requeued: [step ids]}`` (parked
      run resumed) or ``{by, reopened: [step ids]}`` (failed run resumed).
    - ``run_succeeded``, ``run_failed``, ``run_cancelled``: ``{cancelled_steps: [step ids], error?}``.
    - ``step_created``: ``{node_id, iteration}``; a child step: ``{node_id, parent}``.
    - ``step_started``: ``{node_id, iteration, attempt}`` (a claim or a lease kept by a commit).
    - ``step_succeeded``: ``{node_id, iteration, route}``; a child step: ``{node_id, parent, by?}``.
    - ``step_failed``: ``{node_id, error}`` (failed for good), or, error code ``cancelled``
      (step status ``cancelled``), a step that was running when its run was cancelled.
    - ``step_retrying``: ``{node_id, error, available_at}`` (ISO time the retry is due).
    - ``step_waiting``: ``{node_id, reason}`` (at an approval gate).
    - ``step_suspended``: ``{node_id, children: [child keys]}``.
    - ``step_resumed``: ``{node_id, reason}`` (its children finished).
    - ``step_requeued``: ``{by}`` (a parked step sent back to pending by a person), or
      ``{by, reason: "worker stopping"}`` (a step leased to a stopping worker, handed back
      before it ran).
    - ``step_deadline``: ``{node_id, action, ...}``: a waiting step's deadline passed and
      fired once (runs.engine.store.deadlines): ``action`` ``timeout`` (followed by its
      ``run_resumed``), ``reassign`` (``to``) or ``notify`` (``emailed``).
    - ``approval_changed``: ``{approval, version, change}``: a request of the run was
      claimed, handed back, reassigned or voted on (approvals.services), so its watchers
      fetch it again.
    - ``step_recovered``, ``step_parked``: ``{node_id, attempt, owner, lease_expired}`` (its
      worker died; re-queued, or parked because it is not safe to repeat).
    """

    RUN_CREATED = "run_created"
    RUN_STARTED = "run_started"
    RUN_WAITING = "run_waiting"
    RUN_RESUMED = "run_resumed"
    RUN_SUCCEEDED = "run_succeeded"
    RUN_FAILED = "run_failed"
    RUN_CANCELLED = "run_cancelled"
    STEP_CREATED = "step_created"
    STEP_STARTED = "step_started"
    STEP_SUCCEEDED = "step_succeeded"
    STEP_FAILED = "step_failed"
    STEP_RETRYING = "step_retrying"
    STEP_WAITING = "step_waiting"
    STEP_SUSPENDED = "step_suspended"
    STEP_RESUMED = "step_resumed"
    STEP_REQUEUED = "step_requeued"
    STEP_RECOVERED = "step_recovered"
    STEP_PARKED = "step_parked"
    STEP_DEADLINE = "step_deadline"
    APPROVAL_CHANGED = "approval_changed"


# The event that records a run reaching each terminal status.
FINISHED_EVENT_KINDS: dict[str, RunEventKind] = {
    RunStatus.SUCCEEDED: RunEventKind.RUN_SUCCEEDED,
    RunStatus.FAILED: RunEventKind.RUN_FAILED,
    RunStatus.CANCELLED: RunEventKind.RUN_CANCELLED,
}


ACTIVE_STEP_STATUSES = (StepStatus.PENDING, StepStatus.RUNNING, StepStatus.WAITING, StepStatus.PARKED, StepStatus.SUSPENDED)
FINISHED_STEP_STATUSES = (StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.CANCELLED)

# ``Run.source`` of a run of a graph's unpublished draft (the builder's "Run draft"): a
# test run (``is_test``) that, unlike a node test, starts at the start node.
DRAFT_SOURCE = "draft"


class Run(models.Model):
    """One execution of a graph version with an input.

    ``state`` is the committed run state (JSON object). It is not a column: each key is
    kept in :class:`RunStateKey` rows, one per version, so a commit writes only the keys
    its step changed (runs.engine.store.state). Reading ``run.state`` loads the latest version
    of every key once per instance (one query); the engine sets it from its own snapshot.
    ``scheduler`` holds the engine's bookkeeping committed with it (join arrivals, loop
    iterations, ended flag); the reducer contributions of order-sensitive keys live with
    those keys' rows (``RunStateKey.contrib``), not here.
    Totals (tokens, ``cost_usd``) are sums over committed step attempts. ``error`` is
    ``{"code", "message", ...}`` when the run failed. ``state_sizes`` is the per-key size
    map of ``state`` (runs.engine.limits). ``is_test`` marks a one-node test
    run started from the builder (pinned to a test snapshot version): run lists, cost
    reports and dashboards leave test runs out unless asked to include them.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    graph_version = models.ForeignKey("graphs.GraphVersion", on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(null=True, blank=True)
    scheduler = models.JSONField(default=dict, blank=True)
    # Key -> UTF-8 bytes of that state key's compact JSON, kept with every commit so the
    # state size limit (BALLAST_MAX_STATE_BYTES) counts only the keys a step writes; None
    # for a run committed before sizes were kept (computed once at its next commit).
    state_sizes = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    max_parallelism = models.PositiveIntegerField(default=4)
    max_steps = models.PositiveIntegerField(default=1000)
    step_count = models.PositiveIntegerField(default=0)
    # Bumped by every engine write to the row: the fast commit path checks it to know
    # the worker's cached view of the run is still current (optimistic concurrency).
    version = models.PositiveBigIntegerField(default=0)
    budget_usd = models.DecimalField(max_digits=24, decimal_places=12, null=True, blank=True)
    budget_tokens = models.BigIntegerField(null=True, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=24, decimal_places=12, default=Decimal(0))
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    is_test = models.BooleanField(default=False)
    # Who or what started the run when not a user at the API or browser: "webhook <name>"
    # for a webhook trigger (triggers app); "" for runs started directly.
    source = models.CharField(max_length=200, blank=True, default="")
    # The W3C trace context (``00-<trace id>-<span id>-<flags>``) of the request or trigger
    # that started the run, or of a trace begun for it: every step attempt's span joins
    # this trace, on whichever host runs it (runs.engine.tracing). "" for runs started
    # before traces were kept.
    traceparent = models.CharField(max_length=64, blank=True, default="")
    # Flow control (runs.engine.store.flow): the gate of its graph when the run passed one
    # (None: its graph had no limit when it started); the value of the graph's concurrency
    # key in its input and its schedule's line (overlap "queue": "schedule:<id>"), or None;
    # ``flow_held`` while it waits in line (queued, no step yet).
    flow_gate = models.ForeignKey("runs.FlowGate", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    flow_key = models.CharField(max_length=255, null=True, blank=True)
    flow_line = models.CharField(max_length=64, null=True, blank=True)
    flow_held = models.BooleanField(default=False)
    # A child run started by a ``subgraph`` step of another run (runs.subgraphs): that step,
    # unique, so a parent step that runs again finds its child instead of starting a second.
    # ``parent_due_at``: set (database clock) in the child's terminal transaction; the
    # subgraphs due source then finishes the parent step and clears it.
    parent_step = models.OneToOneField(
        "runs.Step", null=True, blank=True, on_delete=models.SET_NULL, related_name="child_run"
    )
    parent_due_at = models.DateTimeField(null=True, blank=True)
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    forked_from_step = models.ForeignKey("runs.Step", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The run list (runs.selectors.run_list) pages newest first by id (keyset):
            # filtered by a status, a graph version or a starter, the page is a range of
            # one of these indexes, however rare the value, not a backward scan of every
            # run discarding the others.
            models.Index(fields=["status", "-id"], name="run_status_id"),
            models.Index(fields=["graph_version", "-id"], name="run_version_id"),
            models.Index(fields=["created_by", "-id"], name="run_starter_id"),
            # Flow control (runs.engine.store.flow) counts a gate's active runs and finds
            # its line in id order: only runs that passed a gate are in it.
            models.Index(
                fields=["flow_gate", "status", "flow_held", "id"], name="run_flow_gate", condition=models.Q(flow_gate__isnull=False)
            ),
            # The subgraphs due source (runs.subgraphs.calls) asks for the earliest finished
            # child whose parent step is owed its result on every claim: only those rows.
            models.Index(fields=["parent_due_at"], name="run_parent_due", condition=models.Q(parent_due_at__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES

    @property
    def audit_scope(self) -> str:
        """The run's audit chain: everything done to the run, its steps and its approvals
        (their ``run_id`` names it too; audit.chain.scope_of)."""
        return f"run:{self.pk}"

    def read_event_seq(self) -> int:
        """The seq of the run's last committed event (0 before the first), READ NOW from
        its :class:`RunEventCounter` row: one query. Lists and API reads get it as the
        ``event_seq`` annotation instead (runs.selectors.with_event_seq)."""
        last = RunEventCounter.objects.filter(run_id=self.pk).values_list("last", flat=True).first()
        return int(last or 0)

    @property
    def state(self) -> dict[str, Any]:
        """The committed state: what the engine set on this instance, else the latest
        version of every key from its RunStateKey rows (read once, then kept)."""
        held = self.__dict__.get("_held_state")
        if held is None:
            held = self.__dict__["_held_state"] = RunStateKey.state_at(self.pk)[0] if self.pk else {}
        return held

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        self.__dict__["_held_state"] = value

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        """Reload the row; the state is read again on next access."""
        self.__dict__.pop("_held_state", None)
        super().refresh_from_db(*args, **kwargs)


class Step(models.Model):
    """One execution of one node inside a run (``node_id`` + ``iteration`` for loops).

    Lease: ``lease_owner`` (worker id ``host:pid:start``) holds the step until
    ``lease_expires_at``; ``attempt`` is the fencing token (a commit only lands if the
    attempt and owner still match). ``idempotency_key`` is the same on every attempt.
    ``available_at`` delays a retry (backoff); ``dispatched_at`` records the last queue
    hand-off so recovery can find pending steps no queue entry holds.
    ``due_at`` is when the step became claimable (released by the scheduler, or the end
    of its backoff): workers claim the pending step with the oldest ``due_at`` first
    (claims.step_claim_due), whatever order the queue delivers its doorbells in; a
    re-dispatch or a take-back never moves it. NULL: not claimable by a doorbell (held by
    the run's parallelism limit, waiting for its backoff, or never pending).
    ``depth`` is the step's causal distance from the start (orders reducer writes).
    A child step (an agent's model turn or tool call) has a ``parent`` and a
    ``child_key``; its ``node_id`` is ``<parent node>#<parent iteration>/<key>``.
    ``price_version`` names the price data its cost came from. ``state_seq``: for a
    committed top-level step, the run version its commit produced, which is also the
    ``seq`` of the RunStateKey rows it wrote: the state right after the step is the latest
    version of each key with ``seq <= state_seq`` (None: committed before state was kept
    per key; runs.engine.store.state replays its writes instead). ``effect_attempt``: for a step
    not safe to repeat, the attempt that was about to begin its side effect, committed
    before the node ran (runs.engine.loop): recovery parks a step whose current attempt
    got that far and re-queues one whose attempt never did (leased, never started).
    """

    # No index of its own: step_unique_iteration and step_run_status lead with run_id (a
    # duplicate index is one more entry per step insert and per step update, which are
    # never HOT: status is indexed).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    child_key = models.CharField(max_length=200, blank=True, default="")
    node_id = models.CharField(max_length=300)
    kind = models.CharField(max_length=32)
    iteration = models.PositiveIntegerField(default=0)
    depth = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=1)
    idempotency_key = models.CharField(max_length=200)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    available_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    updates = models.JSONField(null=True, blank=True)  # what it wrote to state (replayed by fork)
    error = models.JSONField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=24, decimal_places=12, null=True, blank=True)
    price_version = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    state_seq = models.PositiveBigIntegerField(null=True, blank=True)
    effect_attempt = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            # The step identity: a loop iteration of a node exists once per run, so a
            # successor created twice (duplicate delivery, racing branches) cannot be.
            models.UniqueConstraint(fields=["run", "node_id", "iteration"], name="step_unique_iteration"),
        ]
        indexes = [
            # Recovery scans: expired leases and pending steps without a live queue entry.
            models.Index(fields=["status", "lease_expires_at"], name="step_status_lease"),
            models.Index(fields=["run", "status"], name="step_run_status"),
            # The doorbell claim: the oldest due pending step (claims.step_claim_due).
            models.Index(fields=["status", "due_at"], name="step_status_due"),
        ]

    def __str__(self) -> str:
        return f"{self.node_id}#{self.iteration} ({self.status})"


class RunStateKey(models.Model):
    """One version of one key of a run's state: what the commit with run version ``seq``
    left in ``key`` (``seq`` 0: the state the run was created with).

    Rows are only ever inserted: a commit adds a row for each key its step wrote, so its
    cost does not grow with the keys it left alone, and the state after any commit stays
    readable (:meth:`state_at`) without replaying the steps before it. ``size`` is the
    UTF-8 bytes of the value's compact JSON (the state size limit, runs.engine.limits).
    ``contrib``: for a key with an order-sensitive reducer (append, extend, merge), every
    contribution so far as ``[[depth, node_id, iteration, value], ...]`` (how the scheduler
    recomputes the value whatever order parallel branches commit in); None otherwise.
    """

    # No index of its own: runstatekey_unique_version and runstatekey_run_seq lead with run_id.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="state_keys", db_index=False)
    key = models.TextField()
    seq = models.PositiveBigIntegerField()
    value = models.JSONField(null=True, blank=True)
    size = models.PositiveIntegerField(default=0)
    contrib = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key", "seq"], name="runstatekey_unique_version")]
        indexes = [models.Index(fields=["run", "seq"], name="runstatekey_run_seq")]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.key}@{self.seq}"

    @classmethod
    def latest(cls, run_id: int, seq: int | None = None) -> models.QuerySet[RunStateKey]:
        """The latest version of each key of run ``run_id`` (at or before ``seq``; None:
        now). One query; the correlated MAX uses the (run, key, seq) unique index, and no
        older version's value is read."""
        newer = cls.objects.filter(run_id=models.OuterRef("run_id"), key=models.OuterRef("key"))
        rows = cls.objects.filter(run_id=run_id)
        if seq is not None:
            newer = newer.filter(seq__lte=seq)
            rows = rows.filter(seq__lte=seq)
        top = newer.order_by("-seq").values("seq")[:1]
        return rows.filter(seq=models.Subquery(top))

    @classmethod
    def hold_states(cls, runs: Iterable[Run]) -> None:
        """Read the current state of each of ``runs`` in ONE query and keep it on the
        instance (what :attr:`Run.state` reads first), so a list does not read run by run."""
        by_id = {r.pk: r for r in runs if r.pk and "_held_state" not in r.__dict__}
        if not by_id:
            return
        states: dict[int, dict[str, Any]] = {pk: {} for pk in by_id}
        top = cls.objects.filter(run_id=models.OuterRef("run_id"), key=models.OuterRef("key")).order_by("-seq").values("seq")[:1]
        for run_id, key, value in cls.objects.filter(run_id__in=list(by_id), seq=models.Subquery(top)).values_list("run_id", "key", "value"):
            states[run_id][key] = value
        for pk, run in by_id.items():
            run.state = states[pk]

    @classmethod
    def state_at(cls, run_id: int, seq: int | None = None) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        """(state, contributions by key) of run ``run_id`` as of ``seq`` (None: now)."""
        state: dict[str, Any] = {}
        contrib: dict[str, list[Any]] = {}
        for key, value, entries in cls.latest(run_id, seq).order_by("key").values_list("key", "value", "contrib"):
            state[key] = value
            if entries is not None:
                contrib[key] = entries
        return state, contrib


class StepAttempt(models.Model):
    """One attempt of a step, kept even when it failed or was interrupted.

    Retries and crash re-runs are visible here apart from the successful path: an
    attempt that never reached its commit is closed as ``lost`` by recovery.
    """

    # No index of its own: stepattempt_unique_number leads with step_id.
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    number = models.PositiveIntegerField()
    worker = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=16, choices=AttemptStatus.choices, default=AttemptStatus.RUNNING)
    error = models.JSONField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=24, decimal_places=12, null=True, blank=True)
    price_version = models.CharField(max_length=64, blank=True, default="")
    # The build of the code that ran the attempt (core.build: BALLAST_BUILD, or the package
    # version and git revision), written by whoever opens the attempt, which is the worker
    # about to run it. "" for attempts opened before builds were kept.
    build = models.CharField(max_length=100, blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["step", "number"]
        constraints = [models.UniqueConstraint(fields=["step", "number"], name="stepattempt_unique_number")]


class RunEvent(models.Model):
    """Append-only record of what happened in a run.

    ``seq`` numbers a run's events 1, 2, 3... with no gaps, in commit order (assigned by
    runs.engine.store.events from the run's :class:`RunEventCounter`): the live-update cursor.
    Write events only through runs.engine.store.events.
    """

    # No index of its own: runevent_run_cursor and runevent_run_seq lead with run_id (three
    # events per node commit: one index entry each saved).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveBigIntegerField()
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    kind = models.CharField(max_length=48, choices=RunEventKind.choices)  # payloads: RunEventKind
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "id"], name="runevent_run_cursor")]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="runevent_run_seq")]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} (seq {self.seq})"


class Worker(models.Model):
    """A live qcluster (or in-process runner) with a heartbeat; recovery uses it to tell a
    dead worker's leases from a live one's without waiting for lease expiry."""

    name = models.CharField(max_length=200, unique=True)
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField(db_index=True)


class HostHeartbeat(models.Model):
    """One worker host's heartbeat, written about twice a second by a thread of each
    qcluster's main process there (which runs no node code), stamped with the database's
    clock. A host whose ``beat_at`` is older than BALLAST_HOST_SILENT_SECONDS is dead to
    recovery: its leases are taken back without waiting for them to expire (issue 23).

    ``up_since``: the database time at which this host's current unbroken series of beats
    began (a gap longer than the silent window starts a new one): a host judges others
    only after it has itself been beating for the window, so after an outage that stopped
    every host's beats, nobody is taken for dead before it had the time to beat again."""

    host = models.CharField(max_length=200, primary_key=True)
    beat_at = models.DateTimeField()
    up_since = models.DateTimeField()


class ProviderKind(models.TextChoices):
    OPENAI = "openai", "OpenAI"
    ANTHROPIC = "anthropic", "Anthropic"
    OPENAI_COMPATIBLE = "openai_compatible", "OpenAI-compatible server"


class ProviderCredential(models.Model):
    """An LLM provider added in the app: a name nodes refer to (``"provider": name``), its
    kind and base URL, and its API key encrypted at rest.

    ``api_key_encrypted`` is a Fernet token (``runs.providers.credentials``) made with
    ``BALLAST_CREDENTIALS_KEY``; "" means no key (a local server that takes none). The
    key is never readable through a form, the API, a log line or an audit entry: only
    ``has_key`` is shown. ``model_names`` (list of names, may be empty: any model) are offered
    by node forms and checked by validation. A name configured in settings or the
    environment cannot be taken here, so a name means one provider in every process.
    """

    name = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=32, choices=ProviderKind.choices)
    label = models.CharField(max_length=200, blank=True, default="")
    base_url = models.CharField(max_length=500, blank=True, default="")
    api_key_encrypted = models.TextField(blank=True, default="", editable=False)
    default_model = models.CharField(max_length=200)
    model_names = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]
        verbose_name = "LLM provider"

    def __str__(self) -> str:
        return self.name

    @property
    def has_key(self) -> bool:
        return bool(self.api_key_encrypted)

    @property
    def audit_scope(self) -> str:
        """One audit chain per provider name (it outlives a deleted and re-created row)."""
        return f"provider:{self.name}"


class McpTransport(models.TextChoices):
    STDIO = "stdio", "stdio (a local command)"
    HTTP = "http", "Streamable HTTP"


class McpServer(models.Model):
    """An MCP server added in the app, whose tools nodes and agents call as
    ``mcp__<name>__<tool>`` (runs.tools.mcp_servers).

    ``transport`` stdio runs ``command`` with ``args`` (the command must be one of
    ``settings.BALLAST_MCP_STDIO_COMMANDS``, checked at save and again at each call); http
    posts to ``url`` through the outbound guard. ``headers_encrypted`` is a Fernet token
    (the provider keys' cipher) of the HTTP headers sent with every request (an
    Authorization header, say): write-only, never shown. ``trust_annotations``: whether
    the server's own ``readOnlyHint``/``idempotentHint`` make a tool safe to repeat (off:
    an annotation is the server's claim, not a fact). ``tools`` is the tool list last read
    from the server (``[{"name", "description", "input_schema", "annotations"}]``) at
    ``tools_listed_at``: lookups read it, never the server; a save or a connection test
    reads it again. ``last_error`` is that read's failure ("" when it worked).
    """

    name = models.CharField(max_length=40, unique=True)
    label = models.CharField(max_length=200, blank=True, default="")
    transport = models.CharField(max_length=16, choices=McpTransport.choices)
    command = models.CharField(max_length=500, blank=True, default="")
    args = models.JSONField(default=list, blank=True)
    url = models.CharField(max_length=500, blank=True, default="")
    headers_encrypted = models.TextField(blank=True, default="", editable=False)
    trust_annotations = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    tools = models.JSONField(default=list, blank=True, editable=False)
    tools_listed_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, default="", editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    @property
    def has_headers(self) -> bool:
        return bool(self.headers_encrypted)

    @property
    def audit_scope(self) -> str:
        """One audit chain per server name (it outlives a deleted and re-created row)."""
        return f"mcp_server:{self.name}"


class RunEventCounter(models.Model):
    """A run's event counter: ``last`` is the seq of its last event (runs.engine.store.events).

    A row of its own, not a column of the run: bumping it takes this row's lock, not the
    run row's, so a claim numbering its "step started" event never waits for a committer
    that holds the run row (runs.engine.store.claims). Bumped in the transaction that writes the
    events, so the row lock orders writers and a rollback takes the bump back."""

    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="+")
    last = models.PositiveBigIntegerField(default=0)


class CostRollup(models.Model):
    """The spend of pruned runs, summed per UTC day and group, so cost reports stay
    correct for days whose runs retention deleted (runs.retention writes these rows in
    the transaction that deletes the runs they sum; runs.reports.selectors adds them to
    the live attempts).

    The group: ``day`` (the UTC day the attempts started), ``graph`` with its ``graph_name``
    and the run's ``version_number``, ``node_id``, ``provider`` and ``model`` (from the
    attempts' usage), the run's ``status``, ``is_test`` and ``created_by`` (the filters a
    report takes). The sums are the cost report's columns (runs.reports.selectors
    ``_cost_columns``): tokens, attempts, priced spend and unpriced attempts, and the part
    of them that went to retries and crash re-runs. Rows are additive: one group may have
    several rows (one per prune batch), and reports sum them.
    """

    day = models.DateField()
    graph = models.ForeignKey("graphs.Graph", on_delete=models.CASCADE, related_name="+")
    graph_name = models.CharField(max_length=200)
    version_number = models.PositiveIntegerField()
    node_id = models.CharField(max_length=200)
    # None where the attempts' usage named none (as the live report's group keys).
    provider = models.CharField(max_length=200, null=True, blank=True)
    model = models.CharField(max_length=200, null=True, blank=True)
    status = models.CharField(max_length=16, choices=RunStatus.choices)
    is_test = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cached_input_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    attempts = models.BigIntegerField(default=0)
    unpriced_attempts = models.BigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=24, decimal_places=12, default=Decimal(0))
    retry_cost_usd = models.DecimalField(max_digits=24, decimal_places=12, default=Decimal(0))
    retry_attempts = models.BigIntegerField(default=0)
    retry_unpriced_attempts = models.BigIntegerField(default=0)
    crash_rerun_cost_usd = models.DecimalField(max_digits=24, decimal_places=12, default=Decimal(0))
    crash_rerun_attempts = models.BigIntegerField(default=0)
    crash_rerun_unpriced_attempts = models.BigIntegerField(default=0)
    # What ``manage.py cost_report`` shows beside those: failed or lost attempts, and reasoning tokens.
    failed_attempts = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)

    class Meta:
        # Reports filter by a day range, often with a graph.
        indexes = [models.Index(fields=["day", "graph"], name="costrollup_day_graph")]

    def __str__(self) -> str:
        return f"{self.day} {self.graph_name} {self.node_id} {self.model}"


class RetentionJob(models.Model):
    """The retention job's due row (runs.retention_job): one row, id 1, made when a worker
    cluster starts (``manage.py qcluster``). The engine fires it when ``next_due_at`` (database
    clock) has passed, as it fires a schedule's tick (runs.engine.sources).

    While a firing prunes, ``running_by`` names its worker and ``next_due_at`` lies a lease
    ahead (a worker that dies mid-prune leaves the row due again after it); when it ends,
    ``next_due_at`` moves on (seconds ahead while due runs are left, else the interval),
    ``finished_at`` and ``last_report`` (runs.retention.PruneReport.as_dict(), or
    ``{"error": ...}``) say what it did."""

    SINGLETON = 1

    next_due_at = models.DateTimeField(null=True, blank=True)
    running_by = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_worker = models.CharField(max_length=200, blank=True, default="")
    last_report = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="retentionjob_singleton")]

    def __str__(self) -> str:
        return f"retention job, next due {self.next_due_at}"


class FlowGate(models.Model):
    """The flow gate of one graph (runs.engine.store.flow): the row a start of a
    flow-controlled run and an admission lock, and a due row: ``due_at`` (database clock)
    is set in the transaction that ends one of its runs (or changes its limits) and
    cleared by the admission that follows; the engine's claim by due time fires it."""

    graph = models.OneToOneField("graphs.Graph", on_delete=models.CASCADE, related_name="flow_gate")
    due_at = models.DateTimeField(null=True, blank=True, db_index=True)

    def __str__(self) -> str:
        return f"flow gate of graph {self.graph_id}"
