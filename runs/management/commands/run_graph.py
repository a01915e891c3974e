"""``manage.py run_graph FILE [--input JSON] [--wait]``: publish a graph file and start a run."""
from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from builder.services import GraphInvalid, graph_import
from runs.engine.api import StateWriteRefused, drive_local, local_mode, workers_alive
from runs.formatting import format_decimal
from runs.models import TERMINAL_RUN_STATUSES, Run, RunStatus
from runs.services import RunInputInvalid, run_start


def run_summary(run: Run) -> dict:
    """The JSON printed for a finished or waiting run."""
    run.refresh_from_db()
    data = {"run": run.pk, "status": run.status, "state": run.state, "output": run.output, "error": run.error}
    if run.status == RunStatus.WAITING:
        data["approvals"] = [
            {"id": a.pk, "node_id": a.node_id, "purpose": a.purpose, "prompt": a.prompt}
            for a in run.approvals.filter(status="pending").order_by("id")
        ]
    data["cost_usd"] = None if run.cost_usd is None else format_decimal(run.cost_usd)
    data["tokens"] = {"input": run.input_tokens, "output": run.output_tokens}
    return data


def wait_or_drive(run: Run, queue, *, local: bool, wait: bool, timeout: float | None) -> Run:
    """Run in this process (``local``) or poll until the run ends or waits at a gate."""
    if local:
        drive_local(run.pk, queue=queue, timeout=timeout)
    elif wait:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = Run.objects.values_list("status", flat=True).get(pk=run.pk)
            if status in TERMINAL_RUN_STATUSES or status == RunStatus.WAITING:
                break
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(0.1)
    run.refresh_from_db()
    return run


class Command(BaseCommand):
    help = (
        "Validate and publish the graph in FILE, start a run and print its id. With no live "
        "qcluster the run executes in this process through the same engine and commits."
    )

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--input", default="{}", help="run input as a JSON object")
        parser.add_argument("--wait", action="store_true", help="wait for the run to finish (or wait at a gate) and print it as JSON")
        parser.add_argument("--timeout", type=float, default=None, help="seconds to wait at most")
        parser.add_argument("--in-process", action="store_true", help="execute here even when a qcluster is running")

    def handle(self, *args, **opts):
        try:
            spec = json.loads(Path(opts["file"]).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"{opts['file']}: {exc}") from None
        try:
            run_input = json.loads(opts["input"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not valid JSON: {exc}") from None
        try:
            version = graph_import(spec=spec, actor="cli")
        except GraphInvalid as exc:
            for issue in exc.issues:
                self.stderr.write(str(issue))
            sys.exit(1)
        local = opts["in_process"] or not workers_alive()
        with local_mode() if local else contextlib.nullcontext() as queue:
            try:
                run = run_start(version=version, run_input=run_input, actor="cli")
            except RunInputInvalid as exc:
                for err in exc.errors:
                    self.stderr.write(f"{err['field']}: {err['message']}")
                sys.exit(1)
            except StateWriteRefused as exc:  # the initial state passes BALLAST_MAX_STATE_BYTES
                self.stderr.write(exc.message)
                sys.exit(1)
            self.stdout.write(str(run.pk))
            self.stdout.flush()
            run = wait_or_drive(run, queue, local=local, wait=opts["wait"], timeout=opts["timeout"])
        if opts["wait"] or local:
            if opts["wait"]:
                self.stdout.write(json.dumps(run_summary(run), indent=2, default=str))
            if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
                sys.exit(1)

