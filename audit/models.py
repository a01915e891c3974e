"""The audit log's rows: entries (append-only) and the head of each hash chain.

Both models moved here from the runs app; their tables did not (``db_table`` keeps
``runs_auditentry`` and ``runs_auditchain``, with their rows, indexes, constraint and, on
PostgreSQL, the triggers runs migration 0002 put on them).
"""
from __future__ import annotations

from django.db import models
from django.utils import timezone


class AuditEntry(models.Model):
    """Who (a user, an API token, or a worker) did what to which object, when. Append-only.

    Written in the same transaction as the change it records (``audit.chain.audit``).
    Entries form hash chains, one per ``scope`` (``run:<id>``, ``graph:<id>``,
    ``user:<id>``, ``auth``): entry ``seq`` n stores the hash of entry n-1 in
    ``prev_hash`` and its own ``hash`` (HMAC-SHA256 over its canonical content), so
    ``manage.py verify_audit`` detects an edit, a deletion or a reordering. On PostgreSQL
    a trigger refuses UPDATE and DELETE on this table (runs migration 0002).
    """

    actor_type = models.CharField(max_length=16)  # user, token, worker, system, operator, anonymous
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=64, db_index=True)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    data = models.JSONField(default=dict, blank=True)
    # Set by audit() before hashing (auto_now_add would overwrite it after).
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    scope = models.CharField(max_length=100)
    seq = models.PositiveBigIntegerField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        # The model moved here from the runs app; its table (and every entry in it) did not.
        db_table = "runs_auditentry"
        ordering = ["id"]
        verbose_name_plural = "audit entries"
        constraints = [
            # One entry per position of a chain: two appenders can never fork a chain.
            models.UniqueConstraint(fields=["scope", "seq"], name="auditentry_unique_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.object_type}:{self.object_id}"


class AuditChain(models.Model):
    """The head of one audit hash chain: its last ``seq`` and ``hash``.

    Appending locks this row (after any lock registered for the chain's kind: a run's
    chain locks the run row first, the order the engine already uses), so appends to one
    chain are serial and appends to different chains never wait for each other. The head
    also lets verify_audit notice entries cut from the end of a chain. On PostgreSQL a
    trigger lets it only advance by one.
    """

    scope = models.CharField(max_length=100, unique=True)
    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64, default="")

    class Meta:
        db_table = "runs_auditchain"  # moved from the runs app with its rows, as AuditEntry

    def __str__(self) -> str:
        return f"{self.scope} @ {self.seq}"


class AuditTombstone(models.Model):
    """What remains of a pruned audit chain (runs.retention prunes a run's ``run:<id>``
    chain after BALLAST_AUDIT_RETENTION_DAYS): its scope, the ``last_seq`` and ``last_hash``
    its head named, how many entries went (``count``, equal to ``last_seq``: a chain is
    pruned whole), when, and ``hash``: HMAC-SHA256 over those (audit.chain.tombstone_hash),
    so an edited tombstone fails ``verify_audit``. Each prune also appends an
    ``audit.prune`` entry naming every chain it tombstoned to the ``retention`` chain, so
    a deleted tombstone is noticed too."""

    scope = models.CharField(max_length=100, unique=True)
    last_seq = models.PositiveBigIntegerField()
    last_hash = models.CharField(max_length=64)
    count = models.PositiveBigIntegerField()
    pruned_at = models.DateTimeField()
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"{self.scope} pruned @ {self.last_seq}"


class AuditCheckpoint(models.Model):
    """Where a long-lived audit chain (``graph:<id>``, ``user:<id>``, ``auth``, ...) was cut:
    its entries up to ``cut_seq`` were deleted (audit.chain.audit_cut_chain, after
    BALLAST_AUDIT_RETENTION_DAYS) and ``cut_hash`` is the hash of the last one, the
    ``prev_hash`` the first kept entry (``cut_seq`` + 1) links to, so ``verify_audit``
    verifies the chain from here instead of from its genesis. ``count``: entries this cut
    deleted (``cut_seq`` minus the previous checkpoint's); ``prev``: the previous
    checkpoint's ``hash`` (64 zeros for the first), so a chain's checkpoints form a chain
    of their own; ``hash``: HMAC-SHA256 over all of it (audit.checkpoints.checkpoint_hash).
    Each cut also appends an ``audit.checkpoint`` entry naming it to the ``retention`` chain."""

    scope = models.CharField(max_length=100)
    cut_seq = models.PositiveBigIntegerField()
    cut_hash = models.CharField(max_length=64)
    count = models.PositiveBigIntegerField()
    prev = models.CharField(max_length=64)
    cut_at = models.DateTimeField()
    hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            # One checkpoint per cut point; the latest of a scope is its highest cut_seq.
            models.UniqueConstraint(fields=["scope", "cut_seq"], name="auditcheckpoint_unique_cut"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} cut @ {self.cut_seq}"
