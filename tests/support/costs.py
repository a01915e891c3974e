"""Spend for the cost-report tests, made by real runs: first attempts, a retry, a crash re-run, an unpriced model, and the SQL that sums it independently.

Every attempt here is written by the engine (local mode, the mock provider; the unpriced
one by the OpenAI SDK against the local protocol server): no attempt row is made by hand.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import connection

from runs.models import Run, Step
from runs.nodes.base import NodeResult
from runs.services import run_start
from tests.support import engine
from tests.support.leases import dead_owner
from tests.support.specs import chain, graph, node, publish, run_local

MICRO = Decimal("0.000001")


def llm_spec(name: str, *, reply: str = "ok", model: str = "mock-1", fail_times: int = 0, budget_usd: str | None = None, **config: Any) -> dict[str, Any]:
    """start -> ask (one llm call) -> end; ``fail_times`` simulated failures before the reply
    (the node retries up to 3 attempts without backoff)."""
    options: dict[str, Any] = {"script": [{"reply": reply}]}
    if fail_times:
        options["fail_times"] = fail_times
    ask = node(
        "ask", "llm",
        config={"prompt": f"Say {reply}", "output_key": "answer", "max_tokens": 50, "model": model, "options": options, **config},
        retry={"max_attempts": 3, "backoff_seconds": 0},
    )
    extra: dict[str, Any] = {}
    if budget_usd is not None:
        extra["settings"] = {"budget_usd": budget_usd}
    return graph([node("start", "start"), ask, node("end", "end")], chain("start", "ask", "end"), name=name, **extra)


def crash_rerun_run(spec: dict[str, Any], *, user: User | None = None) -> Run:
    """A run whose 'ask' step was claimed by a worker that died (its attempt lost), taken
    back by recovery and run again to the end: its second attempt is a crash re-run."""
    with engine.local_mode():
        run = run_start(version=publish(spec), run_input={}, user=user)
    start = engine.step_claim(Step.objects.get(run=run, node_id="start").pk, "tester:1:1")
    engine.step_commit(start, NodeResult(), keep_next=False)
    ask = Step.objects.get(run=run, node_id="ask")
    assert engine.step_claim(ask.pk, dead_owner()) is not None
    with engine.local_mode() as queue:
        queue.extend(engine.recover_once())
        engine.drive_local(run.pk, queue=queue, timeout=60)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


@dataclass
class Spend:
    """The runs made by :func:`make_spend`, by name."""

    runs: dict[str, Run] = field(default_factory=dict)
    users: dict[str, User] = field(default_factory=dict)


def make_spend(*, unpriced: Any = None) -> Spend:
    """Runs of four graphs, started by ``ana`` (a user with no role: she reads only her
    own runs) or by ``ben``:

    - ``alpha``: two first-attempt runs by ana (mock-1), with a $1 budget;
    - ``beta``: one run by ana whose call failed once and was retried (mock-large);
    - ``gamma``: one run by ana re-run after its worker crashed (mock-1);
    - ``hidden``: one run by ben (ana may not read it);
    - ``local``: one run by ana on a model with no known price, when ``unpriced`` (the
      ``sdk_providers`` fixture) is given.
    """
    ana = User.objects.create_user("ana", password="pw-ana-1", email="ana@example.com")
    ben = User.objects.create_user("ben", password="pw-ben-1")
    spend = Spend(users={"ana": ana, "ben": ben})
    alpha = publish(llm_spec("alpha", reply="first", budget_usd="1"))
    spend.runs["alpha1"] = run_local(alpha, {}, user=ana)
    spend.runs["alpha2"] = run_local(alpha, {}, user=ana)
    spend.runs["beta"] = run_local(llm_spec("beta", reply="second try", model="mock-large", fail_times=1), {}, user=ana)
    spend.runs["gamma"] = crash_rerun_run(llm_spec("gamma", reply="again"), user=ana)
    spend.runs["hidden"] = run_local(llm_spec("hidden", reply="not yours", model="mock-large"), {}, user=ben)
    if unpriced is not None:
        from tests.support.llm_server import Reply

        unpriced.set_script([Reply(text="done", usage={"input": 100, "output": 10})])
        spend.runs["local"] = run_local(llm_spec("local", reply="done", provider="openai", model="my-finetune-7b", options={}), {}, user=ana)
    for name, run in spend.runs.items():
        assert run.status == "succeeded", (name, run.error)
    return spend


def sql_totals(*, user_id: int | None = None) -> dict[str, Any]:
    """The spend of every non-test run (or of the runs ``user_id`` started) summed by hand
    in SQL, apart from the ORM and the selectors: priced total, unpriced attempts,
    attempts, and the parts of retries and crash re-runs (an attempt whose previous
    attempt of the same step failed, or was lost)."""
    where = "AND r.created_by_id = %s" if user_id is not None else ""
    sql = f"""
        SELECT
          COALESCE(SUM(a.cost_usd), 0),
          COUNT(*) FILTER (WHERE a.cost_usd IS NULL),
          COUNT(*),
          COALESCE(SUM(CASE WHEN p.status = 'failed' THEN a.cost_usd END), 0),
          COUNT(*) FILTER (WHERE p.status = 'failed'),
          COALESCE(SUM(CASE WHEN p.status = 'lost' THEN a.cost_usd END), 0),
          COUNT(*) FILTER (WHERE p.status = 'lost')
        FROM runs_stepattempt a
        JOIN runs_step s ON s.id = a.step_id
        JOIN runs_run r ON r.id = s.run_id
        LEFT JOIN runs_stepattempt p ON p.step_id = a.step_id AND p.number = a.number - 1 AND a.number > 1
        WHERE (a.cost_usd IS NOT NULL OR a.usage IS NOT NULL) AND NOT r.is_test {where}
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id] if user_id is not None else [])
        total, unpriced, attempts, retry, retries, rerun, reruns = cursor.fetchone()
    money = lambda v: Decimal(str(v)).quantize(MICRO)  # noqa: E731  (SQLite sums as float)
    return {
        "cost_usd": money(total), "unpriced_attempts": unpriced, "attempts": attempts,
        "retry_cost_usd": money(retry), "retry_attempts": retries,
        "crash_rerun_cost_usd": money(rerun), "crash_rerun_attempts": reruns,
    }


def sql_by(group: str, *, user_id: int | None = None) -> dict[str, Decimal]:
    """Priced spend per graph name (``group="graph"``) or per UTC day (``"day"``), in SQL."""
    key = {"graph": "g.name", "day": "DATE(a.started_at)"}[group]
    where = "AND r.created_by_id = %s" if user_id is not None else ""
    sql = f"""
        SELECT {key}, COALESCE(SUM(a.cost_usd), 0)
        FROM runs_stepattempt a
        JOIN runs_step s ON s.id = a.step_id
        JOIN runs_run r ON r.id = s.run_id
        JOIN builder_graphversion v ON v.id = r.graph_version_id
        JOIN builder_graph g ON g.id = v.graph_id
        WHERE (a.cost_usd IS NOT NULL OR a.usage IS NOT NULL) AND NOT r.is_test {where}
        GROUP BY {key}
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [user_id] if user_id is not None else [])
        return {str(k): Decimal(str(v)).quantize(MICRO) for k, v in cursor.fetchall()}
