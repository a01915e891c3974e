"""``manage.py approve RUN_ID [--reject] [--comment TEXT] [--timeout S]``: decide a run's pending approval.

After deciding it waits for the run and exits with run_graph's codes (0 succeeded, 1
failed or cancelled, 3 waiting at an approval gate, 4 parked for a decision, 5 timed
out); an error (no such approval, a wrong decision) exits 1 and names the pending ones.
"""
from __future__ import annotations

import contextlib
import getpass
import json
import sys
import time
from collections import deque
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import ApprovalError, approval_decide
from builder.management.commands.run_graph import EXIT_SUCCEEDED, exit_code, run_summary, wait_or_drive
from runs.engine.api import StateWriteRefused, drive_local, local_mode, workers_alive
from runs.models import TERMINAL_RUN_STATUSES, Run

POLL_SECONDS = 0.1


def describe(request: ApprovalRequest) -> str:
    """``12 (gate at node review)``: how errors name an approval request."""
    return f"{request.pk} ({request.purpose} at node {request.node_id})"


def pending_text(requests: list[ApprovalRequest]) -> str:
    """The pending requests of a run for an error message ("none" when there are none)."""
    return ", ".join(describe(r) for r in requests) or "none"


class Command(BaseCommand):
    help = (
        "Approve (or --reject) the pending approval of RUN_ID as the operator at this terminal. "
        "Recovery requests take --decision retry|skip|fail (--output JSON for skip). With no live "
        "qcluster the run continues in this process. Exit codes as run_graph --wait: 0 succeeded, "
        "1 failed, cancelled or an error, 3 waiting at an approval gate, 4 parked, 5 --timeout ran out."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reject", action="store_true")
        parser.add_argument("--decision", choices=["approve", "reject", "retry", "skip", "fail"])
        parser.add_argument("--comment", default="")
        parser.add_argument("--output", default=None, help="for --decision skip: the state updates (JSON object) the step writes; for an agent tool call, the result the model is given")
        parser.add_argument("--approval", type=int, default=None, help="the approval id, when the run waits at several")
        parser.add_argument("--no-wait", action="store_true", help="do not continue or wait for the run here")
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            help="seconds to wait at most: for the run to reach a pending approval (with no live qcluster the run "
            "is driven here meanwhile), then for it to finish or stop again. Default: no pending approval is an "
            "error at once, and the wait after deciding has no limit",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        timeout = opts["timeout"]
        if timeout is not None and timeout < 0:
            raise CommandError(f"--timeout must be 0 or more seconds, not {timeout}")
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            run = Run.objects.get(pk=opts["run_id"])
        except Run.DoesNotExist:
            raise CommandError(f"run {opts['run_id']} does not exist") from None
        output = None
        if opts["output"]:
            try:
                output = json.loads(opts["output"])
            except json.JSONDecodeError as exc:
                raise CommandError(f"--output is not valid JSON: {exc}") from None
        local = not opts["no_wait"] and not workers_alive()
        actor = f"cli:{getpass.getuser()}"
        with local_mode() if local else contextlib.nullcontext() as queue:
            request = self._request(run, opts["approval"], deadline=deadline, local=local, queue=queue)
            decision = opts["decision"] or ("reject" if opts["reject"] else ("approve" if request.purpose == "gate" else None))
            if decision is None:
                raise CommandError(f"approval {describe(request)} is a recovery request: pass --decision retry, skip or fail")
            try:
                approval_decide(approval_id=request.pk, decision=decision, actor=actor, comment=opts["comment"], output=output)
            except (ApprovalError, StateWriteRefused) as exc:
                raise CommandError(f"approval {describe(request)}: {exc}") from None
            # As run_graph --wait: stdout is one JSON document, what happened meanwhile goes to stderr.
            self.stderr.write(f"approval {request.pk} on run {run.pk}: {decision} by {actor}")
            if opts["no_wait"]:
                self.stdout.write(json.dumps({"approval": request.pk, "run": run.pk, "decision": decision, "actor": actor}))
                return
            run = wait_or_drive(run, queue, local=local, wait=True, timeout=_remaining(deadline))
        summary = run_summary(run)
        self.stdout.write(json.dumps(summary, indent=2, default=str))
        code = exit_code(summary)
        if code != EXIT_SUCCEEDED:
            sys.exit(code)

    def _request(self, run: Run, approval_id: int | None, *, deadline: float | None, local: bool, queue: deque[int] | None) -> ApprovalRequest:
        """The one pending request to decide, waiting until ``deadline`` (monotonic) for
        it to appear. Raises CommandError naming the pending requests when there is no
        such request, or several and no ``approval_id``."""
        while True:
            pending = list(ApprovalRequest.objects.filter(run=run, status=ApprovalStatus.PENDING).order_by("id"))
            chosen = [r for r in pending if approval_id is None or r.pk == approval_id]
            if len(chosen) == 1:
                return chosen[0]
            if len(chosen) > 1:
                raise CommandError(f"run {run.pk} waits at several approvals: {pending_text(pending)}; pass --approval ID")
            run.refresh_from_db()
            remaining = _remaining(deadline)
            if run.is_terminal or remaining is None or remaining <= 0:
                raise CommandError(self._nothing_pending(run, approval_id, pending, waited=deadline is not None))
            if local:
                # Nobody else may be moving the run: drive it here until it stops for a
                # person (this also takes back its steps a killed process left running).
                assert queue is not None, "local: the queue of local_mode()"
                drive_local(run.pk, queue=queue, timeout=remaining)
            time.sleep(min(POLL_SECONDS, _remaining(deadline) or 0))

    def _nothing_pending(self, run: Run, approval_id: int | None, pending: list[ApprovalRequest], *, waited: bool) -> str:
        after = " after waiting --timeout" if waited else ""
        if approval_id is not None:
            other = ApprovalRequest.objects.filter(pk=approval_id).first()
            if other is not None and other.run_id != run.pk:
                why = f"approval {approval_id} belongs to run {other.run_id}"
            elif other is not None:
                why = f"approval {describe(other)} was {other.status} by {other.decided_by_name or 'the engine'}"
            else:
                why = f"approval {approval_id} does not exist"
            return f"run {run.pk} has no pending approval {approval_id}{after} ({why}); pending: {pending_text(pending)}"
        status = run.status if run.status in TERMINAL_RUN_STATUSES else f"{run.status}, no step waits for a person"
        decided = ApprovalRequest.objects.filter(run=run).exclude(status=ApprovalStatus.PENDING).order_by("-id").first()
        last = f"; last approval {describe(decided)} was {decided.status} by {decided.decided_by_name or 'the engine'}" if decided else ""
        return f"run {run.pk} has no pending approval{after} (status {status}){last}"


def _remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (monotonic), never below 0; None without one."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())
