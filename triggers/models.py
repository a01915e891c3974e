"""Webhook triggers of a graph and the log of their deliveries."""
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
