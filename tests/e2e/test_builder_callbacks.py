"""The builder's Triggers panel in a browser: add a completion callback (a URL the outbound guard refuses shown under its field, the secret shown once), see an undeliverable delivery with its last error, and redeliver it to a real receiver."""
from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from builder.services import graph_publish
from graphs.models import Graph, GraphVersion
from tests.support import engine
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import make_graph, open_builder
from tests.support.specs import run_local
from tests.support.webhooks import order_spec
from triggers.callback_sending import delivery_send_next
from triggers.models import CallbackDelivery

pytestmark = pytest.mark.django_db(transaction=True)


def test_add_a_callback_see_an_undeliverable_one_and_redeliver_it(live_server: Any, page: Page, receiver: Any, settings: Any) -> None:
    settings.BALLAST_CALLBACK_MAX_ATTEMPTS = 1
    pat = make_user("pat", "builders", "operators")
    graph_id = make_graph("Orders", {**order_spec(), "name": "Orders"}, user=pat)
    graph = Graph.objects.get(pk=graph_id)
    graph.operators.add(pat)
    graph_publish(graph=graph, user=pat, message="first")
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Triggers", exact=True).click()
    panel = page.get_by_role("region", name="Completion callbacks")
    expect(panel.get_by_text("No callbacks yet.")).to_be_visible()
    panel.get_by_role("button", name="New callback").click()
    dialog = page.get_by_role("dialog", name="New completion callback")
    dialog.get_by_label("Name").fill("notify")
    dialog.get_by_label("URL").fill("http://10.0.0.5/hook")
    dialog.get_by_role("button", name="Create callback").click()
    expect(dialog.locator(".field-error", has_text="outbound guard")).to_be_visible()
    screenshot(page, "callbacks-create-refused-url")
    dialog.get_by_label("URL").fill(receiver.url)
    dialog.get_by_role("button", name="Create callback").click()
    shown = page.get_by_role("dialog", name="Callback “notify” created")
    expect(shown).to_be_visible()
    assert shown.get_by_label("Signing secret").input_value().startswith("whsec_")
    screenshot(page, "callbacks-secret-once")
    shown.get_by_role("button", name="I have copied it").click()
    expect(panel.get_by_role("listitem", name="Callback notify")).to_be_visible()
    receiver.answers = [500]
    run = run_local(GraphVersion.objects.get(graph=graph, is_test=False), {"x": 2})
    delivery_send_next(engine.db_now(), "tester:1:1")
    assert CallbackDelivery.objects.get(run=run).status == "failed"
    log = panel.get_by_role("table", name="Callback deliveries")
    expect(log.get_by_text("Last error: HTTP 500: {\"error\": \"receiver says no\"}")).to_be_visible()
    expect(log.get_by_role("link", name=f"run #{run.pk}")).to_be_visible()
    log.scroll_into_view_if_needed()
    screenshot(page, "callbacks-panel")
    log.get_by_role("button", name="Redeliver").click()
    expect(log.get_by_text("pending")).to_be_visible()
    delivery_send_next(engine.db_now(), "tester:1:1")
    expect(log.get_by_text("delivered")).to_be_visible()
    screenshot(page, "callbacks-redelivered")
    assert receiver.ids() == [CallbackDelivery.objects.get(run=run).message_id] * 2
