"""The run page live in Chromium, against a real daphne (ballast.asgi) and real qcluster workers.

- a run started from the builder shows its steps change state as a worker commits them,
  without a reload;
- a worker whose whole process group is SIGKILLed mid-step: the page marks the run and
  the step interrupted (worked out by the server from the lease and the worker's
  heartbeat; the page reads the run again when the lease runs out, as a dead worker
  commits no event), and finished once a fresh worker recovers it, the steps that had
  finished untouched (same ids, attempts and outputs);
- the web process is killed and restarted (the server drops the socket): the page shows
  the events committed meanwhile, none twice.

WebSockets need an ASGI server, so these tests run daphne on the test database instead of
pytest-django's live server. Marker ``live``: ``make test`` runs them on SQLite with the
embedded poller (the browser pass) and again on PostgreSQL with Redis as the channel layer
(BALLAST_CHANNELS_REDIS_URL; there daphne's safety poll is 2 minutes, so what reaches the
page in time came through the push path or the database reads the protocol makes on a
gap or a reconnect). Selectors live in run_page.py.
"""
from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from playwright.sync_api import Page, expect

from runs.engine.store import events as run_events
from runs.models import Run, RunEventKind, Step, StepAttempt
from runs.services import run_start
from tests.support.browser import admin_page, approve_and_drive, screenshot
from tests.support.cluster import describe_db, wait_for_status
from tests.support.daphne import START_TIMEOUT_S, Daphne
from tests.support.run_page import LIVE_TIMEOUT_MS, RunPageView
from tests.support.specs import chain, effect, graph, node, publish, run_local
from tests.support.tools import read_effects
from tests.support.world import approval_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live, pytest.mark.timeout(240)]
RUN_TIMEOUT_S = 90.0










def expect_every_event_once(view: RunPageView, run: Run) -> None:
    """The event log shows seq 1..n of the run's committed events, each once, in order."""
    run.refresh_from_db()
    expect(view.event_rows()).to_have_count(run.read_event_seq(), timeout=LIVE_TIMEOUT_MS)
    assert view.shown_seqs() == list(range(1, run.read_event_seq() + 1))


def held(node_id: str, release: Path) -> dict[str, Any]:
    """A tool step that runs until the test creates ``release``."""
    return node(node_id, "tool", config={"tool": "held_effect", "args": {"label": node_id, "release": str(release)}})


def test_a_run_started_in_the_browser_shows_its_steps_change_state_live(daphne: Daphne, page: Page, cluster_factory, effects_file, tmp_path) -> None:  # noqa: F811
    release = tmp_path / "release-hold"
    version = publish(graph([node("start", "start"), effect("first"), held("hold", release), node("end", "end")], chain("start", "first", "hold", "end")))
    admin_page(page, daphne)
    page.goto(f"{daphne.url}/graphs/{version.graph_id}/")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("dialog").get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run = Run.objects.get(pk=int(re.search(r"/runs/(\d+)/$", page.url).group(1)))
    view = RunPageView(page, daphne.url, run.pk)
    # No worker yet: the run waits in the queue.
    expect(view.heading()).to_contain_text("queued")
    expect(view.connection("Live")).to_be_visible()
    view.mark_loaded()
    screenshot(page, "run-live-queued")

    cluster = cluster_factory("live").start()
    expect(view.node_state("first")).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(view.node_state("hold")).to_have_text("running", timeout=LIVE_TIMEOUT_MS)
    expect(view.heading()).to_contain_text("running")
    screenshot(page, "run-live-running")

    release.touch()
    expect(view.node_state("hold")).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(view.node_state("end")).to_have_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(view.heading()).to_contain_text("succeeded")
    run = wait_for_status(run, "succeeded", timeout=RUN_TIMEOUT_S, clusters=[cluster])
    expect_every_event_once(view, run)
    assert view.not_reloaded()  # the same document throughout
    assert Counter(e["label"] for e in read_effects(str(effects_file))) == {"first": 1, "hold": 1}
    screenshot(page, "run-live-succeeded")


def finished_steps(run: Run) -> dict[str, Any]:
    """What must not change about a run's finished steps: id, attempt, output, finish time, every attempt row."""
    return {
        s.node_id: (s.pk, s.attempt, s.output, s.finished_at,
                    list(StepAttempt.objects.filter(step=s).order_by("number").values_list("id", "number", "status", "worker", "finished_at")))
        for s in Step.objects.filter(run=run, status="succeeded").order_by("id")
    }


def test_a_killed_worker_shows_the_run_interrupted_then_finished_after_a_restart(daphne: Daphne, page: Page, cluster_factory, effects_file) -> None:  # noqa: F811
    version = publish(graph([node("start", "start"), effect("e1"), effect("x"), effect("e2"), node("end", "end")], chain("start", "e1", "x", "e2", "end")))
    run = run_start(version=version, run_input={})
    admin_page(page, daphne)
    view = RunPageView(page, daphne.url, run.pk).open()
    expect(view.heading()).to_contain_text("queued")
    view.mark_loaded()

    # A worker hangs inside x (lease held, heartbeats going), then its whole group is SIGKILLed.
    crashed = cluster_factory("crashed", lease_seconds=5).start(fault="during_execute:x")
    report = crashed.wait_for_fault(timeout=START_TIMEOUT_S)
    assert report["node_id"] == "x"
    expect(view.node_state("x")).to_have_text("running", timeout=LIVE_TIMEOUT_MS)
    expect(view.node_state("e1")).to_have_text("succeeded")
    before = finished_steps(run)
    assert set(before) == {"start", "e1"}
    e1_attempts = view.node_attempts("e1").inner_text()
    crashed.kill()

    # No event commits now (no worker is left): the page learns it from the lease and the heartbeat.
    expect(view.heading()).to_contain_text("interrupted", timeout=LIVE_TIMEOUT_MS)
    expect(view.node_state("x")).to_have_text("interrupted")
    expect(view.canvas_node("x", "interrupted")).to_be_visible()  # the graph marks the node too
    expect(view.interrupted_notice()).to_be_visible()
    assert Step.objects.get(run=run, node_id="x").status == "running", describe_db(run.pk)  # nothing recovered it yet
    screenshot(page, "run-live-interrupted")

    fresh = cluster_factory("fresh", lease_seconds=5).start()
    expect(view.heading()).to_contain_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    run = wait_for_status(run, "succeeded", timeout=RUN_TIMEOUT_S, clusters=[crashed, fresh])
    for node_id in ("x", "e2", "end"):
        expect(view.node_state(node_id)).to_have_text("succeeded")
    expect(view.interrupted_notice()).to_have_count(0)
    # The steps that had finished are untouched: same ids, attempts, outputs and times.
    after = finished_steps(run)
    assert {k: after[k] for k in before} == before, describe_db(run.pk)
    expect(view.node_attempts("e1")).to_have_text(e1_attempts)
    # x ran again (the fault point is before its effect, so the effect ran once), on a new attempt.
    assert [a[1:3] for a in after["x"][4]] == [(1, "lost"), (2, "succeeded")], describe_db(run.pk)
    assert Counter(e["label"] for e in read_effects(str(effects_file))) == {"e1": 1, "x": 1, "e2": 1}
    expect_every_event_once(view, run)
    assert view.not_reloaded()
    screenshot(page, "run-live-recovered")




def test_server_drops_the_socket_and_the_page_shows_missed_events_none_twice(daphne: Daphne, page: Page) -> None:
    run = run_local(publish(approval_spec()), {"name": "Ada"})
    admin_page(page, daphne)
    view = RunPageView(page, daphne.url, run.pk).open()
    expect(view.heading()).to_contain_text("waiting at approval")
    expect(view.event_rows()).to_have_count(run.read_event_seq())
    # The canvas is a lazily loaded chunk (with its CSS): killing the server while it is
    # still on its way fails the page's load (CI at load, 2026-12-04), which is not what
    # this test is about.
    expect(page.locator(".react-flow__node").first).to_be_visible()
    view.mark_loaded()

    daphne.stop()  # the server drops the socket: the web process is gone
    expect(view.connection("Reconnecting")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    for i in range(3):  # events commit while no web process serves the page
        run_events.create(run_id=run.pk, kind=RunEventKind.STEP_REQUEUED, data={"by": f"while down {i}"})
    approve_and_drive(run)
    run.refresh_from_db()
    assert run.status == "succeeded"
    daphne.start()  # a new web process, on the same port

    expect(view.connection("Live")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect_every_event_once(view, run)
    expect(view.heading()).to_contain_text("succeeded", timeout=LIVE_TIMEOUT_MS)
    expect(view.node_state("send")).to_have_text("succeeded")
    # Commit one more event now: a duplicate of an earlier one or a late replay would show
    # before it (events are shown in seq order), so once it is on the page the log is final.
    run_events.create(run_id=run.pk, kind=RunEventKind.STEP_REQUEUED, data={"by": "after the reconnect"})
    expect(view.event_text("by after the reconnect")).to_have_count(1, timeout=LIVE_TIMEOUT_MS)
    expect_every_event_once(view, run)
    for i in range(3):
        expect(view.event_text(f"by while down {i}")).to_have_count(1)
    assert view.not_reloaded()
    screenshot(page, "run-live-after-reconnect")


def test_the_live_pass_uses_the_channel_layer_it_was_given() -> None:
    """The PostgreSQL + Redis pass really pushes through Redis (and the SQLite pass does not):
    with a Redis URL set, a message sent to a run's group comes back through the layer, so
    a Redis that is down or unreachable fails this pass instead of leaving it to the poller."""
    assert settings.BALLAST_LIVE_PUSH is bool(os.environ.get("BALLAST_CHANNELS_REDIS_URL") or os.environ.get("BALLAST_REDIS_URL"))
    if not settings.BALLAST_LIVE_PUSH:
        return
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"

    async def round_trip() -> dict[str, Any]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        group = run_events.group_name(0)
        await layer.group_add(group, channel)
        try:
            await layer.group_send(group, {"type": "run.events", "run": 0, "events": []})
            return await asyncio.wait_for(layer.receive(channel), timeout=30)
        finally:
            await layer.group_discard(group, channel)

    # In a thread of its own: Playwright's sync API keeps an event loop in this one.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, round_trip()).result(timeout=60)["type"] == "run.events"
