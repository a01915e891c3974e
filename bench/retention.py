"""Pruning measured (issue 27): fill a migrated database with finished runs (steps, attempts,
events, state rows, a hash-chained audit chain each; optionally long-lived audit chains,
mostly past the audit retention), prune them all in batches with
runs.retention.prune, and print rows per second, the longest batch transaction (the
longest any lock of the prune was held) and whether verify_audit passes after it.

Usage (a database of its own; it is filled and emptied):
``DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballast_retention_bench .venv/bin/python
-m bench.retention --runs 1000 --events 10 [--batch 200]`` after ``manage.py migrate`` on it.
Prints one JSON line. The rows are written by bulk INSERTs (not by the engine: the
engine's own cost is measured by the other cases); the audit entries are hashed as
audit.chain writes them, so verification is real.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from decimal import Decimal

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballast.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from audit.chain import GENESIS, audit_verify, hash_of  # noqa: E402
from audit.models import AuditChain, AuditEntry  # noqa: E402
from graphs.models import Graph, GraphVersion  # noqa: E402
from runs.models import Run, RunEvent, RunStateKey, Step, StepAttempt  # noqa: E402
from runs.retention import PruneReport, prune  # noqa: E402

STEPS = ("start", "ask", "end")


def fill(runs: int, events: int, chunk: int = 500) -> dict[str, int]:
    """``runs`` succeeded runs finished 30 days ago, each with 3 steps and attempts (the
    llm one priced), ``events`` events, 2 state rows and a 4-entry audit chain."""
    graph, _ = Graph.objects.get_or_create(name="retention-bench")
    version, _ = GraphVersion.objects.get_or_create(graph=graph, number=1, defaults={"spec": {}, "content_hash": "x" * 64})
    old = timezone.now() - timedelta(days=30)
    for first in range(0, runs, chunk):
        n = min(chunk, runs - first)
        with transaction.atomic():
            made = Run.objects.bulk_create(
                [Run(graph_version=version, status="succeeded", finished_at=old, started_at=old) for _ in range(n)]
            )
            steps = Step.objects.bulk_create(
                [Step(run=r, node_id=node, status="succeeded", attempt=1) for r in made for node in STEPS]
            )
            StepAttempt.objects.bulk_create(
                [
                    StepAttempt(
                        step=s, number=1, status="succeeded", started_at=old, finished_at=old,
                        usage={"provider": "mock", "model": "mock-1", "input_tokens": 10, "output_tokens": 5} if s.node_id == "ask" else None,
                        cost_usd=Decimal("0.0001") if s.node_id == "ask" else None,
                    )
                    for s in steps
                ]
            )  # fmt: skip
            RunEvent.objects.bulk_create([RunEvent(run=r, seq=i + 1, kind="step_started", data={}) for r in made for i in range(events)])
            RunStateKey.objects.bulk_create([RunStateKey(run=r, key=k, seq=0, value=1) for r in made for k in ("a", "b")])
            entries, heads = [], []
            for r in made:
                prev = GENESIS
                for seq in range(1, 5):
                    e = AuditEntry(
                        actor_type="worker", actor="bench", action="step.commit", object_type="run", object_id=str(r.pk),
                        data={"n": seq}, created_at=old, scope=f"run:{r.pk}", seq=seq, prev_hash=prev,
                    )  # fmt: skip
                    e.hash = hash_of(e)
                    prev = e.hash
                    entries.append(e)
                heads.append(AuditChain(scope=f"run:{r.pk}", seq=4, hash=prev))
            AuditEntry.objects.bulk_create(entries)
            AuditChain.objects.bulk_create(heads)
    return {
        "runs": Run.objects.count(), "steps": Step.objects.count(), "attempts": StepAttempt.objects.count(),
        "events": RunEvent.objects.count(), "state_keys": RunStateKey.objects.count(), "audit_entries": AuditEntry.objects.count(),
    }  # fmt: skip


def fill_long_lived(entries: int, chains: int, chunk: int = 5000) -> None:
    """``entries`` audit entries spread over ``chains`` long-lived chains (``user:<n>``
    scopes), hashed and linked as audit.chain writes them: nine in ten written 30 days ago
    (past the retention: the cut deletes them), the newest tenth of each chain today."""
    old, today = timezone.now() - timedelta(days=30), timezone.now()
    per_chain = max(1, entries // max(1, chains))
    for c in range(chains):
        scope, prev = f"user:bench-{c}", GENESIS
        for first in range(1, per_chain + 1, chunk):
            batch = []
            for seq in range(first, min(per_chain, first + chunk - 1) + 1):
                e = AuditEntry(
                    actor_type="system", actor="bench", action="token.use", object_type="", object_id="", data={"n": seq},
                    created_at=old if seq <= per_chain * 9 // 10 else today, scope=scope, seq=seq, prev_hash=prev,
                )  # fmt: skip
                e.hash = hash_of(e)
                prev = e.hash
                batch.append(e)
            AuditEntry.objects.bulk_create(batch)
        AuditChain.objects.create(scope=scope, seq=per_chain, hash=prev)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--long-lived", type=int, default=0, help="Audit entries in long-lived chains (nine in ten past the retention: cut at checkpoints).")
    parser.add_argument("--chains", type=int, default=10, help="How many long-lived chains share --long-lived.")
    args = parser.parse_args()
    settings.BALLAST_RETENTION_DAYS = 7
    settings.BALLAST_AUDIT_RETENTION_DAYS = 7
    started = time.monotonic()
    rows = fill(args.runs, args.events)
    if args.long_lived:
        fill_long_lived(args.long_lived, args.chains)
        rows["audit_entries"] = AuditEntry.objects.count()
    filled = time.monotonic() - started
    batches: list[float] = []
    last = [time.monotonic()]

    def on_batch(report: PruneReport) -> None:
        now = time.monotonic()
        batches.append(now - last[0])
        last[0] = now
        if len(batches) % 25 == 0:  # progress on stderr: a long prune shows its rate as it goes
            print(json.dumps({"batches": len(batches), "runs": report.runs, "events": report.events,
                              "longest": round(report.longest_batch_seconds, 3), "load": os.getloadavg()}), file=sys.stderr, flush=True)

    started = time.monotonic()
    report = prune(timezone.now(), batch_size=args.batch, on_batch=on_batch)
    took = time.monotonic() - started
    deleted = report.runs + report.steps + report.attempts + report.events + report.state_keys + report.audit_entries + report.audit_cut_entries
    started = time.monotonic()
    verified = audit_verify()
    verify_took = time.monotonic() - started
    print(json.dumps({
        "case": "retention_prune", "db": connection.vendor, "load": os.getloadavg(), "cpus": os.cpu_count(),
        "filled": rows, "fill_seconds": round(filled, 1), "batch_size": args.batch,
        "deleted_rows": deleted, "report": report.as_dict(), "prune_seconds": round(took, 2),
        "rows_per_second": round(deleted / took) if took else None,
        "longest_lock_seconds": round(report.longest_batch_seconds, 3),
        "median_batch_seconds": round(sorted(batches)[len(batches) // 2], 3) if batches else None,
        "audit_ok": verified.ok, "audit_problems": len(verified.problems), "verify_seconds": round(verify_took, 2),
        "left": {"runs": Run.objects.count(), "events": RunEvent.objects.count(), "audit_entries": AuditEntry.objects.exclude(scope="retention").count()},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
