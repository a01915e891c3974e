"""Webhook triggers of a graph and the log of their deliveries; schedules and the log of their ticks."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class WebhookTrigger(models.Model):
    """A URL that starts a run of ``graph`` per delivery.

    ``version`` is the pinned version it runs, or null for the latest published one.
    ``token_hash`` is the SHA-256 (hex) of the URL token: the token is shown once and
    looked up by its hash. ``secret_encrypted`` is the HMAC secret, Fernet-encrypted with
    the provider credentials' keys (runs.providers.credentials.cipher), "" for unsigned
    deliveries. ``input_mapping`` maps run input fields to a JSON pointer into the body
    (``/customer/id``) or a header (``header:X-Event``); empty: the body is the input.
    Runs act as ``run_as`` (the creator unless another user is named).

    ``listening_until`` (database clock) is set while a builder listens for a test event:
    the first delivery that passes the signature and body checks before then takes it
    (compare-and-set to null) and records its mapped input as its ``payload``; an enabled
    trigger still starts the run, a disabled one answers 202 with no run
    (services.delivery_receive).
    """

    graph = models.ForeignKey("graphs.Graph", on_delete=models.CASCADE, related_name="webhook_triggers")
    name = models.CharField(max_length=100)
    enabled = models.BooleanField(default=True)
    # CASCADE: a version goes only with its graph, and the graph's webhooks go with it.
    version = models.ForeignKey("graphs.GraphVersion", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True)
    secret_encrypted = models.TextField(blank=True, default="")
    timestamp_window_seconds = models.PositiveIntegerField(default=300)
    input_mapping = models.JSONField(default=dict, blank=True)
    run_as = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    listening_until = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["graph", "name"], name="webhook_trigger_graph_name")]

    def __str__(self) -> str:
        return f"webhook {self.name}"

    @property
    def source(self) -> str:
        """What the runs it starts record as their source."""
        return f"webhook {self.name}"


class WebhookDelivery(models.Model):
    """One delivery to a known trigger: what was answered, the run it started or
    replayed (same delivery id), or the error it was refused with. ``payload`` is the
    run input it carried (after the mapping), kept only for the delivery a listen
    captured (null for every other: bodies are not logged)."""

    trigger = models.ForeignKey(WebhookTrigger, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.CharField(max_length=128, blank=True, default="")
    received_at = models.DateTimeField(auto_now_add=True)
    status_code = models.PositiveSmallIntegerField()
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    replayed = models.BooleanField(default=False)
    error = models.JSONField(null=True, blank=True)
    payload = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["trigger", "-id"], name="webhook_delivery_trigger_id")]


class OverlapPolicy(models.TextChoices):
    """What a tick does while the schedule's previous run is still active (not ended)."""

    SKIP = "skip", "skip the tick"
    ALLOW = "allow", "start another run"
    QUEUE = "queue", "start a run that waits until the previous one ends"


class MissedPolicy(models.TextChoices):
    """What the first firing after an outage does with the ticks it missed."""

    SKIP = "skip", "skip missed ticks"
    CATCH_UP = "catch_up", "run once for the latest, within a window"


class Schedule(models.Model):
    """A cron expression in a time zone that starts a run of ``graph`` with ``input`` per tick.

    ``next_fire_at`` (database clock, UTC) is the schedule's due row: the engine's claim by
    due time fires it (triggers.schedules.schedule_fire_next, registered as a due source
    of runs.engine) and moves it to the next tick in the same transaction; null while
    paused. ``version`` is the pinned version, or null for the latest published one; runs
    act as ``run_as`` and record the source ``schedule <name>``. ``last_run`` is the run
    the last tick (or Run now) started: the overlap policy looks at it.
    ``catch_up_window_seconds``: with the catch_up missed policy, how late the latest
    missed tick may be and still run.
    """

    graph = models.ForeignKey("graphs.Graph", on_delete=models.CASCADE, related_name="schedules")
    name = models.CharField(max_length=100)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    input = models.JSONField(default=dict, blank=True)
    # CASCADE: a version goes only with its graph, and the graph's schedules go with it.
    version = models.ForeignKey("graphs.GraphVersion", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    run_as = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    paused = models.BooleanField(default=False)
    overlap_policy = models.CharField(max_length=16, choices=OverlapPolicy.choices, default=OverlapPolicy.SKIP)
    missed_policy = models.CharField(max_length=16, choices=MissedPolicy.choices, default=MissedPolicy.SKIP)
    catch_up_window_seconds = models.PositiveIntegerField(default=3600)
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["graph", "name"], name="schedule_graph_name")]
        indexes = [
            # The engine's claim reads the earliest due schedule on every pick
            # (triggers.schedules.schedule_earliest_due): paused ones (null) are not in it.
            models.Index(fields=["next_fire_at", "id"], name="schedule_due", condition=models.Q(next_fire_at__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"schedule {self.name}"

    @property
    def source(self) -> str:
        """What the runs it starts record as their source."""
        return f"schedule {self.name}"


class TickOutcome(models.TextChoices):
    STARTED = "started", "started a run"
    SKIPPED_OVERLAP = "skipped_overlap", "skipped: the previous run is still active"
    SKIPPED_MISSED = "skipped_missed", "skipped: missed (later than the policy allows)"
    FAILED = "failed", "could not start a run"


class ScheduleTick(models.Model):
    """What one tick of a schedule did (or a Run now, ``manual``). ``tick_at`` is the
    tick's time (UTC); ``fired_at`` when it was fired (database clock), so ``fired_at -
    tick_at`` is the fire lag. ``missed``: ticks before this one that no run was started
    for (an outage). One row per (schedule, tick time) for ticks: the unique constraint is
    the last guard of "never twice for one tick", after the row lock."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="ticks")
    tick_at = models.DateTimeField()
    fired_at = models.DateTimeField()
    manual = models.BooleanField(default=False)
    outcome = models.CharField(max_length=20, choices=TickOutcome.choices)
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    missed = models.PositiveIntegerField(default=0)
    error = models.JSONField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["schedule", "tick_at"], condition=models.Q(manual=False), name="schedule_tick_once"),
        ]
        indexes = [models.Index(fields=["schedule", "-id"], name="schedule_tick_schedule_id")]


class CallbackEvent(models.TextChoices):
    """What a completion callback is sent for."""

    SUCCEEDED = "succeeded", "the run succeeded"
    FAILED = "failed", "the run failed"
    WAITING = "waiting", "a step waits at an approval gate"
    PARKED = "parked", "a step is parked (its worker died; not safe to repeat)"


class CompletionCallback(models.Model):
    """An outbound webhook sent when a run of ``graph`` succeeds, fails, waits at a gate or
    has a step parked (``events``, a list of :class:`CallbackEvent` values), signed as
    Standard Webhooks do (triggers.callbacks). ``run`` set: a callback of that run alone
    (``callback_url`` at start); null: of every published-version run of the graph.
    ``secret_encrypted`` is the ``whsec_`` signing secret, Fernet-encrypted with the provider
    credentials' keys (runs.providers.credentials.cipher), shown once."""

    graph = models.ForeignKey("graphs.Graph", on_delete=models.CASCADE, related_name="completion_callbacks")
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list)
    enabled = models.BooleanField(default=True)
    secret_encrypted = models.TextField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["graph", "name"], condition=models.Q(run__isnull=True), name="callback_graph_name"),
        ]
        indexes = [
            # Looked up inside the engine's transaction at each run end, gate and park
            # (triggers.callbacks.deliveries_create): the run's own callback.
            models.Index(fields=["run"], name="callback_run", condition=models.Q(run__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"callback {self.name}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "due or being retried"
    DELIVERED = "delivered", "answered 2xx"
    FAILED = "failed", "undeliverable: attempts exhausted or refused"


class CallbackDelivery(models.Model):
    """One event to send to one callback: a committed row written in the transaction that
    committed the run's event (its end, gate or park), unique per (callback, event), sent by
    the engine's claim by due time (triggers.callback_sending).

    ``event_key`` names the run's event it came from (``event:<RunEvent id>`` or
    ``approval:<ApprovalRequest id>``). ``message_id`` is the ``webhook-id`` header, the same
    on every attempt, so receivers deduplicate. ``payload`` is the body sent (the same bytes
    on every attempt). ``next_due_at`` (database clock) is when it is due; while an attempt
    is in flight it is the lease's end (``leased_by``), so a worker that dies mid-send
    leaves it due again; null once delivered or failed. ``attempts`` counts sends begun."""

    callback = models.ForeignKey(CompletionCallback, on_delete=models.CASCADE, related_name="deliveries")
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    event = models.CharField(max_length=16, choices=CallbackEvent.choices)
    event_key = models.CharField(max_length=64)
    message_id = models.CharField(max_length=64, unique=True)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_due_at = models.DateTimeField(null=True, blank=True)
    leased_by = models.CharField(max_length=200, blank=True, default="")
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["callback", "event_key"], name="callback_delivery_once")]
        indexes = [
            # The engine's claim reads the earliest due delivery on every pick
            # (triggers.callback_sending.earliest_due): only pending ones are in it.
            models.Index(fields=["next_due_at", "id"], name="callback_delivery_due", condition=models.Q(status="pending")),
            models.Index(fields=["callback", "-id"], name="callback_delivery_callback_id"),
        ]
