"""``cost_report`` (database aggregation per step/run/graph/model/day, table and CSV),
``recompute_costs`` (re-pricing with current prices, batched, audited) and
``validate_graph --estimate`` (pre-run worst case per node and for the costliest path)."""

import copy
import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from genai_prices import extract_usage

from audit.models import AuditEntry
from runs.management.commands.cost_report import cost_rows
from runs.models import Run, Step, StepAttempt
from runs.providers import mock as mock_module
from runs.providers.base import ModelPrice
from tests.support.llm_server import Fault, Reply, assert_stored_cost
from tests.support.specs import run_local

EXAMPLE = json.loads((Path(__file__).resolve().parents[3] / "examples" / "agent_tools.json").read_text())
QUESTION = {"question": "Refund?", "order_id": "A-1001"}
MICRO = Decimal("0.000001")


def example(name, **config):
    spec = copy.deepcopy(EXAMPLE)
    spec["name"] = name
    spec["nodes"][1]["config"].update(config)
    spec["nodes"][1]["retry"] = {"max_attempts": 2, "backoff_seconds": 0}
    return spec


def report(*args):
    out = io.StringIO()
    call_command("cost_report", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def spend(sdk_providers):
    """Three runs: the mock example, and the example on gpt-4o-mini (with one 429 retry)
    and on claude-haiku-4-5, against the local server."""
    tool_turn = Reply(tool_calls=[{"id": "c1", "name": "order_lookup", "arguments": {"order_id": "A-1001"}}], usage={"input": 800, "cached": 256, "output": 40})
    answer = Reply(text="Yes.", usage={"input": 1100, "cached": 768, "output": 12})
    sdk_providers.set_script([tool_turn, answer])
    runs = [run_local(example("mock agent"), QUESTION)]
    sdk_providers.fail(Fault(status=429, retry_after="0"))
    runs.append(run_local(example("openai agent", provider="openai", model="gpt-4o-mini", options={}), QUESTION))
    runs.append(run_local(example("anthropic agent", provider="anthropic", model="claude-haiku-4-5", options={}), QUESTION))
    assert all(r.status == "succeeded" for r in runs), [r.error for r in runs]
    return runs


@pytest.mark.django_db(transaction=True)
def test_report_by_step_matches_the_price_library(spend, sdk_providers):
    rows = {(r["run"], r["node"]): r for r in cost_rows(by="step")}
    calls = sdk_providers.calls()
    ok_calls = [c for c in calls if c.status == 200]
    assert len(ok_calls) == 4 and [c.status for c in calls][0] == 429
    for run, (provider, flavor), pair in zip(spend[1:], [("openai", "chat"), ("anthropic", "default")], (ok_calls[:2], ok_calls[2:]), strict=True):
        for call, key in zip(pair, ("turn-0", "turn-1"), strict=True):
            expected = extract_usage(call.response, provider_id=provider, api_flavor=flavor).calc_price().total_price
            row = rows[(run.pk, f"agent#0/{key}")]
            assert_stored_cost(row["usd"], expected)
            usage = call.response["usage"]
            reported = usage.get("prompt_tokens") or usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
            assert row["input_tokens"] == reported
    openai_turn0 = rows[(spend[1].pk, "agent#0/turn-0")]
    # The refused (429) attempt has no usage: it cost nothing and is not an LLM attempt here.
    assert openai_turn0["attempts"] == 1
    text = report("--by", "step")
    assert "agent#0/turn-1" in text and "claude-haiku-4-5" in text and "TOTAL" in text


@pytest.mark.django_db(transaction=True)
def test_report_groupings_agree_on_the_total(spend):
    total = sum((r.cost_usd for r in Run.objects.all()), Decimal(0))
    for by in ("step", "run", "graph", "model", "day"):
        rows = cost_rows(by=by)
        assert abs(sum((r["usd"] or 0 for r in rows), Decimal(0)) - total) <= MICRO * 6, by
    models = {(r["provider"], r["model"]): r for r in cost_rows(by="model")}
    assert set(models) == {("mock", "mock-1"), ("openai", "gpt-4o-mini"), ("anthropic", "claude-haiku-4-5")}
    assert models[("openai", "gpt-4o-mini")]["cached_input_tokens"] == 256 + 768
    graphs = {r["graph"] for r in cost_rows(by="graph")}
    assert graphs == {"mock agent", "openai agent", "anthropic agent"}


@pytest.mark.django_db(transaction=True)
def test_report_is_two_aggregate_queries_and_csv(spend):
    with CaptureQueriesContext(connection) as queries:
        rows = cost_rows(by="model")
    # One aggregate over the attempts, one over the rollups of pruned runs.
    assert len(queries) == 2 and all("GROUP BY" in q["sql"].upper() for q in queries)
    assert "runs_stepattempt" in queries[0]["sql"] and "runs_costrollup" in queries[1]["sql"]
    parsed = list(csv.DictReader(io.StringIO(report("--by", "model", "--csv"))))
    assert [(r["provider"], r["model"]) for r in parsed] == [(r["provider"], r["model"]) for r in rows]
    assert sum(Decimal(r["usd"]) for r in parsed) == sum(r["usd"] for r in rows)
    assert list(parsed[0]) == ["provider", "model", "attempts", "failed_attempts", "input_tokens", "cached_input_tokens",
                               "cache_write_tokens", "output_tokens", "reasoning_tokens", "usd", "unpriced"]


@pytest.mark.django_db(transaction=True)
def test_report_since_and_day(spend):
    assert cost_rows(by="day", since=_parse("2999-01-01")) == []
    [day] = cost_rows(by="day", since=_parse("2000-01-01"))
    assert day["attempts"] == StepAttempt.objects.filter(usage__isnull=False).count()
    assert "no known price" not in report("--by", "day", "--since", "2000-01-01")


@pytest.mark.django_db(transaction=True)
def test_unpriced_usage_is_reported_as_unknown(sdk_providers):
    sdk_providers.set_script([Reply(text="done", usage={"input": 100, "output": 10})])
    spec = example("local model", provider="openai", model="my-finetune-7b", options={})
    spec["settings"] = {}  # no USD budget: an unknown price could not be held to one
    run = run_local(spec, QUESTION)
    assert run.status == "succeeded" and run.cost_usd == 0
    [row] = cost_rows(by="model")
    assert (row["model"], row["usd"], row["unpriced"]) == ("my-finetune-7b", None, 1)
    err = io.StringIO()
    call_command("cost_report", "--by", "model", stdout=io.StringIO(), stderr=err)
    assert "no known price" in err.getvalue()


def _parse(value):
    from runs.management.commands.cost_report import _parse_date

    return _parse_date(value, "--since")


# --- recompute_costs ---------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_recompute_restores_library_prices_and_audits(spend):
    openai_run = spend[1]
    turn = Step.objects.get(run=openai_run, node_id="agent#0/turn-0")
    right_cost, right_total = turn.cost_usd, Run.objects.get(pk=openai_run.pk).cost_usd
    # Prices were "wrong" when these were recorded.
    StepAttempt.objects.filter(step=turn, status="succeeded").update(cost_usd=Decimal("0.5"), price_version="old")
    Step.objects.filter(pk=turn.pk).update(cost_usd=Decimal("0.5"))
    Run.objects.filter(pk=openai_run.pk).update(cost_usd=right_total - right_cost + Decimal("0.5"))

    dry = io.StringIO()
    call_command("recompute_costs", "--dry-run", stdout=dry)
    assert "would change 1 attempt(s)" in dry.getvalue()
    assert Step.objects.get(pk=turn.pk).cost_usd == Decimal("0.5")

    out = io.StringIO()
    call_command("recompute_costs", "--batch-size", "2", stdout=out)
    assert "changed 1 attempt(s), 1 step(s), 1 run(s)" in out.getvalue()
    turn.refresh_from_db()
    attempt = StepAttempt.objects.get(step=turn, status="succeeded")
    assert turn.cost_usd == attempt.cost_usd == right_cost
    assert attempt.price_version == turn.price_version == attempt.usage["price_version"]
    assert Run.objects.get(pk=openai_run.pk).cost_usd == right_total
    entry = AuditEntry.objects.get(action="cost.recompute")
    assert (entry.actor_type, entry.actor, entry.object_id) == ("system", "recompute_costs", str(openai_run.pk))
    assert Decimal(entry.data["attempts"][0]["old"]) == Decimal("0.5") and Decimal(entry.data["attempts"][0]["new"]) == right_cost

    again = io.StringIO()
    call_command("recompute_costs", stdout=again)
    assert "changed 0 attempt(s)" in again.getvalue()


@pytest.mark.django_db(transaction=True)
def test_recompute_after_a_price_change(monkeypatch):
    run = run_local(example("mock agent"), QUESTION)
    before = run.cost_usd
    doubled = {m: ModelPrice(input=p.input * 2, output=p.output * 2, cached_input=p.cached_input) for m, p in mock_module.MOCK_PRICES.items()}
    monkeypatch.setattr(mock_module.MockProvider, "prices", doubled)
    version = Run.objects.get(pk=run.pk).version
    call_command("recompute_costs", "--run", str(run.pk), "--dry-run", stdout=io.StringIO())
    assert Run.objects.get(pk=run.pk).version == version  # rolled back: nothing moved
    call_command("recompute_costs", "--run", str(run.pk), stdout=io.StringIO())
    run.refresh_from_db()
    assert run.cost_usd == before * 2
    # Every change to a run moves its version: a worker's snapshot of the run taken
    # before the re-pricing must not pass the fast commit's version check after it.
    assert run.version == version + 1
    turns = Step.objects.filter(run=run, kind="model_turn")
    assert sum(t.cost_usd for t in turns) == run.cost_usd


@pytest.mark.django_db(transaction=True)
def test_recompute_leaves_unregistered_providers_alone(settings):
    run = run_local(example("mock agent"), QUESTION)
    settings.BALLAST_PROVIDERS = {"openai": "runs.providers.openai_provider.OpenAIProvider"}
    out = io.StringIO()
    call_command("recompute_costs", stdout=out)
    assert "2 skipped" in out.getvalue()
    assert Run.objects.get(pk=run.pk).cost_usd == run.cost_usd


# --- validate_graph --estimate --------------------------------------------------------
def test_validate_graph_estimate(tmp_path, sdk_providers):
    spec = copy.deepcopy(EXAMPLE)
    spec["nodes"][1]["config"].update(provider="openai", model="gpt-4o", options={})
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(spec))
    out = io.StringIO()
    call_command("validate_graph", str(path), "--estimate", stdout=out)
    text = out.getvalue()
    assert text.startswith("valid\n")
    assert "agent  agent  gpt-4o" in text
    assert "costliest path: start -> agent -> end:" in text

    out = io.StringIO()
    call_command("validate_graph", str(path), "--estimate", "--json", stdout=out)
    data = json.loads(out.getvalue())
    nodes = {n["node_id"]: n for n in data["estimate"]["nodes"]}
    from runs.nodes.agent import AgentNode

    usd, tokens = AgentNode().estimate_cost(AgentNode.config_model.model_validate(spec["nodes"][1]["config"]), {})
    assert (Decimal(nodes["agent"]["usd"]), nodes["agent"]["tokens"]) == (usd, tokens)
    assert data["estimate"]["costliest_path"] == {
        "nodes": ["start", "agent", "end"], "tokens": tokens, "usd": str(usd), "unpriced": [], "loops": []
    }


def test_estimate_picks_the_costlier_branch_and_names_unpriced_nodes(tmp_path, sdk_providers):
    from tests.support.specs import edge, graph, node

    cheap = {"provider": "openai", "model": "gpt-4o-mini", "prompt": "hi", "max_tokens": 100, "output_key": "a"}
    dear = {"provider": "openai", "model": "gpt-4o", "prompt": "hi", "max_tokens": 5000, "output_key": "b"}
    local = {"provider": "openai", "model": "my-finetune-7b", "prompt": "hi", "max_tokens": 100, "output_key": "c"}
    spec = graph(
        [node("start", "start"), node("route", "condition", config={"expression": "True"}),
         node("cheap", "llm", config=cheap), node("dear", "llm", config=dear), node("local", "llm", config=local),
         node("end", "end")],
        [edge("start", "route"), edge("route", "cheap", "true"), edge("route", "dear", "false"),
         edge("cheap", "end"), edge("dear", "local"), edge("local", "end")],
    )
    path = tmp_path / "g.json"
    path.write_text(json.dumps(spec))
    out = io.StringIO()
    call_command("validate_graph", str(path), "--estimate", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["valid"], result["errors"]
    best = result["estimate"]["costliest_path"]
    assert best["nodes"] == ["start", "route", "dear", "local", "end"]
    assert best["unpriced"] == ["local"]


@pytest.mark.parametrize(
    ("value", "text"),
    [(Decimal("0E-12"), "0"), (Decimal("-0.000000"), "0"), (Decimal("0.001250000000"), "0.00125"), (Decimal("1E+2"), "100"), (Decimal("12.5"), "12.5")],
)
def test_decimal_amounts_print_without_exponents(value, text):
    from runs.reports.formatting import format_decimal, format_usd

    assert format_decimal(value) == text
    assert format_usd(value) == f"${text}" and format_usd(None) == "unknown"


@pytest.mark.django_db(transaction=True)
def test_zero_costs_print_as_0_in_the_commands(sdk_providers):
    sdk_providers.set_script([Reply(text="Yes.", usage={"input": 10, "output": 2})])
    run = run_local(example("free agent"), QUESTION)
    assert run.status == "succeeded", run.error
    # A free model (a local server, a zero price): the stored amounts are exact zeros at
    # the columns' scale, which str() prints as 0E-12.
    StepAttempt.objects.filter(step__run=run).exclude(cost_usd=None).update(cost_usd=Decimal("0E-12"))
    Run.objects.filter(pk=run.pk).update(cost_usd=Decimal("0E-12"))
    run.refresh_from_db()
    assert run.cost_usd is not None and run.cost_usd.is_zero() and str(run.cost_usd) != "0"
    for by in ("run", "step", "graph"):
        table = report("--by", by)
        assert "E-" not in table and "E+" not in table, table
        assert "0.000000" not in table, table
    rows = list(csv.DictReader(io.StringIO(report("--by", "run", "--csv"))))
    assert [r["usd"] for r in rows if r["run"] == str(run.pk)] == ["0"]
    from builder.management.commands.run_graph import run_summary

    assert run_summary(run)["cost_usd"] == "0"
