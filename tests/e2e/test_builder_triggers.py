"""The builder's Triggers panel in a browser: create a webhook, copy its URL and secret, send it
a signed delivery over a real socket and follow its run; listen for a test event and see its
input pinned as the draft's test input; a publish that breaks a webhook names it."""
from __future__ import annotations

import copy
import re

import pytest
from playwright.sync_api import Page, expect

from builder.services import graph_draft_save, graph_publish
from graphs.models import Graph
from tests.support.browser import make_user, screenshot, sign_in
from tests.support.builder_steps import make_graph, open_builder, stored_spec, wait_saved
from tests.support.webhooks import order_spec, send_signed
from triggers.services import trigger_create

pytestmark = pytest.mark.django_db(transaction=True)


def orders_graph() -> tuple[int, object]:
    """Pat (builder and operator) and a published graph whose input needs an integer ``x``."""
    pat = make_user("pat", "builders", "operators")
    graph_id = make_graph("Orders", {**order_spec(), "name": "Orders"}, user=pat)
    graph = Graph.objects.get(pk=graph_id)
    graph.operators.add(pat)
    graph_publish(graph=graph, user=pat, message="first")
    return graph_id, pat


def open_triggers(page: Page, base_url: str, graph_id: int):
    open_builder(page, base_url, graph_id)
    page.get_by_role("button", name="Triggers", exact=True).click()
    return page.get_by_role("region", name="Triggers")


def test_create_a_webhook_send_a_signed_delivery_and_follow_its_run(live_server, page: Page) -> None:
    graph_id, _ = orders_graph()
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    panel = open_triggers(page, live_server.url, graph_id)
    expect(panel.get_by_text("No webhooks yet.")).to_be_visible()
    panel.get_by_role("button", name="New webhook").click()
    dialog = page.get_by_role("dialog", name="New webhook")
    # Refusals are shown under their fields: no name, then a mapping without the required x.
    dialog.get_by_role("button", name="Create webhook").click()
    expect(dialog.locator(".field-error", has_text="may not be blank")).to_be_visible()
    dialog.get_by_label("Name").fill("orders")
    dialog.get_by_role("button", name="+ Map a field").click()
    dialog.get_by_label("Input field 1").fill("event")
    dialog.get_by_label("Source 1").fill("header:X-Event")
    dialog.get_by_role("button", name="Create webhook").click()
    expect(dialog.locator(".field-error", has_text="requires 'x'")).to_be_visible()
    screenshot(page, "triggers-create-field-errors")
    dialog.get_by_role("button", name="Remove mapping 1").click()
    dialog.get_by_role("button", name="Create webhook").click()

    shown = page.get_by_role("dialog", name="Webhook “orders” created")
    expect(shown.get_by_text("you will not see them again")).to_be_visible()
    url = shown.get_by_label("URL", exact=True).input_value()
    secret = shown.get_by_label("Secret", exact=True).input_value()
    assert url.startswith(f"{live_server.url}/api/v1/hooks/") and len(secret) > 30
    shown.get_by_role("button", name="Copy URL").click()
    expect(shown.get_by_role("button", name="Copy URL")).to_have_text("Copied")
    screenshot(page, "triggers-secret-shown-once")
    shown.get_by_role("button", name="I have copied it").click()

    card = panel.get_by_role("listitem", name="Webhook orders")
    expect(card.get_by_text("Runs the latest published version as pat")).to_be_visible()
    card.get_by_role("button", name="Deliveries").click()
    expect(card.get_by_text("No deliveries yet.")).to_be_visible()

    status, answer = send_signed(url, secret, {"x": 4}, delivery_id="evt-1")
    assert status == 202, answer
    run_link = card.get_by_role("link", name=f"run #{answer['run']}")
    expect(run_link).to_be_visible()
    expect(card.get_by_role("table", name="Recent deliveries").get_by_text("202")).to_be_visible()
    # A refused delivery is listed with its reason, and starts nothing.
    assert send_signed(url, "not the secret", {"x": 4})[0] == 401
    expect(card.get_by_text("The signature does not match the body and timestamp.")).to_be_visible()
    screenshot(page, "triggers-deliveries")
    run_link.click()
    page.wait_for_url(re.compile(rf"/runs/{answer['run']}/$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run #{answer['run']}")
    # The run says what started it: the webhook, and the user it ran as.
    expect(page.locator("dt", has_text="Started by").locator("xpath=following-sibling::dd[1]")).to_have_text("webhook orders, as pat")
    screenshot(page, "triggers-run-started-by-webhook")


def test_disable_rotate_and_delete_from_the_panel(live_server, page: Page) -> None:
    graph_id, pat = orders_graph()
    trigger_create(graph=Graph.objects.get(pk=graph_id), name="orders", user=pat)
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    panel = open_triggers(page, live_server.url, graph_id)
    card = panel.get_by_role("listitem", name="Webhook orders")
    card.get_by_label("Enabled (orders)").uncheck()
    expect(card.get_by_text("disabled", exact=True)).to_be_visible()
    card.get_by_role("button", name="Rotate secret").click()
    expect(card.get_by_role("alertdialog")).to_contain_text("stops working at once")
    card.get_by_role("alertdialog").get_by_role("button", name="Rotate secret").click()
    rotated = page.get_by_role("dialog", name="New secret for “orders”")
    expect(rotated.get_by_text("you will not see it again")).to_be_visible()
    assert len(rotated.get_by_label("Secret", exact=True).input_value()) > 30
    screenshot(page, "triggers-rotated-secret")
    rotated.get_by_role("button", name="I have copied it").click()
    card.get_by_role("button", name="Delete").click()
    card.get_by_role("button", name="Delete webhook").click()
    expect(panel.get_by_text("No webhooks yet.")).to_be_visible()


def test_listen_for_a_test_event_pins_its_input_for_the_run_dialog(live_server, page: Page) -> None:
    graph_id, pat = orders_graph()
    # Disabled: the test event is captured without starting a run.
    created = trigger_create(graph=Graph.objects.get(pk=graph_id), name="orders", user=pat, enabled=False)
    url = f"{live_server.url}/api/v1/hooks/{created.token}/"
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    panel = open_triggers(page, live_server.url, graph_id)
    card = panel.get_by_role("listitem", name="Webhook orders")
    card.get_by_role("button", name="Listen for test event").click()
    expect(card.get_by_text("Listening for the next delivery")).to_be_visible()
    screenshot(page, "triggers-listening")
    status, answer = send_signed(url, created.secret or "", {"x": 9, "event": "order.created"})
    assert (status, answer) == (202, {"run": None, "status": "captured", "replayed": False})
    expect(card.get_by_text("its input is pinned as the draft's test input")).to_be_visible()
    pinned = panel.get_by_role("region", name="Pinned test input")
    expect(pinned).to_contain_text('"x": 9')
    wait_saved(page)
    assert stored_spec(page, live_server.url, graph_id)["test_input"] == {"x": 9, "event": "order.created"}
    screenshot(page, "triggers-pinned")
    page.get_by_role("button", name="Run", exact=True).click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text("Prefilled with the draft's pinned test input")).to_be_visible()
    expect(dialog.locator('[id="input.x"]')).to_have_value("9")
    screenshot(page, "triggers-run-dialog-prefilled")


def breaking_draft(graph: Graph) -> None:
    """Save a draft whose input schema also requires ``customer`` (a body-as-input webhook breaks)."""
    spec = copy.deepcopy(graph.draft)
    spec["input_schema"] = {"type": "object", "properties": {"x": {"type": "integer"}, "customer": {"type": "string"}}, "required": ["x", "customer"]}
    graph_draft_save(graph=graph, spec=spec, base_revision=graph.draft_revision)


def test_the_publish_dialog_names_the_webhook_a_new_schema_breaks_before_publishing(live_server, page: Page) -> None:
    graph_id, pat = orders_graph()
    graph = Graph.objects.get(pk=graph_id)
    trigger_create(graph=graph, name="orders", user=pat)
    breaking_draft(graph)
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Publish", exact=True).click()
    dialog = page.get_by_role("dialog", name="Publish a version")
    expect(dialog.get_by_text("This version breaks a trigger that follows the latest version.")).to_be_visible()
    expect(dialog.get_by_role("alert")).to_contain_text("Webhook “orders”: input.customer: Version 2 requires 'customer'")
    screenshot(page, "triggers-publish-warning-ahead")
    dialog.get_by_role("button", name="Publish", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Published version 2.")).to_be_visible()


def test_a_webhook_added_while_the_dialog_was_open_is_named_after_the_publish(live_server, page: Page) -> None:
    graph_id, pat = orders_graph()
    graph = Graph.objects.get(pk=graph_id)
    breaking_draft(graph)
    sign_in(page, live_server.url, "pat", "pw-pat-1")
    open_builder(page, live_server.url, graph_id)
    page.get_by_role("button", name="Publish", exact=True).click()
    dialog = page.get_by_role("dialog", name="Publish a version")
    expect(dialog.locator("form")).to_have_attribute("data-checked", "true")
    expect(dialog.get_by_role("alert")).to_have_count(0)
    trigger_create(graph=graph, name="orders", user=pat)  # someone else, meanwhile
    dialog.get_by_role("button", name="Publish", exact=True).click()
    warned = page.get_by_role("dialog", name="Published version 2, with warnings")
    expect(warned.get_by_role("alert")).to_contain_text("Webhook “orders”")
    expect(warned.get_by_role("alert")).to_contain_text("input.customer: Version 2 requires 'customer'")
    screenshot(page, "triggers-publish-warning")
    warned.get_by_role("button", name="Open Triggers").click()
    expect(page.get_by_role("region", name="Triggers").get_by_role("listitem", name="Webhook orders")).to_be_visible()
