"""Prompt-cache writes and reads priced as genai-prices prices them, end to end: an LLM step on
Anthropic through the real SDK against the local server, its attempt, the run total, the
cost report, the costs API, ``recompute_costs`` and the budget's worst case (issue 28)."""

import io
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from genai_prices import extract_usage

from runs.management.commands.cost_report import cost_rows
from runs.models import Run, Step, StepAttempt
from runs.nodes.llm import LLMNode
from runs.providers import pricing
from runs.vocabulary import Usage
from tests.support.llm_server import Reply, assert_stored_cost
from tests.support.specs import chain, graph, node, run_local

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5"
# Issue 28's figures: 100,000 tokens written to the prompt cache and 200 output tokens
# cost $0.378 at genai-prices' $3.75/M cache writes and $15/M output; priced as plain
# input ($3/M) they came to $0.303.
WRITES = {"input": 100_000, "cache_write": 100_000, "output": 200}


def spec(**config):
    ask = {"provider": "anthropic", "model": MODEL, "prompt": "Summarise: {{ text }}", "max_tokens": 500,
           "output_key": "summary", **config}
    return graph(
        [node("start", "start"), node("ask", "llm", config=ask), node("end", "end")],
        chain("start", "ask", "end"),
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    )


def library_price(call):
    return extract_usage(call.response, provider_id="anthropic").calc_price().total_price


def test_cache_writes_cost_what_the_library_says_in_attempts_reports_and_the_api(sdk_providers):
    sdk_providers.set_script([Reply(text="Short.", usage=WRITES)])
    run = run_local(spec(), {"text": "a long document"})
    assert run.status == "succeeded", run.error
    [call] = sdk_providers.calls()
    assert library_price(call) == Decimal("0.378")

    attempt = StepAttempt.objects.get(step__run=run, step__node_id="ask")
    assert_stored_cost(attempt.cost_usd, Decimal("0.378"))
    assert attempt.usage["cache_write_tokens"] == 100_000 and attempt.usage["input_tokens"] == 100_000
    assert_stored_cost(run.cost_usd, Decimal("0.378"))

    [row] = cost_rows(by="model")
    assert row["usd"] == Decimal("0.378000") and row["cache_write_tokens"] == 100_000
    out = io.StringIO()
    call_command("cost_report", "--by", "model", stdout=out)
    assert "0.378" in out.getvalue()

    admin = get_user_model().objects.create_superuser("admin", "admin@localhost", "pw")
    client = Client()
    client.force_login(admin)
    response = client.get("/api/v1/costs/?group_by=model")
    assert response.status_code == 200, response.content
    [api_row] = response.json()["results"]
    assert (api_row["key"], Decimal(api_row["cost_usd"]), api_row["cache_write_tokens"]) == (MODEL, Decimal("0.378"), 100_000)
    totals = client.get("/api/v1/costs/totals/").json()
    assert Decimal(totals["cost_usd"]) == Decimal("0.378") and totals["cache_write_tokens"] == 100_000


def test_one_hour_writes_and_reads_in_one_call(sdk_providers):
    usage = {"input": 60_000, "cached": 20_000, "cache_write": 30_000, "cache_write_1h": 10_000, "output": 400}
    sdk_providers.set_script([Reply(text="Short.", usage=usage)])
    run = run_local(spec(), {"text": "a long document"})
    [call] = sdk_providers.calls()
    expected = library_price(call)
    # 10,000 plain at $3/M, 20,000 read at $0.30/M, 20,000 five-minute writes at $3.75/M,
    # 10,000 one-hour writes at $6/M, 400 output at $15/M.
    assert expected == Decimal("0.03") + Decimal("0.006") + Decimal("0.075") + Decimal("0.06") + Decimal("0.006")
    assert_stored_cost(run.cost_usd, expected)
    step = Step.objects.get(run=run, node_id="ask")
    assert (step.usage["cached_input_tokens"], step.usage["cache_write_tokens"], step.usage["cache_write_1h_tokens"]) == (20_000, 30_000, 10_000)


def test_recompute_costs_reprices_cache_writes(sdk_providers):
    sdk_providers.set_script([Reply(text="Short.", usage=WRITES)])
    run = run_local(spec(), {"text": "a long document"})
    # As the plain-input pricing recorded it.
    attempt = StepAttempt.objects.get(step__run=run, step__node_id="ask")
    StepAttempt.objects.filter(pk=attempt.pk).update(cost_usd=Decimal("0.303"))
    Step.objects.filter(pk=attempt.step_id).update(cost_usd=Decimal("0.303"))
    Run.objects.filter(pk=run.pk).update(cost_usd=Decimal("0.303"))
    out = io.StringIO()
    call_command("recompute_costs", stdout=out)
    assert "changed 1 attempt(s), 1 step(s), 1 run(s)" in out.getvalue()
    run.refresh_from_db()
    assert_stored_cost(run.cost_usd, Decimal("0.378"))
    assert_stored_cost(Step.objects.get(pk=attempt.step_id).cost_usd, Decimal("0.378"))


def test_worst_case_covers_a_prompt_written_to_the_cache(sdk_providers):
    # Anthropic may write the whole prompt to the cache with a one-hour lifetime (two times
    # the input price): the budget's worst case (and the builder's estimate) must cover it.
    text = "The quick brown fox jumps over the lazy dog. " * 100
    cfg = LLMNode.config_model.model_validate({"provider": "anthropic", "model": MODEL, "prompt": "Summarise: {{ text }}", "max_tokens": 500})
    usd, tokens = LLMNode().estimate_cost(cfg, {"text": text})
    input_tokens = tokens - 500
    hour = Usage("anthropic", MODEL, input_tokens=input_tokens, output_tokens=500, cache_write_tokens=input_tokens,
                 cache_write_1h_tokens=input_tokens)
    assert usd == pricing.cost(hour, model=MODEL, provider_id="anthropic")

    sdk_providers.set_script([Reply(text="x", usage={"input": input_tokens, "cache_write": input_tokens, "cache_write_1h": input_tokens,
                                                     "output": 500})])
    budgeted = spec()
    budgeted["settings"] = {"budget_usd": str(usd)}
    run = run_local(budgeted, {"text": text})
    assert run.status == "succeeded", run.error
    assert Decimal(0) < run.cost_usd <= usd
