"""Django admin: runs and their records are read-only there, a graph draft saved there is validated, and graphs name their operators there."""
from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from approvals.models import ApprovalRequest
from audit.models import AuditEntry
from graphs.models import Graph
from runs.models import Run, RunEvent, Step, StepAttempt
from tests.support.specs import chain, edge, graph, node, run_local

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser() -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _waiting_run() -> Run:
    spec = graph(
        [node("start", "start"), node("calc", "transform", config={"set": {"y": "1 + 1"}}),
         node("gate", "approval", config={"prompt": "Ship it?"}), node("end", "end")],
        [*chain("start", "calc", "gate"), edge("gate", "end", "approved"), edge("gate", "end", "rejected")],
    )
    return run_local(spec)


def test_run_records_are_read_only_for_a_superuser(browser: Client) -> None:
    run = _waiting_run()
    records = {
        "runs/run": Run.objects.get(pk=run.pk),
        "runs/step": Step.objects.filter(run=run).first(),
        "runs/stepattempt": None,  # no admin page of its own: an inline of the step
        "runs/runevent": RunEvent.objects.filter(run=run).first(),
        "audit/auditentry": AuditEntry.objects.first(),
        "approvals/approvalrequest": ApprovalRequest.objects.filter(run=run).first(),
    }
    assert StepAttempt.objects.filter(step__run=run).exists()
    for path, obj in records.items():
        if obj is None:
            continue
        base = f"/admin/{path}/"
        assert browser.get(base).status_code == 200, path  # viewing stays allowed
        assert browser.get(f"{base}add/").status_code == 403, path
        assert browser.post(f"{base}add/", {}).status_code == 403, path
        page = browser.get(f"{base}{obj.pk}/change/")
        assert page.status_code == 200, path
        assert b'name="_save"' not in page.content, path  # a view-only page: no form to submit
        before = {f.name: getattr(obj, f.attname) for f in type(obj)._meta.fields}
        assert browser.post(f"{base}{obj.pk}/change/", {"status": "succeeded"}).status_code == 403, path
        assert browser.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403, path
        obj.refresh_from_db()
        assert {f.name: getattr(obj, f.attname) for f in type(obj)._meta.fields} == before, path
    # The step's page shows its attempts without a way to edit or delete them.
    step = records["runs/step"]
    page = browser.get(f"/admin/runs/step/{step.pk}/change/").content.decode()
    assert "-DELETE" not in page and 'name="_save"' not in page


def _draft_form(browser: Client, graph_obj: Graph, draft: str) -> dict[str, object]:
    """The change form's data with ``draft`` replaced (and the inlines' management forms),
    as the browser would post it: with the revision the page was rendered at."""
    page = browser.get(f"/admin/graphs/graph/{graph_obj.pk}/change/")
    form = page.context["adminform"].form
    # Every plain field as the page rendered it (a browser posts them all), then the edit.
    data: dict[str, object] = {name: form[name].value() for name, field in form.fields.items()
                               if form[name].value() is not None and not isinstance(form[name].value(), (list, dict))}
    data |= {"name": graph_obj.name, "description": graph_obj.description, "draft": draft,
                               "base_revision": form["base_revision"].value(),
                               # The hidden initial the page carries (the draft has a callable default).
                               "initial-draft": form.fields["draft"].prepare_value(form["draft"].initial)}
    for inline in page.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        data.update({management.add_prefix(k): v for k, v in management.initial.items()})
    return data


def test_a_draft_saved_in_the_admin_is_validated_with_every_error(browser: Client) -> None:
    graph_obj = Graph.objects.create(name="admin-draft", draft={})
    bad = (
        '{"name": "g", "nodes": [{"id": "start", "kind": "start"}, {"id": "9bad", "kind": "transform"},'
        ' {"id": "c", "kind": "condition", "config": {"expression": "1 > 10**10**10"}}, {"id": "end", "kind": "end"}],'
        ' "edges": [{"source": "start", "target": "c"}, {"source": "c", "target": "end", "source_handle": "true"},'
        ' {"source": "c", "target": "end", "source_handle": "false"}]}'
    )
    response = browser.post(f"/admin/graphs/graph/{graph_obj.pk}/change/", _draft_form(browser, graph_obj, bad))
    assert response.status_code == 200  # the form again, with its errors
    errors = response.context["adminform"].form.errors["draft"]
    text = " | ".join(errors)
    assert "nodes[1].id" in text and "[invalid_spec]" in text
    assert "nodes[2].config.expression" in text and "[expression_limit]" in text
    graph_obj.refresh_from_db()
    assert graph_obj.draft == {}

    good = (
        '{"name": "g", "nodes": [{"id": "start", "kind": "start"}, {"id": "end", "kind": "end"}],'
        ' "edges": [{"source": "start", "target": "end"}]}'
    )
    response = browser.post(f"/admin/graphs/graph/{graph_obj.pk}/change/", _draft_form(browser, graph_obj, good))
    assert response.status_code == 302, response.context["adminform"].form.errors
    graph_obj.refresh_from_db()
    assert graph_obj.draft["nodes"][1]["id"] == "end"


GOOD_DRAFT = (
    '{"name": "g", "nodes": [{"id": "start", "kind": "start"}, {"id": "end", "kind": "end"}],'
    ' "edges": [{"source": "start", "target": "end"}]}'
)


def test_a_draft_saved_in_the_admin_bumps_the_revision_so_an_old_builder_tab_gets_a_conflict(browser: Client) -> None:
    graph_obj = Graph.objects.create(name="admin-revision", draft={})
    tab_revision = graph_obj.draft_revision  # a builder tab opened before the admin edit
    response = browser.post(f"/admin/graphs/graph/{graph_obj.pk}/change/", _draft_form(browser, graph_obj, GOOD_DRAFT))
    assert response.status_code == 302, response.context["adminform"].form.errors
    graph_obj.refresh_from_db()
    assert graph_obj.draft_revision == tab_revision + 1
    assert graph_obj.draft_updated_by is not None and graph_obj.draft_updated_by.get_username() == "root"

    # The tab saves its old draft: refused with the admin's draft, nothing overwritten.
    stale = browser.patch(
        f"/api/v1/graphs/{graph_obj.pk}/",
        {"spec": {"name": "g", "nodes": [], "edges": []}, "base_revision": tab_revision},
        content_type="application/json",
    )
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "conflict"
    graph_obj.refresh_from_db()
    assert graph_obj.draft["nodes"][1]["id"] == "end"


def test_an_admin_page_opened_before_a_builder_save_does_not_overwrite_it(browser: Client) -> None:
    graph_obj = Graph.objects.create(name="admin-stale", draft={})
    form = _draft_form(browser, graph_obj, GOOD_DRAFT)  # rendered at revision 1
    saved = browser.patch(
        f"/api/v1/graphs/{graph_obj.pk}/",
        {"spec": {"name": "from-the-builder", "nodes": [], "edges": []}, "base_revision": graph_obj.draft_revision},
        content_type="application/json",
    )
    assert saved.status_code == 200, saved.content
    response = browser.post(f"/admin/graphs/graph/{graph_obj.pk}/change/", form)
    assert response.status_code == 200  # the form again, with the conflict on the draft
    assert "reload the page" in " ".join(response.context["adminform"].form.errors["draft"])
    graph_obj.refresh_from_db()
    assert graph_obj.draft["name"] == "from-the-builder" and graph_obj.draft_revision == 2

    # Other fields still save without touching the draft or its revision.
    form = _draft_form(browser, graph_obj, json.dumps(graph_obj.draft))
    form["description"] = "edited in the admin"
    response = browser.post(f"/admin/graphs/graph/{graph_obj.pk}/change/", form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    graph_obj.refresh_from_db()
    assert graph_obj.description == "edited in the admin" and graph_obj.draft_revision == 2


def test_graph_operators_are_named_in_the_admin(browser: Client) -> None:
    from django.contrib.auth.models import Group

    from accounts.policy import can_operate_graph

    graph_obj = Graph.objects.create(name="admin-operators", draft={})
    ada = get_user_model().objects.create_user("ada")
    team = Group.objects.create(name="night-shift")
    draft = '{"name": "g", "nodes": [{"id": "start", "kind": "start"}, {"id": "end", "kind": "end"}], "edges": [{"source": "start", "target": "end"}]}'
    data = {**_draft_form(browser, graph_obj, draft), "operators": [ada.pk], "operator_groups": [team.pk]}
    response = browser.post(f"/admin/graphs/graph/{graph_obj.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert list(graph_obj.operators.all()) == [ada] and list(graph_obj.operator_groups.all()) == [team]
    assert can_operate_graph(ada, graph_obj)


def test_the_run_list_tells_parked_runs_from_runs_at_a_gate(browser: Client) -> None:
    from tests.support import engine
    from tests.support.leases import begun, dead_owner, pay_version, run_at_pay

    gate = _waiting_run()
    parked, pay = run_at_pay(pay_version(unsafe=True))
    begun(engine.step_claim(pay.pk, dead_owner()))
    # Before any recovery pass the running step's worker shows as gone.
    steps = browser.get("/admin/runs/step/", {"status__exact": "running"})
    assert steps.status_code == 200
    assert [(row.pk, row.status) for row in steps.context["cl"].result_list] == [(pay.pk, "running")]
    assert 'alt="False"' in steps.content.decode()  # the worker-alive column, false
    with engine.local_mode():
        engine.recover_once()
    for value, expected in (("decision", [parked.pk]), ("approval", [gate.pk]), (None, [parked.pk, gate.pk])):
        page = browser.get("/admin/runs/run/", {"waiting_for": value} if value else {})
        assert page.status_code == 200
        rows = page.context["cl"].result_list
        assert [r.pk for r in rows] == expected, value
        assert {r.pk: r.waiting_for for r in rows} == {pk: ("decision" if pk == parked.pk else "approval") for pk in expected}
    text = browser.get("/admin/runs/run/").content.decode()
    assert "decision (parked)" in text and "waiting for" in text
