"""Checkpoints of long-lived audit chains: their HMAC, where verification starts in a cut chain, and the checks ``verify_audit`` makes of them (README "Retention")."""
from __future__ import annotations

import hmac
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

from django.db.models import Exists, OuterRef

from audit.integrity import GENESIS, AuditProblem, keyed_hash, timestamp
from audit.models import AuditChain, AuditCheckpoint, AuditEntry

#: The chain every prune and cut appends to (``audit.prune`` and ``audit.checkpoint``
#: entries naming what went). It is never cut itself: it is what vouches for the
#: tombstones and checkpoints.
RETENTION_SCOPE = "retention"


class ChainStart(NamedTuple):
    """Where a chain's entries begin: the seq of the last entry cut and its hash (a chain
    never cut starts after seq 0 and the genesis hash)."""

    seq: int
    hash: str


NEVER_CUT = ChainStart(0, GENESIS)


def checkpoint_hash(*, scope: str, cut_seq: int, cut_hash: str, count: int, prev: str, cut_at: datetime) -> str:
    """HMAC-SHA256 (hex, the entries' key) of a checkpoint's content."""
    return keyed_hash(["checkpoint", scope, cut_seq, cut_hash, count, prev, timestamp(cut_at)])


def hash_of_checkpoint(c: AuditCheckpoint) -> str:
    """:func:`checkpoint_hash` of a checkpoint as it stands on the instance."""
    return checkpoint_hash(scope=c.scope, cut_seq=c.cut_seq, cut_hash=c.cut_hash, count=c.count, prev=c.prev, cut_at=c.cut_at)


def latest_checkpoint(scope: str) -> AuditCheckpoint | None:
    """The scope's last checkpoint (highest ``cut_seq``), or None: never cut."""
    return AuditCheckpoint.objects.filter(scope=scope).order_by("-cut_seq").first()


def chain_starts(*, scope: str | None = None, scopes: list[str] | None = None) -> dict[str, ChainStart]:
    """Scope -> :class:`ChainStart` from its latest checkpoint, for every cut chain (or
    those of ``scope`` / ``scopes``). Chains absent were never cut (:data:`NEVER_CUT`)."""
    qs = AuditCheckpoint.objects.order_by("scope", "cut_seq")
    if scope is not None:
        qs = qs.filter(scope=scope)
    if scopes is not None:
        qs = qs.filter(scope__in=scopes)
    return {s: ChainStart(n, h) for s, n, h in qs.values_list("scope", "cut_seq", "cut_hash").iterator(chunk_size=2000)}


def checkpoint_problems(scope: str | None, starts: dict[str, ChainStart]) -> list[AuditProblem]:
    """The checkpoint checks of ``verify_audit`` (all cut chains, or ``scope``): each
    checkpoint's HMAC; that a chain's checkpoints link (``prev``, ``count``) from the
    first; that the ``retention`` chain's ``audit.checkpoint`` entries name exactly the
    checkpoints there are; and that a cut chain whose entries are all gone has the head
    its last checkpoint names. ``starts``: :func:`chain_starts` of the same selection.
    (That the first kept entry links to its checkpoint is checked with the entries.)"""
    problems: list[AuditProblem] = []
    named: set[tuple[str, int, str]] = set()
    notes = AuditEntry.objects.filter(scope=RETENTION_SCOPE, action="audit.checkpoint").order_by("seq")
    for data in notes.values_list("data", flat=True).iterator(chunk_size=200):
        for item in (data or {}).get("chains", []):
            if scope is None or item[0] == scope:
                named.add((str(item[0]), int(item[1]), str(item[2])))
    qs = AuditCheckpoint.objects.order_by("scope", "cut_seq")
    if scope is not None:
        qs = qs.filter(scope=scope)
    previous: AuditCheckpoint | None = None
    for c in qs.iterator(chunk_size=2000):
        before = previous if previous is not None and previous.scope == c.scope else None
        if not hmac.compare_digest(hash_of_checkpoint(c), c.hash):
            problems.append(AuditProblem(c.scope, None, c.cut_seq, "checkpoint does not match its hash: checkpoint edited"))
        expected_prev, expected_count = (GENESIS, c.cut_seq) if before is None else (before.hash, c.cut_seq - before.cut_seq)
        if c.prev != expected_prev or c.count != expected_count:
            problems.append(AuditProblem(c.scope, None, c.cut_seq, "checkpoint does not follow the chain's previous checkpoint: a checkpoint deleted or edited"))
        if (c.scope, c.cut_seq, c.cut_hash) in named:
            named.discard((c.scope, c.cut_seq, c.cut_hash))
        else:
            problems.append(AuditProblem(c.scope, None, c.cut_seq, "checkpoint not the one the retention chain recorded at the cut"))
        previous = c
    for name, seq, _ in sorted(named):
        problems.append(AuditProblem(name, None, seq, "the retention chain recorded a cut of this chain but its checkpoint is gone"))
    problems.extend(_emptied_chain_problems(scope, starts))
    return problems


def _emptied_chain_problems(scope: str | None, starts: dict[str, ChainStart]) -> Iterable[AuditProblem]:
    """Cut chains with no entry left: their head must name what their last checkpoint
    does. By subqueries (an index probe per cut chain), not lists of every scope."""
    cut = AuditCheckpoint.objects.values("scope")
    if scope is not None:
        cut = cut.filter(scope=scope)
    emptied = AuditChain.objects.filter(scope__in=cut).filter(~Exists(AuditEntry.objects.filter(scope=OuterRef("scope"))))
    for name, seq, last in emptied.values_list("scope", "seq", "hash").iterator(chunk_size=2000):
        if ChainStart(seq, last) != starts.get(name):
            cut_at = starts[name].seq if name in starts else "?"
            yield AuditProblem(name, None, None, f"head names seq {seq} but the chain was cut at seq {cut_at} and has no entries (entries deleted)")
    headless = cut.exclude(scope__in=AuditChain.objects.values("scope")).exclude(Exists(AuditEntry.objects.filter(scope=OuterRef("scope"))))
    for name in sorted(set(headless.values_list("scope", flat=True))):
        yield AuditProblem(name, None, None, "a cut chain has neither entries nor a head (head deleted)")
