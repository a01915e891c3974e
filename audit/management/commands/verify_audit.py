"""``manage.py verify_audit``: recompute the audit hash chains; exit 1 on any edit, deletion or reordering."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.chain import audit_verify


class Command(BaseCommand):
    help = "Verify the audit log's hash chains (edits, deletions, reordering, cut-off ends). Exit status 1 when broken."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--scope", help="Verify one chain only (e.g. run:42, graph:3, user:1, auth).")

    def handle(self, *args: Any, **opts: Any) -> None:
        report = audit_verify(scope=opts.get("scope"))
        for problem in report.problems:
            self.stderr.write(f"TAMPERED {problem}")
        if not report.ok:
            raise CommandError(f"audit log is NOT intact: {len(report.problems)} problem(s) in {report.entries} entries, {report.chains} chain(s)")
        self.stdout.write(f"audit log intact: {report.entries} entries in {report.chains} chain(s)")
