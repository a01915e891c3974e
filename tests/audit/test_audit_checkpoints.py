"""Audit retention of long-lived chains (graph:, user:, auth): entries past
BALLAST_AUDIT_RETENTION_DAYS are cut at a checkpoint, in bounded transactions, by the
prune (runs.retention) and its dry run; verify_audit verifies the rest from the checkpoint
and notices a tampered checkpoint or first kept entry; appends racing a cut keep the chain."""
from __future__ import annotations

import io
import threading
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from audit.chain import GENESIS, audit_cut_chain, audit_in, audit_verify
from audit.checkpoints import hash_of_checkpoint
from audit.models import AuditChain, AuditCheckpoint, AuditEntry
from runs.engine import api as engine
from runs.models import RetentionJob
from runs.retention import prune
from runs.retention_job import retention_fire_next, retention_job_arm
from tests.support.audit import past_the_triggers, tamper

pytestmark = [pytest.mark.django_db(transaction=True)]

GRAPH = "graph:901"
USER = "user:902"
DAY = timedelta(days=1)


def append(scope: str, n: int) -> None:
    """``n`` entries in ``scope``, each its own transaction (as services write them)."""
    for i in range(n):
        audit_in(scope, "alice", "test.append", None, i=i)


def split() -> datetime:
    """A moment between the entries written before and after it (the clock moves on)."""
    moment = timezone.now()
    while timezone.now() <= moment:
        pass
    return moment


def problems() -> set[tuple[str, str]]:
    return {(p.scope, p.message.split(":")[0]) for p in audit_verify().problems}


def seqs(scope: str) -> list[int]:
    return list(AuditEntry.objects.filter(scope=scope).order_by("seq").values_list("seq", flat=True))


def test_old_entries_of_long_lived_chains_are_cut_at_a_checkpoint_and_the_rest_verifies(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    append(GRAPH, 6)
    append("auth", 2)
    last_old = AuditEntry.objects.get(scope=GRAPH, seq=6)
    cutoff = split()
    append(GRAPH, 3)
    report = prune(cutoff + DAY)
    assert (report.audit_checkpoints, report.audit_cut_entries, report.refused_chains) == (2, 8, [])
    assert seqs(GRAPH) == [7, 8, 9] and seqs("auth") == []
    checkpoint = AuditCheckpoint.objects.get(scope=GRAPH)
    assert (checkpoint.cut_seq, checkpoint.cut_hash, checkpoint.count, checkpoint.prev) == (6, last_old.hash, 6, GENESIS)
    assert AuditEntry.objects.get(scope=GRAPH, seq=7).prev_hash == checkpoint.cut_hash
    assert checkpoint.hash == hash_of_checkpoint(checkpoint)
    # The retention chain names each cut and is itself never cut.
    named = [c for d in AuditEntry.objects.filter(scope="retention", action="audit.checkpoint").values_list("data", flat=True) for c in d["chains"]]
    assert sorted(named) == sorted([[GRAPH, 6, last_old.hash], ["auth", 2, AuditChain.objects.get(scope="auth").hash]])
    verified = audit_verify()
    assert verified.ok, [str(p) for p in verified.problems]
    assert audit_verify(scope=GRAPH).ok and audit_verify(scope="auth").ok
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    assert "audit log intact" in out.getvalue()
    # A chain cut to nothing goes on from its checkpoint.
    append("auth", 1)
    assert seqs("auth") == [3] and audit_verify().ok


def test_audit_kept_forever_by_default_cuts_nothing(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = None
    append(GRAPH, 3)
    report = prune(timezone.now() + 400 * DAY)
    assert (report.audit_checkpoints, report.audit_cut_entries) == (0, 0)
    assert seqs(GRAPH) == [1, 2, 3] and not AuditCheckpoint.objects.exists()


def _cut_graph(settings) -> AuditCheckpoint:
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    append(GRAPH, 4)
    cutoff = split()
    append(GRAPH, 2)
    prune(cutoff + DAY)
    assert audit_verify().ok
    return AuditCheckpoint.objects.get(scope=GRAPH)


def test_an_edited_checkpoint_is_detected(settings):
    checkpoint = _cut_graph(settings)
    AuditCheckpoint.objects.filter(pk=checkpoint.pk).update(cut_hash="a" * 64)
    found = problems()
    assert (GRAPH, "checkpoint does not match its hash") in found
    assert (GRAPH, "checkpoint not the one the retention chain recorded at the cut") in found
    assert (GRAPH, "prev_hash does not match the previous entry's hash") in found  # the first kept entry no longer links


def test_an_edited_checkpoint_with_a_recomputed_hash_is_still_detected(settings):
    # Without the key the HMAC cannot be redone; with it, the retention chain still names the old cut.
    checkpoint = _cut_graph(settings)
    checkpoint.cut_seq, checkpoint.count = 3, 3
    checkpoint.hash = hash_of_checkpoint(checkpoint)
    checkpoint.save()
    found = problems()
    assert (GRAPH, "checkpoint not the one the retention chain recorded at the cut") in found
    assert (GRAPH, "expected seq 4") in found


def test_a_deleted_checkpoint_is_detected(settings):
    checkpoint = _cut_graph(settings)
    checkpoint.delete()
    found = problems()
    assert (GRAPH, "the retention chain recorded a cut of this chain but its checkpoint is gone") in found
    assert (GRAPH, "expected seq 1") in found


def test_an_edited_or_deleted_first_kept_entry_is_detected(settings):
    _cut_graph(settings)
    first = AuditEntry.objects.get(scope=GRAPH, seq=5)
    tamper(first.pk, actor="mallory")
    assert (GRAPH, "hash does not match the entry's content") in problems()
    tamper(first.pk, actor=first.actor)
    assert audit_verify().ok
    tamper(first.pk, prev_hash="b" * 64)
    assert (GRAPH, "prev_hash does not match the previous entry's hash") in problems()


def test_a_chain_cut_to_nothing_still_needs_the_head_its_checkpoint_names(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    append("auth", 3)
    prune(timezone.now() + 2 * DAY)
    assert seqs("auth") == [] and audit_verify().ok
    with past_the_triggers():
        AuditChain.objects.filter(scope="auth").update(seq=2)
    assert ("auth", "head names seq 2 but the chain was cut at seq 3 and has no entries (entries deleted)") in {
        (p.scope, p.message) for p in audit_verify().problems
    }
    with past_the_triggers():
        AuditChain.objects.filter(scope="auth").delete()
    assert ("auth", "a cut chain has neither entries nor a head (head deleted)") in problems()


def test_two_successive_cuts_chain_their_checkpoints(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    append(USER, 4)
    first_cut = split()
    append(USER, 3)
    second_cut = split()
    append(USER, 2)
    assert prune(first_cut + DAY).audit_cut_entries == 4
    assert prune(second_cut + DAY).audit_cut_entries == 3
    one, two = AuditCheckpoint.objects.filter(scope=USER).order_by("cut_seq")
    assert (one.cut_seq, one.count, one.prev) == (4, 4, GENESIS)
    assert (two.cut_seq, two.count, two.prev) == (7, 3, one.hash)
    assert two.cut_hash == AuditEntry.objects.get(scope=USER, seq=8).prev_hash
    assert seqs(USER) == [8, 9] and audit_verify().ok
    one.delete()  # an older checkpoint gone: the next no longer follows it
    found = problems()
    assert (USER, "checkpoint does not follow the chain's previous checkpoint") in found
    assert (USER, "the retention chain recorded a cut of this chain but its checkpoint is gone") in found


def test_a_dry_run_counts_the_cut_and_deletes_nothing(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    append(GRAPH, 5)
    append("auth", 1)
    cutoff = split()
    append(GRAPH, 1)
    before = AuditEntry.objects.count()
    report = prune(cutoff + DAY, dry_run=True)
    assert (report.audit_checkpoints, report.audit_cut_entries) == (2, 6)
    settings.BALLAST_RETENTION_DAYS = None
    out = io.StringIO()
    # The command's dry run at the real clock: with a retention of a day nothing is old yet.
    call_command("prune_runs", "--dry-run", stdout=out)
    assert "0 old entries of 0 long-lived audit chain(s) to cut at checkpoints" in out.getvalue()
    assert AuditEntry.objects.count() == before and not AuditCheckpoint.objects.exists()


def test_cuts_are_bounded_per_transaction_and_by_max_batches(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    settings.BALLAST_AUDIT_CUT_BATCH = 2
    append(GRAPH, 5)
    later = timezone.now() + 2 * DAY
    report = prune(later, max_batches=2)
    assert (report.audit_checkpoints, report.audit_cut_entries, report.batches, report.more) == (2, 4, 2, True)
    assert seqs(GRAPH) == [5] and audit_verify().ok
    report = prune(later)
    assert (report.audit_checkpoints, report.audit_cut_entries, report.more) == (1, 1, False)
    assert [c.count for c in AuditCheckpoint.objects.filter(scope=GRAPH).order_by("cut_seq")] == [2, 2, 1]
    assert seqs(GRAPH) == [] and audit_verify().ok


def test_a_chain_that_does_not_verify_is_not_cut(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    append(GRAPH, 4)
    tamper(AuditEntry.objects.get(scope=GRAPH, seq=2).pk, actor="mallory")
    report = prune(timezone.now() + 2 * DAY)
    assert report.refused_chains == [GRAPH] and report.audit_cut_entries == 0
    assert seqs(GRAPH) == [1, 2, 3, 4] and not AuditCheckpoint.objects.exists()


def test_run_and_retention_chains_are_not_cut_at_checkpoints():
    for scope in ("run:1", "retention"):
        with pytest.raises(ValueError):
            audit_cut_chain(scope, before=timezone.now(), limit=10)


def test_appends_racing_cuts_keep_one_verifiable_chain(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    settings.BALLAST_AUDIT_CUT_BATCH = 3
    append(GRAPH, 10)
    later = timezone.now() + 2 * DAY  # every entry, old and new, is past the retention then
    errors: list[BaseException] = []
    writing = threading.Event()

    def writer(n: int) -> None:
        try:
            writing.set()
            for i in range(25):
                with transaction.atomic():
                    audit_in(GRAPH, f"thread-{n}", "test.append", None, i=i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    def cutter() -> None:
        try:
            writing.wait(30)
            while any(t.is_alive() for t in writers):
                prune(later)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    threads = [*writers, threading.Thread(target=cutter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    prune(later)
    head = AuditChain.objects.get(scope=GRAPH)
    cut = sum(AuditCheckpoint.objects.filter(scope=GRAPH).values_list("count", flat=True))
    assert head.seq == 60 and cut + AuditEntry.objects.filter(scope=GRAPH).count() == 60
    assert AuditCheckpoint.objects.filter(scope=GRAPH).count() >= 20  # sixty entries, three a cut
    verified = audit_verify()
    assert verified.ok, [str(p) for p in verified.problems]


def test_the_retention_job_cuts_long_lived_chains_in_bounded_firings(settings):
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    settings.BALLAST_AUDIT_CUT_BATCH = 2
    settings.BALLAST_RETENTION_MAX_BATCHES = 2
    append(GRAPH, 5)
    later = engine.db_now() + 2 * DAY
    retention_job_arm(later)
    assert retention_fire_next(later, "w:1:1")
    job = RetentionJob.objects.get()
    assert (job.last_report["audit_checkpoints"], job.last_report["audit_cut_entries"], job.last_report["more"]) == (2, 4, True)
    assert retention_fire_next(job.next_due_at, "w:2:1")  # re-armed soon: the rest is cut
    job.refresh_from_db()
    assert (job.last_report["audit_cut_entries"], job.last_report["more"]) == (1, False)
    assert seqs(GRAPH) == [] and audit_verify().ok
