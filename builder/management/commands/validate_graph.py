"""`manage.py validate_graph FILE [--json]`: check a graph spec file; exit 0 when valid, else 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from builder.validation import validate_spec


class Command(BaseCommand):
    help = (
        "Validate a graph spec (JSON file, or - for stdin). Prints 'valid' and exits 0, or one "
        "'node_id.field: message' line per error and exits 1. --json prints "
        '{"valid": bool, "errors": [...], "warnings": [...]}.'
    )
    # Validation is pure: no database, so skip the system checks (they may touch it).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", help="path of the graph spec JSON file, or - for stdin")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the result as JSON")

    def handle(self, *args: Any, file: str, as_json: bool, **options: Any) -> None:
        data = self.load(file, as_json)
        result = validate_spec(data)
        if as_json:
            self.stdout.write(json.dumps(result.as_dict(), indent=2))
        else:
            if result.ok:
                self.stdout.write("valid")
            for issue in result.issues:
                self.stdout.write(str(issue))
            # Warnings go to stderr so stdout stays exactly "valid" for a valid graph.
            for warning in result.warnings:
                self.stderr.write(f"warning: {warning}")
        if not result.ok:
            sys.exit(1)

    def load(self, file: str, as_json: bool) -> Any:
        """The parsed JSON of ``file``; on failure exit 1 with one line (or a JSON error)."""
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.fail(f"cannot read {file}: {reason}", "unreadable_file", as_json)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            self.fail(
                f"{file} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", "invalid_json", as_json
            )

    def fail(self, message: str, code: str, as_json: bool) -> None:
        """Report an unusable input file and exit 1."""
        if as_json:
            error = {"node_id": None, "field": "file", "message": message, "code": code}
            self.stdout.write(json.dumps({"valid": False, "errors": [error], "warnings": []}, indent=2))
            sys.exit(1)
        # CommandError exits with returncode 1 and prints "CommandError: <message>" to stderr.
        raise CommandError(message, returncode=1)
