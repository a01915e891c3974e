"""``manage.py qcluster``: django-q2's worker cluster with Ballast's signal handling and bounded graceful stop.

Replaces django-q2's command of the same name (``runs`` comes before ``django_q`` in
INSTALLED_APPS). SIGTERM or SIGINT, to the main process or to its whole process group,
stops the cluster within BALLAST_STOP_GRACE_SECONDS (runs/engine/cluster.py).
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from runs import retention_job
from runs.engine import api as engine
from runs.tools.checks import TOOL_MODULES_TAG


class Command(BaseCommand):
    help = "Start a worker cluster (django-q2) that runs Ballast's steps; SIGTERM stops it gracefully."
    # Django's system checks import the URLconf, so every view, DRF and the admin: seconds
    # of a restarted worker's start for nothing it runs. `migrate`, `check` and the web
    # server run them all; a worker runs one, the tool modules' (runs.tools.checks): a
    # module of BALLAST_EXTRA_TOOL_MODULES that fails to import stops it at start, named,
    # instead of failing its first step. The modules it imports are the ones every step
    # needs, imported once here before django-q2 forks its workers.
    requires_system_checks: list[str] = [TOOL_MODULES_TAG]

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run-once", action="store_true", help="Start, then stop at once.")
        parser.add_argument("-n", "--name", dest="cluster_name", default=None, help="Cluster (queue) name instead of Q_CLUSTER's.")
        parser.add_argument(
            "--grace",
            type=float,
            default=None,
            help=f"Seconds in-flight steps get to finish on SIGTERM (default BALLAST_STOP_GRACE_SECONDS, {settings.BALLAST_STOP_GRACE_SECONDS:g}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        settings.SECRET_KEY  # noqa: B018  (django-q2 signs tasks: fail early without a key)
        if options["cluster_name"]:
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        _arm_retention()
        code = engine.cluster_serve(grace_seconds=options["grace"], run_once=options["run_once"])
        # Everything is stopped and deregistered: leave without the interpreter's own
        # teardown, which took 1-2 s here, time the grace period does not have.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _arm_retention() -> None:
    """Make the retention job's due row when it is missing (runs.retention_job): a database
    that cannot be reached now must not stop the cluster, whose start waits for it; the next
    start arms it then."""
    try:
        retention_job.retention_job_arm(engine.db_now())
    except Exception:
        logging.getLogger("ballast.retention").exception("the retention job could not be armed at start; it is armed at the next start")
