"""``run_graph --wait`` and ``approve`` on the test database: exit 0 when the run succeeded,
1 when it failed or was cancelled, 3 at an approval gate, 4 parked for a decision after a
crash, 5 when --timeout ran out; ``approve --timeout`` waits for the run to reach its
approval, and approve's errors name the pending approvals.

The exit codes and streams are checked in this process (``call_command``, as
tests/support/commands.py turns SystemExit into a return code); the two crash tests kill
real processes (marker ``process``), and one of them runs ``run_graph --wait`` as a real
``manage.py`` so the way the exit code reaches a shell stays covered."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from runs.engine import api as engine
from runs.models import Run, Step, Worker
from runs.services import run_start
from tests.support.bounded import assert_took_under, stopwatch
from tests.support.cluster import REPO_ROOT, test_database_url, wait_until
from tests.support.commands import call_manage
from tests.support.specs import chain, edge, effect, graph, node, publish, transform
from tests.support.tools import read_effects

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def manage_env(effects_file: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BALLAST_FAULT", "PYTEST_"))}
    env.update(
        {
            "DATABASE_URL": test_database_url(),
            "DJANGO_SETTINGS_MODULE": "ballast.settings",
            "BALLAST_EXTRA_TOOL_MODULES": "tests.support.tools",
            "BALLAST_EFFECTS_FILE": str(effects_file),
            "BALLAST_LOG_LEVEL": "WARNING",
            **extra,
        }
    )
    return env


def manage(effects_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` in this process on the test database (the test tools are loaded
    and ``effects_file`` is the effects log already); returns what a real process gives."""
    return call_manage(*args)


def summary(out: str) -> dict:
    """The JSON summary a waiting command printed after its first lines."""
    return json.loads(out[out.index("{"):])


def write_graph(tmp_path: Path, spec: dict) -> str:
    path = tmp_path / f"{spec['name']}.json"
    path.write_text(json.dumps(spec))
    return str(path)


def gate_then_pay() -> dict:
    """start -> review (approval gate) -> pay (a side effect not safe to repeat) -> end."""
    return graph(
        [node("start", "start"), node("review", "approval", config={"prompt": "Pay?"}), effect("pay", unsafe=True), node("end", "end")],
        chain("start", "review") + [edge("review", "pay", "approved")] + chain("pay", "end"),
    )


def test_run_graph_wait_exits_0_succeeded_1_failed_3_at_a_gate(tmp_path, effects_file):
    ok = write_graph(tmp_path, graph([node("start", "start"), transform("a", y="1 + 1"), node("end", "end")], chain("start", "a", "end")))
    boom = write_graph(
        tmp_path,
        graph([node("start", "start"), transform("boom", y="x / zero"), node("end", "end")], chain("start", "boom", "end"),
              input_schema={"type": "object", "properties": {"x": {"type": "integer"}, "zero": {"type": "integer"}}}),
    )
    gate = write_graph(tmp_path, gate_then_pay())
    done = manage(effects_file, "run_graph", ok, "--wait")
    assert done.returncode == 0, done.stderr
    assert summary(done.stdout)["status"] == "succeeded" and summary(done.stdout)["waiting_for"] is None
    failed = manage(effects_file, "run_graph", boom, "--input", '{"x": 1, "zero": 0}', "--wait")
    assert failed.returncode == 1, failed.stderr
    assert summary(failed.stdout)["status"] == "failed"
    waiting = manage(effects_file, "run_graph", gate, "--wait")
    assert waiting.returncode == 3, waiting.stderr
    body = summary(waiting.stdout)
    assert body["status"] == "waiting" and body["waiting_for"] == "approval"
    assert [(a["node_id"], a["purpose"]) for a in body["approvals"]] == [("review", "gate")]
    cancelled_id = body["run"]
    engine.run_cancel(cancelled_id, actor="tester")
    # approve waits for the run it decides and exits the same way.
    after = manage(effects_file, "approve", str(cancelled_id))
    assert after.returncode == 1 and "no pending approval" in after.stderr


def test_run_graph_wait_prints_only_the_json_summary_on_stdout(tmp_path, effects_file):
    path = write_graph(tmp_path, graph([node("start", "start"), node("end", "end")], chain("start", "end")))
    done = manage(effects_file, "run_graph", path, "--wait")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)  # no bare run id on the line before the JSON
    assert body["status"] == "succeeded"
    assert f"run {body['run']} started" in done.stderr
    plain = manage(effects_file, "run_graph", path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip().isdigit()  # without --wait: the run id alone, for scripts


def test_run_graph_wait_exits_5_when_its_timeout_runs_out(tmp_path, effects_file):
    path = write_graph(tmp_path, graph([node("start", "start"), node("end", "end")], chain("start", "end")))
    # A cluster row with a fresh heartbeat and no cluster behind it: run_graph hands the
    # run to a queue nobody serves and polls until --timeout.
    now = timezone.now()
    Worker.objects.create(name="silent:1:1", host="silent", pid=1, started_at=now + timezone.timedelta(minutes=5), heartbeat_at=now + timezone.timedelta(minutes=5))
    watch = stopwatch()
    proc = manage(effects_file, "run_graph", path, "--wait", "--timeout", "1")
    assert proc.returncode == 5, proc.stderr
    assert summary(proc.stdout)["status"] == "queued"
    assert_took_under(watch.elapsed, 60, "run_graph --wait --timeout 1")


def test_approve_timeout_waits_for_the_run_to_reach_its_gate(tmp_path, effects_file):
    version = publish(gate_then_pay())
    with engine.local_mode():  # started, nothing executed: no approval yet
        run = run_start(version=version, run_input={})
    at_once = manage(effects_file, "approve", str(run.pk))
    assert at_once.returncode == 1
    assert f"run {run.pk} has no pending approval (status queued, no step waits for a person)" in at_once.stderr
    # With --timeout it waits; no cluster runs, so it drives the run here up to the gate.
    waited = manage(effects_file, "approve", str(run.pk), "--timeout", "60", "--comment", "ok")
    assert waited.returncode == 0, waited.stderr + waited.stdout
    assert json.loads(waited.stdout)["status"] == "succeeded"  # stdout is the JSON summary alone
    assert f"on run {run.pk}: approve by cli:" in waited.stderr
    assert [e["label"] for e in read_effects(str(effects_file))] == ["pay"]
    bad = manage(effects_file, "approve", str(run.pk), "--timeout", "-1")
    assert bad.returncode == 1 and "--timeout must be 0 or more seconds" in bad.stderr


def test_approve_errors_name_the_pending_approvals(tmp_path, effects_file):
    spec = graph(
        [node("start", "start"), node("left", "approval", config={"prompt": "L?"}), node("right", "approval", config={"prompt": "R?"}),
         node("join", "join"), node("end", "end")],
        [edge("start", "left"), edge("start", "right"), edge("left", "join", "approved"), edge("right", "join", "approved")] + chain("join", "end"),
        state={"approval": {"reducer": "append"}},
    )
    run_id = summary(manage(effects_file, "run_graph", write_graph(tmp_path, spec), "--wait").stdout)["run"]
    left, right = ApprovalRequest.objects.filter(run_id=run_id).order_by("id")
    assert {left.node_id, right.node_id} == {"left", "right"}
    pending = f"{left.pk} (gate at node {left.node_id}), {right.pk} (gate at node {right.node_id})"
    several = manage(effects_file, "approve", str(run_id))
    assert several.returncode == 1
    assert f"run {run_id} waits at several approvals: {pending}; pass --approval ID" in several.stderr
    missing = manage(effects_file, "approve", str(run_id), "--approval", "987654")
    assert missing.returncode == 1
    assert f"has no pending approval 987654 (approval 987654 does not exist); pending: {pending}" in missing.stderr
    wrong = manage(effects_file, "approve", str(run_id), "--approval", str(left.pk), "--decision", "retry")
    assert wrong.returncode == 1 and f"approval {left.pk} (gate at node {left.node_id}): decision must be one of" in wrong.stderr
    first = manage(effects_file, "approve", str(run_id), "--approval", str(left.pk))
    assert first.returncode == 3, first.stderr  # still waits at the other gate
    again = manage(effects_file, "approve", str(run_id), "--approval", str(left.pk))
    assert again.returncode == 1
    assert f"(approval {left.pk} (gate at node {left.node_id}) was approved by cli:" in again.stderr
    assert f"pending: {right.pk} (gate at node {right.node_id})" in again.stderr


def _kill_group_at_fault(proc: subprocess.Popen, fault_file: Path, timeout: float = 60) -> None:
    def reached() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"exited ({proc.returncode}) before the fault: {proc.communicate()}")
        return fault_file.exists() and bool(fault_file.read_text().strip())

    wait_until(reached, timeout, "the fault point")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.mark.process
def test_approve_timeout_recovers_a_crashed_run_here_and_decides_its_recovery_request(tmp_path, effects_file):
    waiting = manage(effects_file, "run_graph", write_graph(tmp_path, gate_then_pay()), "--wait")
    assert waiting.returncode == 3, waiting.stderr
    run_id = summary(waiting.stdout)["run"]
    # approve continues the run in its own process; SIGKILL it inside 'pay'.
    fault_file = tmp_path / "fault.jsonl"
    crashed = subprocess.Popen(
        [sys.executable, "manage.py", "approve", str(run_id)],
        cwd=REPO_ROOT,
        env=manage_env(effects_file, BALLAST_FAULT="during_execute:pay", BALLAST_FAULT_FILE=str(fault_file)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _kill_group_at_fault(crashed, fault_file)
    assert Step.objects.get(run_id=run_id, node_id="pay").status == "running"  # nothing recovered it yet
    no_decision = manage(effects_file, "approve", str(run_id), "--timeout", "60")
    # It drove the run here: the dead process's step was parked, and a recovery request
    # needs a decision.
    assert no_decision.returncode == 1
    request = ApprovalRequest.objects.get(run_id=run_id, status="pending")
    assert request.purpose == "recovery" and request.node_id == "pay"
    assert f"approval {request.pk} (recovery at node pay) is a recovery request: pass --decision retry, skip or fail" in no_decision.stderr
    retried = manage(effects_file, "approve", str(run_id), "--decision", "retry", "--timeout", "60")
    assert retried.returncode == 0, retried.stderr + retried.stdout
    assert Run.objects.get(pk=run_id).status == "succeeded"
    assert [e["label"] for e in read_effects(str(effects_file))] == ["pay"]  # once, after the person chose retry


@pytest.mark.process
def test_run_graph_wait_exits_4_when_its_run_is_parked_after_a_crash(tmp_path, effects_file, cluster_factory):
    # A skip writes only state keys the graph knows: 'paid' is declared.
    path = write_graph(tmp_path, graph([node("start", "start"), effect("pay", unsafe=True), node("end", "end")], chain("start", "pay", "end"), state={"paid": {}}))
    crashed = cluster_factory("crashed").start(fault="during_execute:pay")
    crashed.wait_ready()
    waiter = subprocess.Popen(
        [sys.executable, "manage.py", "run_graph", path, "--wait", "--timeout", "120"],
        cwd=REPO_ROOT,
        env=manage_env(effects_file),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        crashed.wait_for_fault(timeout=60)
        crashed.kill()
        fresh = cluster_factory("fresh").start()
        out, err = waiter.communicate(timeout=120)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert waiter.returncode == 4, err + out
    body = summary(out)
    assert body["status"] == "waiting" and body["waiting_for"] == "decision"
    assert [(a["node_id"], a["purpose"]) for a in body["approvals"]] == [("pay", "recovery")]
    run_id = body["run"]
    # With the fresh cluster alive, approve decides and polls the run to its end.
    skipped = manage(effects_file, "approve", str(run_id), "--decision", "skip", "--output", '{"paid": true}', "--timeout", "60")
    assert skipped.returncode == 0, skipped.stderr + skipped.stdout
    assert summary(skipped.stdout)["status"] == "succeeded"
    wait_until(lambda: Run.objects.get(pk=run_id).status == "succeeded", 5, "the run to succeed", clusters=[fresh])
    assert read_effects(str(effects_file)) == []  # never re-executed on its own
