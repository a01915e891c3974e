"""Approval requests: a run waiting as a row for a person's decision."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"  # its deadline passed and the gate followed its timeout edge


class ApprovalRequest(models.Model):
    """A pending decision on one waiting step.

    ``purpose`` is ``gate`` (an approval node) or ``recovery`` (a step that is not safe
    to repeat was interrupted by a crash; the decision is retry, skip or fail).
    ``approvers``/``approver_groups`` name who may decide (empty = anyone in the
    approvers group or staff). Deciding is a compare-and-set from ``pending``.
    """

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="approvals")
    step = models.ForeignKey("runs.Step", on_delete=models.CASCADE, related_name="approvals")
    node_id = models.CharField(max_length=64)
    purpose = models.CharField(max_length=16, default="gate")
    status = models.CharField(max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING, db_index=True)
    prompt = models.TextField(blank=True, default="")
    payload = models.JSONField(default=dict, blank=True)
    approvers = models.JSONField(default=list, blank=True)
    approver_groups = models.JSONField(default=list, blank=True)
    # "|user:ada|group:finance|" (empty = the default rule): who may decide, as text a
    # plain substring filter finds on every database, so the inbox is one query.
    principals = models.CharField(max_length=4000, blank=True, default="")
    decision = models.CharField(max_length=16, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    decided_by_name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # Bumped by every change a person could have decided on the strength of (a claim, a
    # hand-back, a reassignment, a vote, the decision): a decision carries the version it
    # was shown and is refused (409) when the row moved on. ``last_change`` says how.
    version = models.PositiveIntegerField(default=1)
    last_change = models.CharField(max_length=300, blank=True, default="")
    claimed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    claimed_by_name = models.CharField(max_length=200, blank=True, default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Distinct approvals needed (the node's ``quorum``); one rejection rejects.
    quorum = models.PositiveSmallIntegerField(default=1)
    reason = models.CharField(max_length=200, blank=True, default="")
    values = models.JSONField(null=True, blank=True)
    # The node's deadline: when it falls due (the waiting step's own due_at holds the
    # engine's copy, runs.engine.store.deadlines) and what then happens (``escalation``:
    # notify, reassign or timeout); ``escalated_at`` once it did. No deadline: all empty.
    due_at = models.DateTimeField(null=True, blank=True)
    escalation = models.CharField(max_length=16, blank=True, default="")
    escalated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            # One open request per waiting step: a duplicate commit cannot ask twice.
            models.UniqueConstraint(fields=["step"], condition=models.Q(status="pending"), name="approval_one_pending_per_step"),
        ]

    def __str__(self) -> str:
        return f"approval {self.pk} run {self.run_id} {self.node_id} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.principals = principals_text(self.approvers, self.approver_groups)
        super().save(*args, **kwargs)


def principals_text(approvers: list[str], groups: list[str]) -> str:
    """The ``principals`` text of named approvers and groups (empty when none are named)."""
    names = [f"user:{u}" for u in approvers] + [f"group:{g}" for g in groups]
    return "|" + "|".join(names) + "|" if names else ""


class ApprovalVote(models.Model):
    """One person's approval towards a request's quorum (a rejection decides at once and
    is recorded on the request). One vote per person and request."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user_name = models.CharField(max_length=200)
    decision = models.CharField(max_length=16)
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["request", "user_name"], name="approval_one_vote_per_person")]

    def __str__(self) -> str:
        return f"{self.user_name} {self.decision} approval {self.request_id}"
