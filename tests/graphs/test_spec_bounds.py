"""A graph's numbers that land in a run's row are bounded where the spec is accepted, and a
version stored before those bounds cannot start a run: a 400 naming the field, nothing written."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest

from audit.models import AuditEntry
from graphs.bounds import BUDGET_USD_LIMIT, run_limit_problems
from graphs.models import Graph, GraphVersion
from runs.engine import api as engine
from runs.engine.store.graphs import compiled_graph
from runs.models import Run, Step
from runs.services import run_start
from tests.support.specs import chain, graph, node, publish, run_local, transform

pytestmark = pytest.mark.usefixtures("fast_passwords")

MAX_BUDGET_USD = BUDGET_USD_LIMIT - Decimal("0.000001")  # the run API's largest


def poison(settings: str) -> str:
    """The tester's graph with ``settings`` as raw JSON text (so 1e400 stays a number)."""
    return (
        '{"name":"poison","nodes":[{"id":"start","kind":"start"},{"id":"end","kind":"end"}],'
        '"edges":[{"source":"start","target":"end"}],"settings":' + settings + "}"
    )


def post_raw(world, path: str, body: str):
    return world.clients["admin"].generic("POST", path, body, content_type="application/json")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"budget_usd":"10000000000000"}', "settings.budget_usd"),
        ('{"budget_usd":"1e400"}', "settings.budget_usd"),
        ('{"budget_usd":1e400}', "settings.budget_usd"),
        ('{"budget_tokens":' + str(10**40) + "}", "settings.budget_tokens"),
    ],
)
def test_a_budget_past_the_run_columns_is_refused_at_validate_and_import(world, raw, field):
    graphs = Graph.objects.count()
    checked = post_raw(world, "/api/v1/graphs/validate/", poison(raw))
    assert checked.status_code == 200 and checked.json()["valid"] is False
    assert field in {e["path"] for e in checked.json()["errors"]}, checked.json()["errors"]
    imported = post_raw(world, "/api/v1/graphs/import/", poison(raw))
    assert imported.status_code == 400, imported.content[:300]
    body = imported.json()["error"]
    assert body["code"] == "graph_invalid" and field in {i["path"] for i in body["issues"]}
    assert Graph.objects.count() == graphs


def test_the_largest_budget_the_run_api_takes_is_the_largest_a_spec_takes(world):
    body = poison(json.dumps({"budget_usd": str(MAX_BUDGET_USD), "budget_tokens": 2**63 - 1}))
    assert post_raw(world, "/api/v1/graphs/import/", body).status_code == 201
    version = GraphVersion.objects.get(graph__name="poison")
    started = world.clients["admin"].post("/api/v1/runs/", {"graph": version.graph_id}, format="json")
    assert started.status_code == 201, started.content[:300]
    run = Run.objects.get(pk=started.json()["id"])
    assert run.budget_usd == MAX_BUDGET_USD and run.budget_tokens == 2**63 - 1


@pytest.mark.parametrize(
    ("stored", "field"),
    [
        ({"budget_usd": "10000000000000"}, "settings.budget_usd"),
        ({"budget_usd": "1E+400"}, "settings.budget_usd"),
        ({"budget_tokens": 10**40}, "settings.budget_tokens"),
    ],
)
def test_a_version_stored_before_the_bounds_cannot_start_a_run_and_leaves_nothing(world, stored, field):
    # A version published before this check existed holds the value already.
    version = publish(graph([node("start", "start"), node("end", "end")], chain("start", "end")))
    GraphVersion.objects.filter(pk=version.pk).update(spec={**version.spec, "settings": {**version.spec["settings"], **stored}})
    compiled_graph.cache_clear()
    before = (Run.objects.count(), Step.objects.count(), AuditEntry.objects.count())
    response = world.clients["admin"].post("/api/v1/runs/", {"graph": version.graph_id}, format="json")
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "version_invalid" and field in error["fields"], error
    assert (Run.objects.count(), Step.objects.count(), AuditEntry.objects.count()) == before
    # Every other graph's runs start and finish as before.
    ok = run_local(graph([node("start", "start"), transform("t", x="1"), node("end", "end")], chain("start", "t", "end")))
    assert ok.status == "succeeded", ok.error


@pytest.mark.django_db
def test_run_start_refuses_a_budget_override_past_the_column_and_writes_nothing():
    version = publish(graph([node("start", "start"), node("end", "end")], chain("start", "end")))
    before = Run.objects.count()
    with engine.local_mode(), pytest.raises(engine.VersionUnrunnable) as refused:
        run_start(version=version, budget_usd=Decimal("1E+13"))
    assert set(refused.value.fields) == {"budget_usd"}
    with engine.local_mode(), pytest.raises(engine.VersionUnrunnable) as refused:
        run_start(version=version, budget_tokens=10**40)
    assert set(refused.value.fields) == {"budget_tokens"}
    assert Run.objects.count() == before


def test_run_limit_problems_names_each_limit_that_does_not_fit():
    assert run_limit_problems(budget_usd=MAX_BUDGET_USD, budget_tokens=0, max_parallelism=1, max_steps=1) == {}
    found = run_limit_problems(budget_usd=Decimal("NaN"), budget_tokens=2**63, max_parallelism=0, max_steps=2**31)
    assert set(found) == {"budget_usd", "budget_tokens", "max_parallelism", "max_steps"}
