"""The attempts the run page's timeline draws: GET /api/v1/runs/<id>/ gives each step's
attempts with their error code and, after a failure that was retried, when the next attempt
was due (the end of its backoff); GET /api/v1/steps/<id>/ gives the same retry time; the run
read stays a fixed number of queries however many steps and attempts the run has."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import RunEvent, Step
from tests.support.specs import chain, graph, node, run_local
from tests.support.world import World

pytestmark = pytest.mark.usefixtures("fast_passwords")


def flaky_chain(names: list[str], *, fail_times: int, backoff: float) -> dict:
    """start -> each of ``names`` (the flaky test tool, failing ``fail_times`` attempts with
    ``backoff`` seconds before each retry) -> end."""
    flaky = [
        node(n, "tool", config={"tool": "flaky", "args": {"fail_times": fail_times}}, retry={"max_attempts": fail_times + 1, "backoff_seconds": backoff})
        for n in names
    ]
    return graph([node("start", "start"), *flaky, node("end", "end")], chain("start", *names, "end"), name=f"flaky-{len(names)}-{fail_times}")


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_each_attempt_has_its_outcome_error_code_and_the_next_attempts_due_time(world: World) -> None:
    run = run_local(flaky_chain(["ask"], fail_times=1, backoff=0.3), {})
    assert run.status == "succeeded", run.error
    body = world.clients["admin"].get(f"/api/v1/runs/{run.pk}/").json()
    step = next(s for s in body["steps"] if s["node_id"] == "ask")
    first, second = step["attempts"]
    assert (first["number"], first["status"], first["error_code"]) == (1, "failed", "flaky")
    assert (second["number"], second["status"], second["error_code"], second["retry_at"]) == (2, "succeeded", None, None)
    # The backoff runs from the failed attempt's end to the due time the engine set (0.3 s on).
    backoff = when(first["retry_at"]) - when(first["finished_at"])
    assert timedelta(seconds=0.29) <= backoff <= timedelta(seconds=0.31), backoff
    assert when(second["started_at"]) >= when(first["retry_at"])  # not claimed before it was due
    start = next(s for s in body["steps"] if s["node_id"] == "start")
    assert [(a["status"], a["error_code"], a["retry_at"]) for a in start["attempts"]] == [("succeeded", None, None)]
    # The step inspector's attempts carry the same due time.
    detail = world.clients["admin"].get(f"/api/v1/steps/{step['id']}/").json()
    assert [a["retry_at"] for a in detail["attempts"]] == [first["retry_at"], None]


def test_the_run_read_is_a_fixed_number_of_queries_however_many_attempts(world: World) -> None:
    client = world.clients["admin"]
    counts = []
    for names, fails in ((["a"], 1), (["a", "b", "c", "d"], 2)):
        run = run_local(flaky_chain(names, fail_times=fails, backoff=0), {})
        assert run.status == "succeeded", run.error
        client.get(f"/api/v1/runs/{run.pk}/")  # warm the token cache and anything per-process
        with CaptureQueriesContext(connection) as ctx:
            body = client.get(f"/api/v1/runs/{run.pk}/").json()
        retried = [a for s in body["steps"] for a in s["attempts"] if a["retry_at"]]
        assert len(retried) == len(names) * fails
        # Authentication and throttling use the cache table (its culling varies): count the run's reads.
        counts.append(len([q["sql"] for q in ctx.captured_queries if "runs_" in q["sql"]]))
    assert counts[0] == counts[1], counts
    assert Step.objects.filter(run__graph_version__graph__name="flaky-4-2", node_id="d").get().attempt == 3


def test_a_retry_event_without_a_readable_attempt_number_leaves_retry_at_null(world: World) -> None:
    run = run_local(flaky_chain(["ask"], fail_times=1, backoff=0), {})
    # An older payload (before events carried the attempt) or one edited by hand: no number to match.
    for text in ("first", None):
        event = RunEvent.objects.get(run=run, kind="step_retrying")
        RunEvent.objects.filter(pk=event.pk).update(data=event.data | {"error": event.data["error"] | {"attempt": text}})
        response = world.clients["admin"].get(f"/api/v1/runs/{run.pk}/")
        assert response.status_code == 200, response.content
        step = next(s for s in response.json()["steps"] if s["node_id"] == "ask")
        assert [(a["error_code"], a["retry_at"]) for a in step["attempts"]] == [("flaky", None), (None, None)]
