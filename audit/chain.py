"""The audit log's writer and verifier: append a hash-chained entry in the caller's transaction.

Chains. Entries form one hash chain per *scope*: ``run:<id>`` for everything done to a run,
its steps and its approvals; ``graph:<id>`` for graph versions; ``user:<id>`` for API tokens;
``auth`` for login failures; ``<model>:<pk>`` otherwise (:func:`scope_of`). A single global
chain would make every audited commit in the system wait behind one row lock (TRAPS.md
measured it); a chain per run costs one row lock that the engine's own order already
implies. Entry n of a chain stores ``prev_hash`` (entry n-1's hash, or 64 zeros) and
``hash`` = HMAC-SHA256 over its canonical content (scope, seq, prev_hash, who, what, object,
data, time). The HMAC key is ``settings.BALLAST_AUDIT_KEY`` if set, else ``SECRET_KEY``:
someone who can write to the database but does not hold the key cannot rewrite a chain so
that it verifies again.

The head of each chain (``AuditChain``: last seq and hash) is locked while appending and lets
:func:`audit_verify` notice entries cut from the end of a chain. An app whose chains must
take a lock of its own first registers it with :func:`register_scope_lock` (runs, from its
``AppConfig.ready``: a run's chain locks the run row first, the order of every engine
commit, so an audited service and an engine commit on one run cannot deadlock).

Retention. A run's chain is pruned whole and tombstoned (:func:`audit_prune_chains`); a
long-lived chain (``graph:``, ``user:``, ``auth``, ...) loses its oldest entries at a
checkpoint (:func:`audit_cut_chain`) and verifies from there (audit.checkpoints).

Principal. Entries audited as ``actor_type="user"`` inside :func:`audit.principals.acting_as`
are recorded as the principal (an API token) instead.

This module imports no other app of the project (import-linter keeps it so): the apps
import it.
"""
from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import takewhile
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.utils import timezone

from audit.checkpoints import (
    NEVER_CUT,
    RETENTION_SCOPE,
    chain_starts,
    checkpoint_hash,
    checkpoint_problems,
    latest_checkpoint,
)
from audit.integrity import GENESIS, AuditProblem, canonical, keyed_hash, timestamp
from audit.models import AuditChain, AuditCheckpoint, AuditEntry, AuditTombstone
from audit.principals import as_principal

__all__ = ["GENESIS", "RETENTION_SCOPE", "AuditProblem"]  # re-exported: callers import them from here

#: A lock taken before a chain's head, inside the append's transaction: called with the
#: key of the chain's scope (``"42"`` for ``run:42``).
ScopeLock = Callable[[str], None]

# Chain kind (a scope's part before ":") -> the lock its appends take first.
_scope_locks: dict[str, ScopeLock] = {}


def register_scope_lock(kind: str, lock: ScopeLock) -> None:
    """Have every append to a chain ``<kind>:<key>`` call ``lock(key)`` first, in the
    append's transaction, before it locks the chain's head (:func:`audit_in`): the app
    that owns the objects of that kind names the lock its own writers take first, so the
    two cannot deadlock. Called from the app's ``AppConfig.ready``; registering a kind
    again replaces its lock. ``lock`` must not fail for a key whose object is gone."""
    _scope_locks[kind] = lock


def scope_lock(kind: str) -> ScopeLock | None:
    """The lock registered for chains of ``kind`` (None: the head's lock alone)."""
    return _scope_locks.get(kind)

def entry_hash(
    *,
    scope: str,
    seq: int,
    prev_hash: str,
    actor_type: str,
    actor: str,
    action: str,
    object_type: str,
    object_id: str,
    data: Any,
    created_at: datetime,
) -> str:
    """HMAC-SHA256 (hex) of an entry's canonical content: everything but its row id and hash."""
    return keyed_hash([scope, seq, prev_hash, actor_type, actor, action, object_type, object_id, data, timestamp(created_at)])


def hash_of(entry: AuditEntry) -> str:
    """``entry_hash`` of an entry's content as it stands on the instance: the hash to store
    when the entry is written, the one to compare with its stored ``hash`` when verifying."""
    return entry_hash(
        scope=entry.scope,
        seq=entry.seq,
        prev_hash=entry.prev_hash,
        actor_type=entry.actor_type,
        actor=entry.actor,
        action=entry.action,
        object_type=entry.object_type,
        object_id=entry.object_id,
        data=entry.data,
        created_at=entry.created_at,
    )


def scope_of(obj: Any) -> str:
    """The chain an object's entries go to: ``auth`` for None; the object's own
    ``audit_scope`` (a string property) when it has one (a run: ``run:<pk>``); else
    ``run:<run_id>`` or ``graph:<graph_id>`` when the object has such a field; else
    ``<model name>:<pk>``."""
    if obj is None:
        return "auth"
    explicit = getattr(obj, "audit_scope", None)  # e.g. a run's: run:<pk>
    if isinstance(explicit, str) and explicit:
        return explicit
    model = obj._meta.model_name
    run_id = getattr(obj, "run_id", None)
    if run_id is not None:
        return f"run:{run_id}"
    graph_id = getattr(obj, "graph_id", None)
    if graph_id is not None:
        return f"graph:{graph_id}"
    return f"{model}:{obj.pk}"


def audit(actor: str, action: str, obj: Any, *, actor_type: str = "user", **data: Any) -> AuditEntry:
    """Append an audit entry in the caller's transaction (who did what to which object).

    ``obj`` is a model instance (or None for events about no object, such as a failed
    login); ``data`` must be JSON-serialisable (other values are stored as ``str``). The
    entry joins the hash chain of ``scope_of(obj)`` (:func:`audit_in` names another); the chain's head is locked until the
    caller's transaction ends, so entries of one chain are appended one at a time. A lock
    registered for the chain's kind (:func:`register_scope_lock`; a run's chain: the run
    row, the order the engine uses) is taken first, so an audited service and an engine
    commit on one run cannot deadlock. Returns the entry.
    """
    return audit_in(scope_of(obj), actor, action, obj, actor_type=actor_type, **data)


def audit_in(scope: str, actor: str, action: str, obj: Any, *, actor_type: str = "user", **data: Any) -> AuditEntry:
    """:func:`audit` into the chain ``scope`` rather than ``obj``'s own: a refused read of
    a run goes to the chain of the user refused (``user:<id>``), so it never locks the
    run's row nor lengthens its chain. Returns the entry."""
    actor_type, data = as_principal(actor_type, data)
    data = json.loads(canonical(data))  # what the JSON column will give back, hashed as such
    object_type = "" if obj is None else obj._meta.model_name
    object_id = "" if obj is None else str(obj.pk)
    with transaction.atomic():
        kind, colon, key = scope.partition(":")
        lock = _scope_locks.get(kind) if colon else None
        if lock is not None:
            lock(key)  # e.g. the run row for run:<id> (register_scope_lock)
        head = AuditChain.objects.select_for_update().filter(scope=scope).first()
        if head is None:
            # First entry of this chain: create the head (a racing creator makes this a
            # no-op after it commits), then lock it.
            AuditChain.objects.bulk_create([AuditChain(scope=scope, seq=0, hash="")], ignore_conflicts=True)
            head = AuditChain.objects.select_for_update().get(scope=scope)
        seq = head.seq + 1
        prev_hash = head.hash or GENESIS
        entry = AuditEntry(
            actor_type=actor_type,
            actor=actor,
            action=action,
            object_type=object_type,
            object_id=object_id,
            data=data,
            created_at=timezone.now(),
            scope=scope,
            seq=seq,
            prev_hash=prev_hash,
        )
        entry.hash = hash_of(entry)
        entry.save(force_insert=True)
        AuditChain.objects.filter(pk=head.pk).update(seq=seq, hash=entry.hash)
    return entry


def audit_new(actor: str, action: str, obj: Any, *, actor_type: str = "user", **data: Any) -> AuditEntry:
    """:func:`audit` for the first entry of a chain that cannot exist yet: ``obj`` was
    created in the caller's transaction (a new run), so its chain (``scope_of(obj)``) has
    no head and no entry. Two INSERTs (the entry, seq 1 after the genesis hash, and the
    chain's head), instead of locking the run row and reading, creating, re-reading and
    updating the head: the fixed cost of creating a run. Safe without the lock: the chain
    head's scope and each (scope, seq) are unique, so if the chain did exist after all
    the INSERT raises IntegrityError and the caller's transaction rolls back; it never
    writes a second chain. Returns the entry."""
    entry, head = audit_new_rows(actor, action, obj, actor_type=actor_type, **data)
    entry.save(force_insert=True)
    AuditChain.objects.bulk_create([head])
    return entry


def audit_new_rows(actor: str, action: str, obj: Any, *, actor_type: str = "user", **data: Any) -> tuple[AuditEntry, AuditChain]:
    """The two unsaved rows :func:`audit_new` inserts (the entry, hashed, and the chain's
    head), for a caller that writes them in its own statement (``obj.pk`` must be set)."""
    actor_type, data = as_principal(actor_type, data)
    data = json.loads(canonical(data))
    scope = scope_of(obj)
    entry = AuditEntry(
        actor_type=actor_type,
        actor=actor,
        action=action,
        object_type=obj._meta.model_name,
        object_id=str(obj.pk),
        data=data,
        created_at=timezone.now(),
        scope=scope,
        seq=1,
        prev_hash=GENESIS,
    )
    entry.hash = hash_of(entry)
    return entry, AuditChain(scope=scope, seq=1, hash=entry.hash)


@dataclass
class AuditReport:
    """Outcome of :func:`audit_verify`: counts and the problems (empty when intact)."""

    entries: int
    chains: int
    problems: list[AuditProblem]

    @property
    def ok(self) -> bool:
        return not self.problems


class _ChainEnd(NamedTuple):
    """A chain's last ``seq`` and ``hash`` (as read from its entries, or from its head row)."""

    scope: str
    seq: int
    hash: str


def audit_verify(*, scope: str | None = None, scopes: list[str] | None = None, chunk_size: int = 2000) -> AuditReport:
    """Recompute every chain (or one ``scope``) and compare with the stored hashes and heads.

    Detects: an edited entry (its hash no longer matches its content), a deleted entry (a
    gap in ``seq`` and a ``prev_hash`` that no longer links), reordered entries (a changed
    ``seq`` breaks both its hash and the links), entries cut from a chain's end (the head
    names a later seq), a chain whose head is missing, and a head whose entries are all
    gone. Pruned chains (:func:`audit_prune_chains`): an edited tombstone, entries or a
    head that reappear under a tombstoned scope, and a tombstone missing from, or not the
    one named by, the ``retention`` chain's ``audit.prune`` entries. Cut long-lived chains
    (:func:`audit_cut_chain`) are verified from their last checkpoint: an edited or
    deleted checkpoint, a first kept entry that does not link to it, and checkpoints the
    ``retention`` chain does not name as they are (audit.checkpoints.checkpoint_problems).
    ``scopes``: only those chains (the prune's own check before it deletes them; no
    tombstone or checkpoint checks).
    Streams entries in chunks and looks heads up in batches (a chain per run means as many
    heads as runs); never writes.
    """
    problems: list[AuditProblem] = []
    qs = AuditEntry.objects.order_by("scope", "seq", "id")
    if scope is not None:
        qs = qs.filter(scope=scope)
    if scopes is not None:
        qs = qs.filter(scope__in=scopes)
    entries = chains = 0
    ended: list[_ChainEnd] = []  # chains read whose heads are not yet checked
    starts = chain_starts(scope=scope, scopes=scopes)  # cut chains begin after their last checkpoint

    def check_heads() -> None:
        heads = {
            s: _ChainEnd(s, n, h) for s, n, h in AuditChain.objects.filter(scope__in=[c.scope for c in ended]).values_list("scope", "seq", "hash")
        }
        for end in ended:
            head = heads.get(end.scope)
            if head is None:
                problems.append(AuditProblem(end.scope, None, None, "chain has entries but no head row (head deleted)"))
            elif head != end:
                problems.append(
                    AuditProblem(end.scope, None, None, f"head names seq {head.seq} but the chain ends at seq {end.seq} (entries cut from the end, or head edited)")
                )
        ended.clear()

    current: str | None = None
    expected_seq, prev = 1, GENESIS
    for e in qs.iterator(chunk_size=chunk_size):
        entries += 1
        if e.scope != current:
            if current is not None:
                ended.append(_ChainEnd(current, expected_seq - 1, prev))
                if len(ended) >= chunk_size:
                    check_heads()
            current, chains = e.scope, chains + 1
            start = starts.get(e.scope, NEVER_CUT)
            expected_seq, prev = start.seq + 1, start.hash
        if e.seq != expected_seq:
            problems.append(AuditProblem(e.scope, e.pk, e.seq, f"expected seq {expected_seq}: entries deleted or reordered"))
        if e.prev_hash != prev:
            problems.append(AuditProblem(e.scope, e.pk, e.seq, "prev_hash does not match the previous entry's hash: entries deleted, inserted or reordered"))
        if not hmac.compare_digest(hash_of(e), e.hash):
            problems.append(AuditProblem(e.scope, e.pk, e.seq, "hash does not match the entry's content: entry edited"))
        expected_seq, prev = e.seq + 1, e.hash
    if current is not None:
        ended.append(_ChainEnd(current, expected_seq - 1, prev))
    check_heads()
    # The entries' scopes narrowed as the heads are: a NOT IN over every entry of the log
    # would read the whole table for a prune's check of a few chains.
    with_entries = AuditEntry.objects.all()
    orphans = AuditChain.objects.filter(seq__gt=0)
    if scope is not None:
        orphans, with_entries = orphans.filter(scope=scope), with_entries.filter(scope=scope)
    if scopes is not None:
        orphans, with_entries = orphans.filter(scope__in=scopes), with_entries.filter(scope__in=scopes)
    orphans = orphans.exclude(scope__in=with_entries.values("scope")).exclude(scope__in=AuditCheckpoint.objects.values("scope"))
    for chain, seq in orphans.values_list("scope", "seq"):
        problems.append(AuditProblem(chain, None, None, f"head names seq {seq} but the chain has no entries (entries deleted)"))
    if scopes is None:
        problems.extend(_tombstone_problems(scope))
        problems.extend(checkpoint_problems(scope, starts))
    return AuditReport(entries=entries, chains=chains, problems=problems)


# --------------------------------------------------------------------------- retention

# RETENTION_SCOPE (audit.checkpoints): the chain every prune appends to, one
# ``audit.prune`` entry per pruned batch naming each chain it cut with its last seq and
# hash (so a deleted tombstone is noticed), and one ``audit.checkpoint`` entry per cut.


def tombstone_hash(*, scope: str, last_seq: int, last_hash: str, count: int, pruned_at: datetime) -> str:
    """HMAC-SHA256 (hex, the entries' key) of a tombstone's content."""
    return keyed_hash(["tombstone", scope, last_seq, last_hash, count, timestamp(pruned_at)])


def _hash_of_tombstone(t: AuditTombstone) -> str:
    return tombstone_hash(scope=t.scope, last_seq=t.last_seq, last_hash=t.last_hash, count=t.count, pruned_at=t.pruned_at)


@dataclass
class PruneOutcome:
    """What :func:`audit_prune_chains` did: the chains it cut (``pruned``: scope -> entries
    deleted) and those it kept because they did not verify (``refused``: their problems)."""

    pruned: dict[str, int]
    refused: list[AuditProblem]


def audit_prune_chains(scopes: list[str], *, actor: str = "retention") -> PruneOutcome:
    """Delete whole audit chains (``scopes``, e.g. ``run:42``) and leave a tombstone for
    each (:class:`AuditTombstone`: last seq and hash from the chain's head, entries
    deleted, when, HMAC), plus one ``audit.prune`` entry in the ``retention`` chain naming
    them, in the caller's transaction. A chain is verified first (:func:`audit_verify`
    over these scopes): one that does not verify is kept as it is, evidence intact, and
    returned in ``refused``. Scopes without a head (no entries) are skipped. On PostgreSQL
    it sets ``ballast.audit_prune`` for the transaction, which the append-only triggers
    (audit migration 0002) read to allow these DELETEs."""
    outcome = PruneOutcome(pruned={}, refused=[])
    if not scopes:
        return outcome
    with transaction.atomic():
        heads = list(AuditChain.objects.select_for_update().filter(scope__in=scopes).order_by("scope").values_list("scope", "seq", "hash"))
        if not heads:
            return outcome
        report = audit_verify(scopes=[h[0] for h in heads])
        bad = {p.scope for p in report.problems}
        outcome.refused = report.problems
        keep = [h for h in heads if h[0] not in bad and h[1] > 0]
        if not keep:
            return outcome
        _prune_deletes(True)
        names = [h[0] for h in keep]
        AuditEntry.objects.filter(scope__in=names).delete()
        AuditChain.objects.filter(scope__in=names).delete()
        _prune_deletes(False)
        now = timezone.now()
        stones = [
            AuditTombstone(scope=name, last_seq=seq, last_hash=last, count=seq, pruned_at=now) for name, seq, last in keep
        ]
        for t in stones:
            t.hash = _hash_of_tombstone(t)
        AuditTombstone.objects.bulk_create(stones)
        audit_in(RETENTION_SCOPE, actor, "audit.prune", None, actor_type="system", chains=[[n, s, h] for n, s, h in keep])
        outcome.pruned = {name: seq for name, seq, _ in keep}
    return outcome


def long_lived(scope: str) -> bool:
    """Whether ``scope`` is a long-lived chain, cut at checkpoints (:func:`audit_cut_chain`):
    every chain but a run's (pruned whole, :func:`audit_prune_chains`) and the
    ``retention`` chain (which vouches for tombstones and checkpoints: never cut)."""
    return not scope.startswith("run:") and scope != RETENTION_SCOPE


@dataclass
class CutOutcome:
    """What one :func:`audit_cut_chain` did: entries deleted (0: nothing was old enough),
    the checkpoint written, or the problems that made it keep the chain as it is."""

    deleted: int = 0
    checkpoint: AuditCheckpoint | None = None
    refused: list[AuditProblem] | None = None


def _prune_deletes(on: bool) -> None:
    """On PostgreSQL, let (or stop letting) this transaction delete audit rows: the
    append-only triggers (audit migration 0002) read ``ballast.audit_prune``."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('ballast.audit_prune', %s, true)", ["on" if on else "off"])


def audit_cut_chain(scope: str, *, before: datetime, limit: int, actor: str = "retention") -> CutOutcome:
    """Cut the long-lived chain ``scope`` (:func:`long_lived`) at a checkpoint, in one
    transaction: delete its oldest entries created before ``before``, at most ``limit``
    (>= 1) of them, and write an :class:`AuditCheckpoint` (the last deleted entry's seq
    and hash, entries deleted, the previous checkpoint's hash, when, HMAC) plus an
    ``audit.checkpoint`` entry in the ``retention`` chain naming it. Call it again for
    the next ``limit``: each call is one bounded transaction and leaves a chain that
    verifies. Takes the chain's locks as an append does (the registered scope lock, then
    the head), so appends to the chain wait for this one transaction and then go on after
    its head; it never deletes the entry the head names unless that is old enough too
    (then the head and the last checkpoint agree). The entries it would delete, and the
    first one it keeps, are verified first from the last checkpoint (or the genesis): a
    segment that does not verify is kept as it is, evidence intact, in ``refused``.
    Raises ValueError for a scope that is not long-lived."""
    if not long_lived(scope):
        raise ValueError(f"{scope} is not a long-lived chain")
    with transaction.atomic():
        kind, colon, key = scope.partition(":")
        lock = _scope_locks.get(kind) if colon else None
        if lock is not None:
            lock(key)  # the order every append to this chain takes its locks in
        head = AuditChain.objects.select_for_update().filter(scope=scope).first()
        if head is None or head.seq == 0:
            return CutOutcome()
        last = latest_checkpoint(scope)
        start_seq, start_hash = (last.cut_seq, last.cut_hash) if last is not None else (0, GENESIS)
        # The oldest entries after the last cut, and one more: the first kept, whose link is checked.
        segment = list(AuditEntry.objects.filter(scope=scope, seq__gt=start_seq).order_by("seq")[: limit + 1])
        cut = list(takewhile(lambda e: e.created_at < before, segment[:limit]))
        if not cut:
            return CutOutcome()
        problems: list[AuditProblem] = []
        expected_seq, prev = start_seq + 1, start_hash
        for e in segment[: len(cut) + 1]:
            if e.seq != expected_seq or e.prev_hash != prev or not hmac.compare_digest(hash_of(e), e.hash):
                problems.append(AuditProblem(scope, e.pk, e.seq, "does not verify from the chain's last checkpoint: not cut"))
            expected_seq, prev = e.seq + 1, e.hash
        if len(cut) == len(segment) and (head.seq, head.hash) != (cut[-1].seq, cut[-1].hash):
            problems.append(AuditProblem(scope, None, head.seq, "head does not name the chain's last entry: not cut"))
        if problems:
            return CutOutcome(refused=problems)
        _prune_deletes(True)
        # By the (scope, seq) index, not 5,000 ids bound one by one: the range is exactly
        # the entries just verified (seq is unique per scope, and no append can add one
        # below the head, which this transaction holds).
        deleted, _ = AuditEntry.objects.filter(scope=scope, seq__gt=start_seq, seq__lte=cut[-1].seq).delete()
        _prune_deletes(False)
        if deleted != len(cut):
            raise RuntimeError(f"audit cut of {scope}: {deleted} entries in the range, {len(cut)} verified")  # rolls back
        checkpoint = AuditCheckpoint(
            scope=scope, cut_seq=cut[-1].seq, cut_hash=cut[-1].hash, count=cut[-1].seq - start_seq,
            prev=last.hash if last is not None else GENESIS, cut_at=timezone.now(),
        )  # fmt: skip
        checkpoint.hash = checkpoint_hash(
            scope=scope, cut_seq=checkpoint.cut_seq, cut_hash=checkpoint.cut_hash, count=checkpoint.count, prev=checkpoint.prev, cut_at=checkpoint.cut_at
        )
        checkpoint.save(force_insert=True)
        audit_in(RETENTION_SCOPE, actor, "audit.checkpoint", None, actor_type="system", chains=[[scope, checkpoint.cut_seq, checkpoint.cut_hash]])
    return CutOutcome(deleted=deleted, checkpoint=checkpoint)


def _tombstone_problems(scope: str | None) -> list[AuditProblem]:
    """The tombstone checks of :func:`audit_verify` (all tombstones, or ``scope``'s)."""
    problems: list[AuditProblem] = []
    stones = AuditTombstone.objects.order_by("scope")
    if scope is not None:
        stones = stones.filter(scope=scope)
    # What the retention chain says was pruned (its own entries were verified above).
    named: dict[str, tuple[int, str]] = {}
    notes = AuditEntry.objects.filter(scope=RETENTION_SCOPE, action="audit.prune").order_by("seq")
    for data in notes.values_list("data", flat=True).iterator(chunk_size=200):
        for item in (data or {}).get("chains", []):
            if scope is None or item[0] == scope:
                named[item[0]] = (int(item[1]), str(item[2]))
    for t in stones.iterator(chunk_size=2000):
        if not hmac.compare_digest(_hash_of_tombstone(t), t.hash) or t.count != t.last_seq:
            problems.append(AuditProblem(t.scope, None, None, "tombstone does not match its hash: tombstone edited"))
        if named.pop(t.scope, None) != (t.last_seq, t.last_hash):
            problems.append(AuditProblem(t.scope, None, None, "tombstone not the one the retention chain recorded at the prune"))
    for name in named:
        problems.append(AuditProblem(name, None, None, "the retention chain recorded this chain's prune but its tombstone is gone"))
    revived = AuditEntry.objects.filter(scope__in=stones.values("scope")).values_list("scope", flat=True).distinct()
    for name in revived:
        problems.append(AuditProblem(name, None, None, "entries of a pruned (tombstoned) chain reappeared"))
    heads = AuditChain.objects.filter(scope__in=stones.values("scope")).values_list("scope", flat=True)
    for name in heads:
        problems.append(AuditProblem(name, None, None, "a head of a pruned (tombstoned) chain reappeared"))
    return problems
