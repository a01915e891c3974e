"""``manage.py run_graph FILE [--input JSON] [--wait]``: publish a graph file and start a run.

With ``--wait`` the exit code says where the run stopped (:func:`exit_code`); ``approve``
shares it.
"""
from __future__ import annotations

import contextlib
import json
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from builder.services import GraphInvalid, graph_import
from runs.engine.api import StateWriteRefused, drive_local, local_mode, workers_alive
from runs.models import TERMINAL_RUN_STATUSES, Run, RunStatus
from runs.reports.formatting import format_decimal
from runs.selectors import CLI_ACTOR, run_status_now
from runs.services import RunInputInvalid, run_start

# Exit codes of a command that waited for a run (2 stays argparse's usage error).
EXIT_SUCCEEDED = 0
EXIT_FAILED = 1  # failed or cancelled
EXIT_APPROVAL = 3  # waits at an approval gate
EXIT_PARKED = 4  # parked for a decision: a step not safe to repeat was interrupted by a crash
EXIT_TIMED_OUT = 5  # still queued or running when --timeout ran out


def exit_code(summary: dict) -> int:
    """Where a waited-for run stopped, from its :func:`run_summary`, as an exit code: 0
    succeeded, 1 failed or cancelled, 3 waiting at an approval gate, 4 parked for a
    decision after a crash (a parked step outranks a gate elsewhere in the run), 5
    neither finished nor waiting (the wait timed out)."""
    status = summary["status"]
    if status == RunStatus.SUCCEEDED:
        return EXIT_SUCCEEDED
    if status in (RunStatus.FAILED, RunStatus.CANCELLED):
        return EXIT_FAILED
    if status == RunStatus.WAITING:
        return EXIT_PARKED if summary["waiting_for"] == "decision" else EXIT_APPROVAL
    return EXIT_TIMED_OUT


def run_summary(run: Run) -> dict:
    """The JSON printed for a finished or waiting run: ``run``, ``status`` and
    ``waiting_for`` (read together in one query), state, output, error, the pending
    approvals of a run that waits for a person, cost and tokens."""
    run.refresh_from_db()
    status, waiting_for = run_status_now(run_id=run.pk)
    data = {"run": run.pk, "status": status, "waiting_for": waiting_for, "state": run.state, "output": run.output, "error": run.error}
    if status == RunStatus.WAITING or waiting_for:
        data["approvals"] = [
            {"id": a.pk, "node_id": a.node_id, "purpose": a.purpose, "prompt": a.prompt}
            for a in run.approvals.filter(status="pending").order_by("id")
        ]
    data["cost_usd"] = None if run.cost_usd is None else format_decimal(run.cost_usd)
    data["tokens"] = {"input": run.input_tokens, "output": run.output_tokens}
    return data


def wait_or_drive(run: Run, queue: deque[int] | None, *, local: bool, wait: bool, timeout: float | None) -> Run:
    """Run in this process (``local``) or poll until the run ends or waits at a gate."""
    if local:
        assert queue is not None, "local: the queue of local_mode()"
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

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--input", default="{}", help="run input as a JSON object")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="wait for the run to finish or stop for a person, print it as JSON; exit 0 succeeded, 1 failed or "
            "cancelled, 3 waiting at an approval gate, 4 parked for a decision after a crash, 5 --timeout ran out",
        )
        parser.add_argument("--timeout", type=float, default=None, help="seconds to wait at most")
        parser.add_argument("--in-process", action="store_true", help="execute here even when a qcluster is running")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            spec = json.loads(Path(opts["file"]).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"{opts['file']}: {exc}") from None
        try:
            run_input = json.loads(opts["input"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not valid JSON: {exc}") from None
        try:
            imported = graph_import(spec=spec, actor="cli")
        except GraphInvalid as exc:
            for issue in exc.issues:
                self.stderr.write(str(issue))
            sys.exit(1)
        version = imported.version
        if imported.draft_kept:
            self.stderr.write(
                f"graph {version.graph.name!r}: its draft has unpublished edits, left as they are; "
                f"this file runs as version {version.number}"
            )
        local = opts["in_process"] or not workers_alive()
        with local_mode() if local else contextlib.nullcontext() as queue:
            try:
                run = run_start(version=version, run_input=run_input, actor=CLI_ACTOR)
            except RunInputInvalid as exc:
                for err in exc.errors:
                    self.stderr.write(f"{err['field']}: {err['message']}")
                sys.exit(1)
            except StateWriteRefused as exc:  # the initial state passes BALLAST_MAX_STATE_BYTES
                self.stderr.write(exc.message)
                sys.exit(1)
            if opts["wait"]:
                # stdout stays one JSON document (its "run" is the id); the id goes to stderr at once.
                self.stderr.write(f"run {run.pk} started")
                self.stderr.flush()
            else:
                self.stdout.write(str(run.pk))
                self.stdout.flush()
            run = wait_or_drive(run, queue, local=local, wait=opts["wait"], timeout=opts["timeout"])
        if opts["wait"]:
            summary = run_summary(run)
            self.stdout.write(json.dumps(summary, indent=2, default=str))
            code = exit_code(summary)
            if code != EXIT_SUCCEEDED:
                sys.exit(code)
        if local and run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            sys.exit(EXIT_FAILED)

