"""The API token row: one user's key, stored as a hash, kept after revocation for the audit trail."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """An API token of one user. Only the SHA-256 of the key is stored; the key itself is
    shown once, when it is created (``accounts.tokens.token_create``). ``prefix`` (the first
    12 characters of the key) names the token in lists and audit entries. Revoked tokens
    are kept (revoked_at set) so audit entries keep pointing at something."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=200, blank=True, default="")
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by_name = models.CharField(max_length=200, blank=True, default="", editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_by_name = models.CharField(max_length=200, blank=True, default="", editable=False)

    class Meta:
        # The model moved here from the runs app; its table (and every token in it) did not.
        db_table = "runs_apitoken"
        ordering = ["-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}{', revoked' if self.revoked_at else ''})"

    @property
    def audit_scope(self) -> str:
        """Token events chain with the other events of their user."""
        return f"user:{self.user_id}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class RunAlertSubscription(models.Model):
    """One user's request for an email when a run of one graph fails or is parked (a
    crash interrupted a step that is not safe to repeat and a person must decide).

    Per graph and per user (one row at most); kept by ``runs.reports.alerts`` and read there
    when a run's status changes, after that change committed. Only a graph's owners may
    hold one (``runs.reports.alerts.may_subscribe``)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="run_alerts")
    graph = models.ForeignKey("graphs.Graph", on_delete=models.CASCADE, related_name="run_alerts")
    on_failed = models.BooleanField(default=True)
    on_parked = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "graph"], name="runalert_one_per_user_graph")]
        ordering = ["graph_id", "user_id"]

    def __str__(self) -> str:
        return f"{self.user} on {self.graph}"
