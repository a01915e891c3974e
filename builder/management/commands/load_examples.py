"""``manage.py load_examples [DIR]``: validate and publish every example graph (idempotent)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from builder.services import GraphInvalid, graph_import


class Command(BaseCommand):
    help = "Publish every *.json graph in DIR (default: examples/). Re-running publishes nothing new."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", nargs="?", default=str(settings.BASE_DIR / "examples"))

    def handle(self, *args: Any, **opts: Any) -> None:
        files = sorted(Path(opts["directory"]).glob("*.json"))
        if not files:
            raise CommandError(f"no *.json graphs in {opts['directory']}")
        for path in files:
            try:
                imported = graph_import(spec=json.loads(path.read_text()), actor="load_examples")
            except GraphInvalid as exc:
                raise CommandError(f"{path.name}: {exc}") from None
            kept = " (its draft has unpublished edits: left as it was)" if imported.draft_kept else ""
            self.stdout.write(f"{path.name}: {imported.version}{kept}")
