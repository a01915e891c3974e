"""``manage.py prune_runs [--dry-run] [--batch-size N]``: delete finished runs past their retention (runs.retention)."""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from runs.retention import PruneReport, prune


class Command(BaseCommand):
    help = (
        "Prune finished runs past their graph's retention (BALLAST_RETENTION_DAYS, BALLAST_TEST_RUN_RETENTION_DAYS, "
        "a graph's retention_days), in batches, keeping daily cost rollups; cut the audit chains of pruned runs "
        "after BALLAST_AUDIT_RETENTION_DAYS, leaving tombstones, and the older entries of long-lived audit chains, leaving "
        "checkpoints. --dry-run says what would go."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted; delete nothing.")
        parser.add_argument("--batch-size", type=int, default=None, help="Runs per transaction (default BALLAST_RETENTION_BATCH).")
        parser.add_argument("--max-batches", type=int, default=None, help="Stop after N batches (due runs are left for the next call).")
        parser.add_argument("--json", action="store_true", help="Print the report as one JSON object.")

    def handle(self, *args: Any, dry_run: bool, batch_size: int | None, **opts: Any) -> None:
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be 1 or more")
        report = prune(timezone.now(), dry_run=dry_run, batch_size=batch_size, max_batches=opts.get("max_batches"))
        if opts.get("json"):
            self.stdout.write(json.dumps(report.as_dict()))
        else:
            self.stdout.write(_summary(report))
        if report.refused_chains:
            raise CommandError(f"{len(report.refused_chains)} audit chain(s) did not verify and were kept: {', '.join(report.refused_chains[:20])}")


def _summary(r: PruneReport) -> str:
    verb = "would delete" if r.dry_run else "deleted"
    return (
        f"{verb} {r.runs} run(s) ({r.test_runs} test), {r.steps} step(s), {r.attempts} attempt(s), {r.events} event(s), "
        f"{r.state_keys} state row(s), {r.snapshot_versions} test snapshot version(s), {r.audit_chains} audit chain(s) "
        f"({r.audit_entries} entries), {r.audit_cut_entries} old entries of {r.audit_checkpoints} long-lived audit chain(s) "
        + ("to cut at checkpoints" if r.dry_run else "cut at checkpoints")
        + ("" if r.dry_run else f"; {r.rollups} cost rollup row(s) written in {r.batches} batch(es), longest {r.longest_batch_seconds:.3f} s")
        + ("; more is due (--max-batches reached)" if r.more else "")
    )
