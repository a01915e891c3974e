"""What a run page needs beyond the run itself: a node-test run's graph (its hidden
snapshot, served for the run only), the node it tested and the refusal of resume, retry
and fork on it (409 ``test_run``, nothing re-run); a forked run's origin and the nodes it
kept from its source."""
from __future__ import annotations

import pytest

from builder.services import graph_node_test
from runs.engine import api as engine
from runs.models import Run, Step
from tests.support.world import World, failing_draft

pytestmark = pytest.mark.usefixtures("fast_passwords")


def failed_test_run() -> Run:
    run = graph_node_test(graph=failing_draft(), node_id="boom", state={"x": 1, "zero": 0}, actor="tester")
    assert run.is_test and run.status == "failed", run.status
    return run


def test_a_test_run_is_never_resumed_retried_or_forked(world: World) -> None:
    run = failed_test_run()
    client = world.clients["operator"]
    before = list(Step.objects.filter(run=run).order_by("id").values_list("id", "node_id", "status", "attempt"))
    paths = ["resume/", "retry/", "resume/preview/", "retry/preview/"]
    with engine.local_mode() as queue:
        for path in paths:
            refused = client.post(f"/api/v1/runs/{run.pk}/{path}", format="json")
            assert refused.status_code == 409, (path, refused.content)
            error = refused.json()["error"]
            assert error["code"] == "test_run" and "test of one node" in error["message"], error
        assert not queue  # nothing was handed to the queue
    # The failed step was not reopened: a test run is tested again from the builder.
    assert list(Step.objects.filter(run=run).order_by("id").values_list("id", "node_id", "status", "attempt")) == before
    assert Run.objects.get(pk=run.pk).status == "failed"


def test_a_succeeded_test_run_is_not_forked(world: World) -> None:
    run = graph_node_test(graph=failing_draft(), node_id="boom", state={"x": 4, "zero": 2}, actor="tester")
    assert run.status == "succeeded"
    boom = Step.objects.get(run=run, node_id="boom")
    client = world.clients["operator"]
    for path in ("fork/", "fork/preview/"):
        refused = client.post(f"/api/v1/runs/{run.pk}/{path}", {"step": boom.pk, "state_patch": {}}, format="json")
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "test_run", refused.content
    assert Run.objects.count() == 1


def test_the_actions_of_a_test_run_say_why_none_is_offered(world: World) -> None:
    run = failed_test_run()
    body = world.clients["operator"].get(f"/api/v1/runs/{run.pk}/actions/").json()
    for action in ("resume", "retry", "fork"):
        assert body[action]["allowed"] is False and "test of one node" in body[action]["reason"], body


def test_a_test_runs_page_gets_the_tested_node_and_its_snapshot_graph(world: World) -> None:
    run = failed_test_run()
    client = world.clients["operator"]
    detail = client.get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["is_test"] is True and detail["tested_node"] == "boom" and detail["fork_origin"] is None
    # The snapshot is no published version: the version endpoint does not open it...
    assert client.get(f"/api/v1/graphs/{detail['graph']}/versions/0/").status_code == 404
    # ...the run's own graph does.
    drawn = client.get(f"/api/v1/runs/{run.pk}/graph/")
    assert drawn.status_code == 200, drawn.content
    body = drawn.json()
    assert body["is_test"] is True and body["version"] == 0 and body["graph"] == detail["graph"]
    assert [n["id"] for n in body["spec"]["nodes"]] == ["boom", "test_end"]
    # Read like the run: hidden from a user who may not read it.
    assert world.clients["anonymous"].get(f"/api/v1/runs/{run.pk}/graph/").status_code in (401, 403, 404)


def test_a_published_runs_graph_is_its_version(world: World) -> None:
    run = world.succeeded_run()
    body = world.clients["operator"].get(f"/api/v1/runs/{run.pk}/graph/").json()
    assert body["is_test"] is False and body["version"] == run.graph_version.number
    assert body["spec"] == run.graph_version.spec
    assert world.clients["operator"].get(f"/api/v1/runs/{run.pk}/").json()["tested_node"] is None


def test_a_forked_runs_detail_names_its_origin_and_the_nodes_it_kept(world: World) -> None:
    from tests.support.specs import publish, run_local
    from tests.support.world import priced_spec

    source = run_local(publish(priced_spec()), {"x": 1, "zero": 2, "name": "Ada"}, user=world.users["starter"])
    draft = Step.objects.get(run=source, node_id="draft")
    client = world.clients["operator"]
    with engine.local_mode():
        forked = client.post(f"/api/v1/runs/{source.pk}/fork/", {"step": draft.pk, "state_patch": {"zero": 4}}, format="json")
    assert forked.status_code == 201, forked.content
    body = forked.json()
    assert body["forked_from"] == source.pk
    assert body["fork_origin"] == {"run": source.pk, "step": draft.pk, "node_id": "draft", "kept_nodes": ["start", "draft"]}
    # A fork of the fork keeps what its source kept, too.
    new = Run.objects.get(pk=body["id"])
    with engine.local_mode() as queue:
        engine.drive_local(new.pk, queue=queue, timeout=30)
    boom = Step.objects.get(run=new, node_id="boom")
    with engine.local_mode():
        again = client.post(f"/api/v1/runs/{new.pk}/fork/", {"step": boom.pk, "state_patch": {}}, format="json")
    assert again.status_code == 201, again.content
    origin = again.json()["fork_origin"]
    assert origin["run"] == new.pk and origin["node_id"] == "boom" and origin["kept_nodes"] == ["start", "draft", "boom"]
    assert client.get(f"/api/v1/runs/{source.pk}/").json()["fork_origin"] is None
