"""`manage.py validate_graph FILE [--json] [--estimate]`: check a graph spec file (and estimate its worst-case cost); exit 0 when valid, else 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from builder.validation import validate_spec
from runs.reports.estimate import estimate_spec
from runs.reports.formatting import format_usd


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
        parser.add_argument(
            "--estimate",
            action="store_true",
            help="also print each node's worst-case cost (tokens, USD) and the costliest path from start to an end",
        )

    def handle(self, *args: Any, file: str, as_json: bool, estimate: bool = False, **options: Any) -> None:
        data = self.load(file, as_json)
        result = validate_spec(data)
        report = estimate_spec(result.spec, result.configs) if estimate and result.ok and result.spec is not None else None
        if as_json:
            out = result.as_dict()
            if report is not None:
                out["estimate"] = report
            self.stdout.write(json.dumps(out, indent=2))
        else:
            if result.ok:
                self.stdout.write("valid")
            for issue in result.issues:
                self.stdout.write(str(issue))
            # Warnings go to stderr so stdout stays exactly "valid" for a valid graph.
            for warning in result.warnings:
                self.stderr.write(f"warning: {warning}")
            if report is not None:
                self.write_estimate(report)
        if not result.ok:
            sys.exit(1)

    def write_estimate(self, report: dict[str, Any]) -> None:
        """The estimate as a table plus the costliest path."""
        self.stdout.write("")
        self.stdout.write("estimate (worst case of one execution: prompts from their templates, full max_tokens):")
        rows = [("node", "kind", "model", "tokens", "usd")] + [
            (n["node_id"], n["kind"], n["model"] or "", f"{n['tokens']:,}", _usd(n["usd"])) for n in report["nodes"]
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for row in rows:
            self.stdout.write("  " + "  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
        path = report["costliest_path"]
        line = f"costliest path: {' -> '.join(path['nodes'])}: {path['tokens']:,} tokens, {_usd(path['usd'])}"
        if path["unpriced"]:
            line += f" plus unknown-price node(s) {', '.join(path['unpriced'])}"
        self.stdout.write(line)
        if path["loops"]:
            self.stdout.write(f"  (loops counted max_iterations + 1 times: {', '.join(path['loops'])})")

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


def _usd(value: str | None) -> str:
    return format_usd(value)
