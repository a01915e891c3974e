"""The bundled examples run offline end to end through the CLI (run_graph, approve)."""
from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from builder.validation import validate_spec
from runs.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_graph(name: str, run_input: dict) -> tuple[Run, dict]:
    out = io.StringIO()
    try:
        call_command("run_graph", str(EXAMPLES / name), "--input", json.dumps(run_input), "--wait", stdout=out)
    except SystemExit:
        pass
    summary = json.loads(out.getvalue())  # with --wait, stdout is the JSON summary alone
    return Run.objects.get(pk=summary["run"]), summary


def approve(run: Run, *extra: str) -> dict:
    out = io.StringIO()
    try:
        call_command("approve", str(run.pk), *extra, stdout=out)
    except SystemExit:
        pass
    text = out.getvalue()
    return json.loads(text[text.index("{"):])


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_every_example_is_valid(path):
    result = validate_spec(json.loads(path.read_text()))
    assert result.ok, [str(i) for i in result.issues]


# A card is 200 px wide and at most about 110 px tall (three output handles); an output
# handle's label sits in the gap right of its card. Cards in one band of rows must leave room
# for the label and the edge's arrow; cards in one column, a visible gap.
CARD_WIDTH, CARD_HEIGHT = 200, 110
COLUMN_GAP, ROW_GAP = 60, 20


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_example_cards_never_touch(path):
    nodes = json.loads(path.read_text())["nodes"]
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            dx = abs(a["position"]["x"] - b["position"]["x"])
            dy = abs(a["position"]["y"] - b["position"]["y"])
            assert dx >= CARD_WIDTH + COLUMN_GAP or dy >= CARD_HEIGHT + ROW_GAP, (a["id"], b["id"], dx, dy)


def test_research_fan_out_joins_three_findings_in_order():
    run, summary = run_graph("research_fanout.json", {"topic": "AI coding assistants"})
    assert summary["status"] == "succeeded"
    findings = summary["state"]["findings"]
    assert [f.split(":")[0] for f in findings] == ["Academic", "Market", "Web"]  # (depth, node id) order
    assert summary["output"]["brief"].startswith("Brief:")
    assert Decimal(summary["cost_usd"]) > 0


def test_research_fan_out_forked_at_plan_with_patched_findings_keeps_the_patch():
    from runs.engine import api as engine
    from runs.services import run_fork

    run, _ = run_graph("research_fanout.json", {"topic": "AI coding assistants"})
    plan = Step.objects.get(run=run, node_id="plan")
    with engine.local_mode() as queue:
        fork = run_fork(run=run, step_id=plan.pk, state_patch={"findings": ["PATCHED"]}, actor="tester")
        engine.drive_local(fork.pk, queue=queue, timeout=60)
    fork.refresh_from_db()
    assert fork.status == "succeeded", fork.error
    findings = fork.state["findings"]
    assert findings[0] == "PATCHED" and [f.split(":")[0] for f in findings[1:]] == ["Academic", "Market", "Web"]


def test_support_triage_waits_for_approval_then_emails(mailoutbox):
    ticket = {"subject": "Site is down", "body": "Your checkout page returns 500 since this morning.", "customer_email": "ada@example.com"}
    run, summary = run_graph("support_triage.json", {"ticket": ticket})
    assert summary["status"] == "waiting" and summary["approvals"][0]["node_id"] == "review"
    assert [m.to for m in mailoutbox] == [["oncall@example.com"]]  # urgent: on-call paged before the gate
    done = approve(run, "--comment", "looks good")
    assert done["status"] == "succeeded"
    assert [m.to for m in mailoutbox][-1] == ["ada@example.com"]
    assert Step.objects.filter(run=run, node_id="classify").count() == 1  # nothing before the gate re-ran


def test_refund_agent_retries_lookup_within_bound_and_refunds_once():
    run, summary = run_graph("refund_agent.json", {"order_id": "A-1002", "reason": "arrived broken"})
    assert summary["status"] == "waiting"
    assert Step.objects.filter(run=run, node_id="lookup").count() == 2  # lagging replica: found on the 2nd lookup
    done = approve(run)
    assert done["status"] == "succeeded" and done["state"]["outcome"] == "refunded 129.5 USD"
    assert done["state"]["refund"]["status"] == "issued"


def test_refund_agent_reject_and_not_found_paths():
    run, _ = run_graph("refund_agent.json", {"order_id": "A-1001", "reason": "changed my mind"})
    rejected = approve(run, "--reject", "--comment", "not our fault")
    assert rejected["status"] == "succeeded" and rejected["state"]["outcome"].startswith("rejected by cli:")
    _, late = run_graph("refund_agent.json", {"order_id": "A-1003", "reason": "too late?"})
    assert late["status"] == "succeeded" and late["state"]["outcome"].startswith("denied:")
    _, missing = run_graph("refund_agent.json", {"order_id": "Z-9999", "reason": "?"})
    assert missing["state"]["outcome"] == "order Z-9999 not found after 3 lookups"
