"""`manage.py export_schema [--out FILE]`: print the graph and node-config JSON Schemas for the builder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from builder.validation import export_schemas


class Command(BaseCommand):
    help = 'Print {"graph": GraphSpec schema, "nodes": {kind: {config, description, handles}}} as JSON.'
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--out", help="write to this file instead of stdout")

    def handle(self, *args: Any, out: str | None, **options: Any) -> None:
        text = json.dumps(export_schemas(), indent=2, sort_keys=True)
        if out:
            Path(out).write_text(text + "\n", encoding="utf-8")
            self.stdout.write(f"wrote {out}")
        else:
            self.stdout.write(text)
