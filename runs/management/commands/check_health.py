"""``manage.py check_health [--host NAME] [--json]``: a worker host's liveness probe (exit 0 when its workers are alive)."""
from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand
from django.db import DatabaseError

from runs.engine import api as engine_api


class Command(BaseCommand):
    help = (
        "Exit 0 when this host's worker clusters are alive: a qcluster of this host sent its "
        "heartbeat recently (and its process exists) and, on PostgreSQL, the host heartbeat is "
        "fresh on the database's clock. Otherwise exit 1 with a one-line reason on stderr. "
        "For a Docker HEALTHCHECK or a Kubernetes liveness probe of a worker container."
    )
    # A probe run every few seconds: Django's system checks cost time and print their
    # warnings (a missing front-end build) before the one-line answer.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=None, help="The worker host to judge (default: this machine's host name, as qcluster registers it).")
        parser.add_argument("--json", action="store_true", help="Print this host's detail (clusters, heartbeat ages, reason) as JSON on stdout.")

    def handle(self, *args: Any, **options: Any) -> None:
        host = options["host"] or engine_api.HOST
        try:
            health = engine_api.workers_health(host=host)
        except DatabaseError as exc:
            reason = f"database unreachable: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
            if options["json"]:
                self.stdout.write(json.dumps({"host": host, "alive": False, "reason": reason}))
            self.stderr.write(reason)
            sys.exit(1)
        entry = next(e for e in health["hosts"] if e["host"] == host)
        if options["json"]:
            detail = entry | {key: health[key] for key in ("heartbeat_window_seconds", "host_silent_seconds", "host_heartbeats")}
            self.stdout.write(json.dumps(detail, sort_keys=True))
        if not entry["alive"]:
            self.stderr.write(entry["reason"])
            sys.exit(1)
        if not options["json"]:
            self.stdout.write(f"ok: {entry['clusters_alive']} worker cluster(s) alive on {host}")
