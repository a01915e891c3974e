"""Retention (runs.retention, manage.py prune_runs): which runs go and which never do, the
dry run, batches, cost reports (the API and manage.py cost_report) unchanged by a prune,
and the audit chains of pruned runs cut and tombstoned so the audit still verifies."""
from __future__ import annotations

import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from audit.chain import audit_verify
from audit.models import AuditChain, AuditEntry, AuditTombstone
from builder.services import graph_create, graph_node_test
from graphs.models import Graph, GraphVersion
from runs.management.commands.cost_report import GROUPINGS, cost_rows
from runs.management.commands.cost_report import totals as cost_totals
from runs.models import CostRollup, Run, RunEvent, RunStateKey, Step, StepAttempt
from runs.retention import prune
from tests.support.audit import tamper
from tests.support.costs import make_spend
from tests.support.specs import chain, graph, node, publish, run_local, transform
from tests.support.world import approval_spec, parked_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

LATER = timedelta(days=400)  # past every retention these tests set


def call(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def simple_spec(name: str) -> dict[str, Any]:
    return graph([node("start", "start"), transform("calc", y="1 + 1"), node("end", "end")], chain("start", "calc", "end"), name=name)


def finished_run(name: str, *, days: int | None = None) -> Run:
    version = publish(simple_spec(name))
    if days is not None:
        Graph.objects.filter(pk=version.graph_id).update(retention_days=days)
    run = run_local(version, {})
    assert run.status == "succeeded", run.error
    return run


def test_a_graphs_retention_is_honoured_and_the_default_keeps_forever(settings):
    settings.BALLAST_RETENTION_DAYS = None
    short = finished_run("short", days=3)
    long = finished_run("long", days=30)
    kept = finished_run("default")
    now = timezone.now()
    assert prune(now + timedelta(days=2)).runs == 0  # nothing is 3 days old yet
    report = prune(now + timedelta(days=4))
    assert report.runs == 1 and not Run.objects.filter(pk=short.pk).exists()
    assert Step.objects.filter(run_id=short.pk).count() == 0 and RunEvent.objects.filter(run_id=short.pk).count() == 0
    assert RunStateKey.objects.filter(run_id=short.pk).count() == 0
    assert report.steps >= 3 and report.events >= 3 and report.attempts >= 3
    assert prune(now + timedelta(days=31)).runs == 1 and not Run.objects.filter(pk=long.pk).exists()
    assert prune(now + LATER).runs == 0 and Run.objects.filter(pk=kept.pk).exists()
    settings.BALLAST_RETENTION_DAYS = 10  # the default, for graphs that name none
    assert prune(now + timedelta(days=11)).runs == 1 and not Run.objects.filter(pk=kept.pk).exists()


def test_waiting_and_parked_runs_are_never_pruned(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    waiting = run_local(publish(approval_spec()), {"name": "Ada"})
    assert waiting.status == "waiting"
    parked, _ = parked_run()
    assert Step.objects.filter(run=parked, status="parked").exists()
    # Even a run whose status reads finished is kept while a step of it is parked.
    odd = finished_run("odd")
    Step.objects.filter(run=odd, node_id="calc").update(status="parked")
    assert prune(timezone.now() + LATER).runs == 0
    assert Run.objects.filter(pk__in=[waiting.pk, parked.pk, odd.pk]).count() == 3


def test_node_test_runs_and_their_snapshots_go_sooner(settings):
    settings.BALLAST_RETENTION_DAYS = None
    settings.BALLAST_TEST_RUN_RETENTION_DAYS = 7
    spec = simple_spec("drafty")
    g = graph_create(name=spec["name"], draft=spec)
    test_run = graph_node_test(graph=g, node_id="calc", state={}, actor="tester")
    assert test_run.is_test and test_run.status == "succeeded"
    snapshot = test_run.graph_version_id
    real = run_local(publish(spec), {})
    now = timezone.now()
    assert prune(now + timedelta(days=6)).runs == 0
    report = prune(now + timedelta(days=8))
    assert (report.runs, report.test_runs, report.snapshot_versions) == (1, 1, 1)
    assert not GraphVersion.objects.filter(pk=snapshot).exists()
    assert Run.objects.filter(pk=real.pk).exists() and GraphVersion.objects.filter(pk=real.graph_version_id).exists()
    # A graph's retention shorter than the test default applies to its test runs too.
    Graph.objects.filter(pk=g.pk).update(retention_days=2)
    again = graph_node_test(graph=g, node_id="calc", state={}, actor="tester")
    assert prune(timezone.now() + timedelta(days=3)).test_runs == 1 and not Run.objects.filter(pk=again.pk).exists()


def test_a_dry_run_deletes_nothing_and_counts_what_would_go(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    runs = [finished_run(f"dry{i}") for i in range(3)]
    before = (Run.objects.count(), Step.objects.count(), StepAttempt.objects.count(), RunEvent.objects.count(), AuditEntry.objects.count())
    later = timezone.now() + timedelta(days=2)
    dry = prune(later, dry_run=True)
    assert (Run.objects.count(), Step.objects.count(), StepAttempt.objects.count(), RunEvent.objects.count(), AuditEntry.objects.count()) == before
    assert dry.dry_run and dry.runs == 3
    assert dry.steps == Step.objects.filter(run__in=runs).count()
    assert dry.attempts == StepAttempt.objects.filter(step__run__in=runs).count()
    assert dry.events == RunEvent.objects.filter(run__in=runs).count()
    assert dry.audit_chains == 3 and dry.audit_entries == AuditEntry.objects.filter(scope__in=[r.audit_scope for r in runs]).count()
    Run.objects.update(finished_at=timezone.now() - timedelta(days=2))  # due at the command's own now
    out = call("prune_runs", "--dry-run")
    assert "would delete 3 run(s)" in out and Run.objects.count() == before[0]
    real = prune(later)
    assert (real.runs, real.steps, real.attempts, real.events, real.audit_chains, real.audit_entries) == (
        dry.runs, dry.steps, dry.attempts, dry.events, dry.audit_chains, dry.audit_entries,
    )  # fmt: skip


def test_runs_go_in_batches_of_the_size_asked(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    for i in range(5):
        finished_run(f"batch{i}")
    seen: list[int] = []
    with CaptureQueriesContext(connection) as queries:
        report = prune(timezone.now() + timedelta(days=2), batch_size=2, on_batch=lambda r: seen.append(r.runs))
    assert report.batches == 3 and seen == [2, 4, 5] and Run.objects.count() == 0
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('DELETE FROM "runs_run"')]
    assert len(deletes) == 3
    assert report.longest_batch_seconds > 0 and not report.more


def test_a_bounded_prune_stops_after_its_batches_and_says_more_are_due(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    for i in range(3):
        finished_run(f"bounded{i}")
    later = timezone.now() + timedelta(days=2)
    first = prune(later, batch_size=1, max_batches=2)
    assert (first.runs, first.batches, first.more) == (2, 2, True) and Run.objects.count() == 1
    rest = prune(later, batch_size=1, max_batches=2)
    assert (rest.runs, rest.more) == (1, False) and Run.objects.count() == 0


def _costs(client: APIClient) -> dict[str, Any]:
    """What the cost pages show: totals and the rows by graph, node, model and day."""
    out: dict[str, Any] = {"totals": client.get("/api/v1/costs/totals/").json()}
    for group in ("graph", "node", "model", "day"):
        body = client.get(f"/api/v1/costs/?group_by={group}&page_size=100").json()
        out[group] = sorted(
            ((str(r["key"]), r.get("graph"), Decimal(r["cost_usd"]), r["attempts"], r["retry_attempts"], r["crash_rerun_attempts"],
              r["input_tokens"], r["output_tokens"]) for r in body["results"]),
            key=str,
        )  # fmt: skip
    return out


def test_cost_reports_are_the_same_before_and_after_a_prune(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    spend = make_spend()
    root = User.objects.create_user("root", password="pw-root-1", is_staff=True, is_superuser=True)
    viewers = {"root": APIClient(), "ana": APIClient()}
    viewers["root"].force_authenticate(root)
    viewers["ana"].force_authenticate(spend.users["ana"])
    before = {name: _costs(c) for name, c in viewers.items()}
    assert Decimal(before["root"]["totals"]["cost_usd"]) > 0
    assert before["root"]["totals"]["retry_attempts"] == 1 and before["root"]["totals"]["crash_rerun_attempts"] == 1
    report = prune(timezone.now() + timedelta(days=2))
    assert report.runs == len(spend.runs) and Run.objects.count() == 0 and report.rollups > 0
    after = {name: _costs(c) for name, c in viewers.items()}
    assert after == before
    # A day range that holds the attempts' day counts them; the day before does not.
    today = timezone.now().date()
    client = viewers["root"]
    assert client.get(f"/api/v1/costs/totals/?since={today}&until={today}").json()["cost_usd"] == before["root"]["totals"]["cost_usd"]
    assert Decimal(client.get(f"/api/v1/costs/totals/?until={today - timedelta(days=1)}").json()["cost_usd"]) == 0
    # A new run's spend adds to the rollups in the rows of its graph.
    alpha = Graph.objects.get(name="alpha")
    run_local(alpha.latest_version(), {}, user=spend.users["ana"])
    grown = Decimal(client.get(f"/api/v1/costs/totals/?graph={alpha.pk}").json()["cost_usd"])
    rows = client.get("/api/v1/costs/?group_by=graph").json()["results"]
    assert [Decimal(r["cost_usd"]) for r in rows if str(r["key"]) == str(alpha.pk)] == [grown]
    rolled = [row[2] for row in before["root"]["graph"] if row[0] == str(alpha.pk)]
    assert grown > rolled[0] > 0
    assert CostRollup.objects.filter(graph=alpha).exists()


def test_the_audit_chains_of_pruned_runs_are_cut_and_tombstoned_and_still_verify(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    settings.BALLAST_AUDIT_RETENTION_DAYS = None  # the default: keep
    first = finished_run("audited")
    later = timezone.now() + timedelta(days=2)
    assert prune(later).audit_chains == 0
    assert AuditChain.objects.filter(scope=first.audit_scope).exists()  # run gone, its audit kept
    assert audit_verify().ok
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    second = finished_run("audited2")
    head = AuditChain.objects.get(scope=second.audit_scope)
    report = prune(later)
    # The run pruned now and the one pruned before (its chain swept): both chains cut whole.
    assert report.audit_chains == 2
    for run in (first, second):
        assert not AuditEntry.objects.filter(scope=run.audit_scope).exists()
        assert not AuditChain.objects.filter(scope=run.audit_scope).exists()
    stone = AuditTombstone.objects.get(scope=second.audit_scope)
    assert (stone.last_seq, stone.last_hash, stone.count) == (head.seq, head.hash, head.seq)
    verified = audit_verify()
    assert verified.ok, [str(p) for p in verified.problems]
    assert "audit log intact" in call("verify_audit")


def test_a_tampered_or_missing_tombstone_or_a_revived_chain_fails_verification(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    runs = [finished_run(f"stone{i}") for i in range(3)]
    prune(timezone.now() + timedelta(days=2))
    assert audit_verify().ok
    a, b, c = (AuditTombstone.objects.get(scope=r.audit_scope) for r in runs)
    AuditTombstone.objects.filter(pk=a.pk).update(last_seq=a.last_seq + 1, count=a.count + 1)
    AuditTombstone.objects.filter(pk=b.pk).delete()
    AuditEntry.objects.create(
        actor_type="system", actor="x", action="run.start", object_type="run", object_id=str(runs[2].pk),
        scope=c.scope, seq=1, prev_hash="0" * 64, hash="f" * 64,
    )  # fmt: skip
    problems = {(p.scope, p.message.split(":")[0]) for p in audit_verify().problems}
    assert (a.scope, "tombstone does not match its hash") in problems
    assert (b.scope, "the retention chain recorded this chain's prune but its tombstone is gone") in problems
    assert (c.scope, "entries of a pruned (tombstoned) chain reappeared") in problems


def test_a_chain_that_does_not_verify_is_kept_not_pruned(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    settings.BALLAST_AUDIT_RETENTION_DAYS = 1
    run = finished_run("evidence")
    entry = AuditEntry.objects.filter(scope=run.audit_scope).order_by("seq").first()
    assert entry is not None
    tamper(entry.pk, actor="mallory")
    report = prune(timezone.now() + timedelta(days=2))
    assert report.runs == 1 and report.audit_chains == 0 and report.refused_chains == [run.audit_scope]
    assert AuditEntry.objects.filter(scope=run.audit_scope).exists() and not AuditTombstone.objects.exists()


def _command_report() -> dict[str, Any]:
    """What ``manage.py cost_report`` shows, per grouping: the totals, and the rows of the
    groupings whose groups outlive a prune (graph, model, day); the printed TOTAL line."""
    out: dict[str, Any] = {}
    for by in GROUPINGS:
        rows = cost_rows(by=by, include_tests=True)
        out[f"{by} totals"] = cost_totals(rows)
        if by in ("graph", "model", "day"):
            out[by] = rows
        out[f"{by} table TOTAL"] = [line for line in call("cost_report", "--by", by).splitlines() if line.startswith("TOTAL")]
    return out


def test_the_cost_report_command_is_the_same_before_and_after_a_prune(settings, sdk_providers):
    settings.BALLAST_RETENTION_DAYS = 1
    spend = make_spend(unpriced=sdk_providers)
    before = _command_report()
    assert before["model totals"]["usd"] > 0 and before["model totals"]["unpriced"] == 1
    assert before["model totals"]["attempts"] >= len(spend.runs)
    today = timezone.now().date()
    whole_days = cost_totals(cost_rows(by="day", since=_midnight(today), until=_midnight(today + timedelta(days=1))))
    report = prune(timezone.now() + timedelta(days=2))
    assert report.runs == len(spend.runs) and Run.objects.count() == 0 and report.rollups > 0
    after = _command_report()
    assert after == before
    # Pruned runs read as one group with no run (and no step) in the run and step groupings.
    assert {r["run"] for r in cost_rows(by="run")} == {None}
    # The unpriced model's row stays unknown, not $0.
    assert [r["usd"] for r in cost_rows(by="model") if r["model"] == "my-finetune-7b"] == [None]
    # A range of whole days that holds the attempts counts the rollups; the day before does not.
    assert cost_totals(cost_rows(by="day", since=_midnight(today), until=_midnight(today + timedelta(days=1)))) == whole_days
    assert cost_rows(by="day", until=_midnight(today)) == []
    # A new run's spend adds to its graph's rolled-up row.
    alpha = Graph.objects.get(name="alpha")
    run_local(alpha.latest_version(), {}, user=spend.users["ana"])
    [grown] = [r for r in cost_rows(by="graph") if r["graph"] == "alpha"]
    [rolled] = [r for r in before["graph"] if r["graph"] == "alpha"]
    assert grown["usd"] > rolled["usd"] and grown["attempts"] == rolled["attempts"] + 1


def _midnight(day: Any) -> Any:
    return timezone.make_aware(timezone.datetime.combine(day, timezone.datetime.min.time()), timezone.get_default_timezone())
