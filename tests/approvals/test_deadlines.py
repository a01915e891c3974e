"""Approval deadlines: a due waiting step fires once through the claim by due time (timeout
edge, reassign, notify), never after a decision, and exactly once across a worker killed
while firing it (real SQLite and PostgreSQL, a real killed process)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core import mail
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.nodes import ApprovalNode, parse_duration
from approvals.services import approval_decide
from audit.models import AuditEntry
from builder.validation import validate_spec
from runs.engine import loop as engine_loop
from runs.engine.store import deadlines
from runs.engine.store.recovery_queries import due_pending_steps
from runs.models import Run, RunEvent, Step
from tests.support import engine
from tests.support.approvals import deadline_spec
from tests.support.bounded import wait_until
from tests.support.cluster import test_database_url
from tests.support.specs import continue_local, run_local

ROOT = Path(__file__).resolve().parents[2]




def overdue(run: Run) -> Step:
    """Move the gate's deadline into the past (as if its 2 s had gone by)."""
    step = Step.objects.get(run=run, node_id="review")
    Step.objects.filter(pk=step.pk).update(due_at=timezone.now() - timedelta(seconds=1))
    return step


def deadline_events(run: Run) -> list[dict]:
    return list(RunEvent.objects.filter(run=run, kind="step_deadline").values_list("data", flat=True))


# --- the kind and validation (no database) ---------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [("2s", 2), ("30m", 1800), ("4h", 14400), ("2d", 172800), ("1h30m", 5400), ("1w", 604800), (" 1.5h ", 5400)])
def test_durations_parse(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2", "soon", "2x", "0s", "400d", "1h and 2m"])
def test_bad_durations_are_refused_with_a_message(text):
    with pytest.raises(ValueError, match="duration|between|deadline"):
        parse_duration(text)


def test_only_a_deadline_that_times_out_has_a_timeout_handle():
    kind = ApprovalNode()
    config = kind.config_model.model_validate
    assert kind.output_handles(config({"deadline": "2s", "escalation": "timeout"})) == ["approved", "rejected", "timeout"]
    assert kind.output_handles(config({"deadline": "2s", "escalation": "notify"})) == ["approved", "rejected"]
    assert kind.output_handles(config({})) == ["approved", "rejected"]


def issues_of(spec: dict) -> list[tuple[str | None, str, str]]:
    return [(i.node_id, i.field, i.code) for i in validate_spec(spec).issues]


def test_a_timeout_deadline_requires_its_timeout_edge():
    assert issues_of(deadline_spec()) == []
    assert ("review", "handles.timeout", "unwired_handle") in issues_of(deadline_spec(wire_timeout=False))
    # No deadline: nothing to follow, so an edge on "timeout" names a handle the node lacks.
    assert any(code == "unknown_handle" for _, _, code in issues_of(deadline_spec(escalation="notify")))


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"deadline": "soon"}, "config.deadline"),
        ({"deadline": None}, "config.deadline"),  # timeout without a deadline
        ({"escalation": "reassign"}, "config.escalate_to_user"),  # reassign to nobody
        ({"escalation": "reassign", "escalate_to_user": "ada", "escalate_to_group": "finance"}, "config.escalate_to_user"),
        ({"escalation": "notify", "escalate_to_group": "finance"}, "config.escalation"),
    ],
)
def test_deadline_config_errors_are_structured_on_the_node_field(config, field):
    spec = deadline_spec(**({"escalation": "timeout"} | config))
    assert ("review", field, "invalid_deadline") in issues_of(spec)


# --- firing (SQLite and PostgreSQL) ----------------------------------------------------

pytestmark_db = pytest.mark.django_db(transaction=True)


@pytestmark_db
def test_no_deadline_means_never_due():
    run = run_local(deadline_spec(escalation="notify", deadline=None, wire_timeout=False))
    assert run.status == "waiting"
    assert Step.objects.get(run=run, node_id="review").due_at is None
    assert ApprovalRequest.objects.get(run=run).due_at is None


@pytestmark_db
def test_a_deadline_follows_the_timeout_edge_once_through_the_claim_by_due_time():
    run = run_local(deadline_spec())
    step = Step.objects.get(run=run, node_id="review")
    request = ApprovalRequest.objects.get(run=run)
    assert run.status == "waiting" and step.status == "waiting"
    # The deadline is the waiting step's own due row, copied to the request for the inbox.
    assert step.due_at is not None and request.due_at == step.due_at and request.escalation == "timeout"
    assert 1.0 < (step.due_at - timezone.now()).total_seconds() <= 2.0
    assert engine_loop.step_claim_due("w:1:1") is None  # not due yet: nothing fires
    assert deadline_events(run) == []

    overdue(run)
    with engine.local_mode():
        # One claim fires the deadline, then claims what it released: the timeout successor.
        claimed = engine_loop.step_claim_due("w:1:1")
        assert claimed is not None and claimed.node_id == "late"
        # Run it and the successor its commit leases to this worker (left running under a
        # live owner, it would wait out its lease).
        while claimed is not None:
            claimed = engine_loop.run_claimed(claimed)
    run = continue_local(run, [])
    assert run.status == "succeeded" and run.state["sent"] == "late"
    assert run.state["approval"]["decision"] == "timeout" and run.state["approval"]["by"] == "deadline"
    request.refresh_from_db()
    assert (request.status, request.decision, request.decided_by_name) == ("expired", "timeout", "deadline")
    assert [e["action"] for e in deadline_events(run)] == ["timeout"]
    assert AuditEntry.objects.filter(action="step.deadline", scope=f"run:{run.pk}").count() == 1
    assert Step.objects.get(pk=step.pk).due_at is None
    # Firing again finds nothing: the step is no longer waiting.
    assert deadlines.step_fire_due(step.pk, worker="w:1:1") == []
    assert Step.objects.filter(run=run, node_id="late").count() == 1


@pytestmark_db
def test_a_decision_first_means_the_deadline_never_fires():
    run = run_local(deadline_spec())
    step = overdue(run)
    approval_decide(approval_id=ApprovalRequest.objects.get(run=run).pk, decision="approve", actor="ada")
    assert deadlines.step_fire_due(step.pk, worker="w:1:1") == []
    run = continue_local(run, list(Step.objects.filter(run=run, status="pending").values_list("id", flat=True)))
    assert run.state["sent"] == "yes" and deadline_events(run) == []


@pytestmark_db
def test_a_deadline_that_fired_refuses_a_late_decision():
    from approvals.services import AlreadyDecided

    run = run_local(deadline_spec())
    step = overdue(run)
    deadlines.step_fire_due(step.pk, worker="w:1:1")
    with pytest.raises(AlreadyDecided, match="expired by deadline"):
        approval_decide(approval_id=ApprovalRequest.objects.get(run=run).pk, decision="approve", actor="ada")


@pytestmark_db
def test_reassign_gives_the_request_to_the_group_and_emails_it(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    finance = Group.objects.create(name="finance")
    User.objects.create_user("fin", email="fin@example.com").groups.add(finance)
    run = run_local(deadline_spec("reassign", wire_timeout=False, escalate_to_group="finance"))
    request = ApprovalRequest.objects.get(run=run)
    mail.outbox.clear()
    step = overdue(run)
    assert engine_loop.step_claim_due("w:1:1") is None
    request.refresh_from_db()
    assert (request.status, request.approver_groups, request.principals) == ("pending", ["finance"], "|group:finance|")
    assert request.escalated_at is not None and "reassigned to group finance" in request.last_change
    assert [m.to for m in mail.outbox] == [["fin@example.com"]] and mail.outbox[0].subject.startswith("[Ballast] Overdue")
    assert Step.objects.get(pk=step.pk).status == "waiting" and Step.objects.get(pk=step.pk).due_at is None
    assert [e["action"] for e in deadline_events(run)] == ["reassign"]
    assert engine_loop.step_claim_due("w:1:1") is None and len(deadline_events(run)) == 1  # once only


@pytestmark_db
def test_notify_emails_the_approvers_again_and_keeps_waiting(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    approvers = Group.objects.get_or_create(name="approvers")[0]
    User.objects.create_user("amal", email="amal@example.com").groups.add(approvers)
    run = run_local(deadline_spec("notify", wire_timeout=False))
    version = ApprovalRequest.objects.get(run=run).version
    mail.outbox.clear()
    overdue(run)
    engine_loop.step_claim_due("w:1:1")
    request = ApprovalRequest.objects.get(run=run)
    assert request.status == "pending" and request.version == version  # a reminder changes nothing decided on
    assert [m.subject.split(":")[0] for m in mail.outbox] == ["[Ballast] Overdue"]
    assert Run.objects.get(pk=run.pk).status == "waiting"


@pytestmark_db
def test_recovery_rings_one_doorbell_when_a_deadline_falls_due():
    run = run_local(deadline_spec())
    step = Step.objects.get(run=run, node_id="review")
    assert step.pk not in due_pending_steps(stale_seconds=30)
    overdue(run)
    assert step.pk in due_pending_steps(stale_seconds=30)
    assert step.pk not in due_pending_steps(stale_seconds=30)  # rung once; again only when stale


@pytestmark_db
def test_local_drive_fires_a_due_deadline():
    run = run_local(deadline_spec())
    overdue(run)
    with engine.local_mode() as queue:
        engine.drive_local(run.pk, queue=queue, stop_when_waiting=False, timeout=20)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.state["sent"] == "late"


@pytestmark_db
@pytest.mark.process
def test_a_worker_killed_while_firing_a_deadline_fires_it_exactly_once(tmp_path):
    """The firing process hangs at the named fault point with its writes made and not
    committed, and is SIGKILLed there: nothing of it stays, the step is still due, and the
    next claim fires it once."""
    run = run_local(deadline_spec())
    step = overdue(run)
    hits = tmp_path / "faults.jsonl"
    env = {**os.environ, "DATABASE_URL": test_database_url(), "BALLAST_FAULT": "deadline_before_commit", "BALLAST_FAULT_FILE": str(hits),
           "DJANGO_SETTINGS_MODULE": "ballast.settings"}
    code = "import django; django.setup(); from runs.engine import loop; loop.step_claim_due('doomed:1:1')"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, start_new_session=True)
    try:
        def reached() -> bool:
            assert proc.poll() is None, "the firing process exited before the fault point"
            return hits.exists() and bool(hits.read_text().strip())

        wait_until(reached, 60, "the fault point", poll=0.05)
        assert json.loads(hits.read_text().splitlines()[0])["step_id"] == step.pk
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    fresh = Step.objects.get(pk=step.pk)
    assert (fresh.status, fresh.due_at is not None) == ("waiting", True)  # rolled back: still due
    assert deadline_events(run) == [] and ApprovalRequest.objects.get(run=run).status == "pending"
    with engine.local_mode():
        claimed = engine_loop.step_claim_due("w:2:2")  # the next doorbell fires it, and takes its successor
        assert claimed is not None and claimed.node_id == "late"
        while claimed is not None:  # and the successor its commit leases to this worker
            claimed = engine_loop.run_claimed(claimed)
        assert deadlines.step_fire_due(step.pk, worker="w:2:2") == []
    run = continue_local(run, [])
    assert run.status == "succeeded" and run.state["sent"] == "late"
    assert len(deadline_events(run)) == 1 and Step.objects.filter(run=run, node_id="late").count() == 1
    assert AuditEntry.objects.filter(action="step.deadline", scope=f"run:{run.pk}").count() == 1
