"""``manage.py approve RUN_ID [--reject] [--comment TEXT]``: decide a run's pending approval."""
from __future__ import annotations

import contextlib
import getpass
import json
import sys

from django.core.management.base import BaseCommand, CommandError

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import ApprovalError, approval_decide
from runs.engine.api import StateWriteRefused, local_mode, workers_alive
from runs.management.commands.run_graph import run_summary, wait_or_drive
from runs.models import Run


class Command(BaseCommand):
    help = (
        "Approve (or --reject) the pending approval of RUN_ID as the operator at this terminal. "
        "Recovery requests take --decision retry|skip|fail (--output JSON for skip). With no live "
        "qcluster the run continues in this process."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reject", action="store_true")
        parser.add_argument("--decision", choices=["approve", "reject", "retry", "skip", "fail"])
        parser.add_argument("--comment", default="")
        parser.add_argument("--output", default=None, help="state updates (JSON object) for --decision skip")
        parser.add_argument("--approval", type=int, default=None, help="the approval id, when the run waits at several")
        parser.add_argument("--no-wait", action="store_true", help="do not continue or wait for the run here")

    def handle(self, *args, **opts):
        try:
            run = Run.objects.get(pk=opts["run_id"])
        except Run.DoesNotExist:
            raise CommandError(f"run {opts['run_id']} does not exist") from None
        pending = ApprovalRequest.objects.filter(run=run, status=ApprovalStatus.PENDING).order_by("id")
        if opts["approval"]:
            pending = pending.filter(pk=opts["approval"])
        requests = list(pending)
        if not requests:
            decided = ApprovalRequest.objects.filter(run=run).exclude(status=ApprovalStatus.PENDING).order_by("-id").first()
            if decided:
                raise CommandError(f"run {run.pk} has no pending approval (approval {decided.pk} was {decided.status} by {decided.decided_by_name})")
            raise CommandError(f"run {run.pk} has no pending approval (status {run.status})")
        if len(requests) > 1:
            ids = ", ".join(f"{r.pk} ({r.node_id})" for r in requests)
            raise CommandError(f"run {run.pk} waits at several approvals: {ids}; pass --approval ID")
        request = requests[0]
        decision = opts["decision"] or ("reject" if opts["reject"] else ("approve" if request.purpose == "gate" else None))
        if decision is None:
            raise CommandError("this is a recovery request: pass --decision retry, skip or fail")
        output = None
        if opts["output"]:
            try:
                output = json.loads(opts["output"])
            except json.JSONDecodeError as exc:
                raise CommandError(f"--output is not valid JSON: {exc}") from None
        local = not opts["no_wait"] and not workers_alive()
        actor = f"cli:{getpass.getuser()}"
        with local_mode() if local else contextlib.nullcontext() as queue:
            try:
                approval_decide(approval_id=request.pk, decision=decision, actor=actor, comment=opts["comment"], output=output)
            except (ApprovalError, StateWriteRefused) as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"approval {request.pk} on run {run.pk}: {decision} by {actor}")
            if opts["no_wait"]:
                return
            run = wait_or_drive(run, queue, local=local, wait=True, timeout=None)
        self.stdout.write(json.dumps(run_summary(run), indent=2, default=str))
        if run.status in ("failed", "cancelled"):
            sys.exit(1)

