"""Triggers and child runs (issue 26): webhook delivery to run committed, schedule fire lag with many due at once, and a child run's overhead over an inline node.

- ``python -m bench webhooks [--n DELIVERIES]``: a daphne server (ballast.asgi) in its own
  process group; a real HTTP client (http.client, keep-alive) sends signed deliveries to a
  webhook trigger. Latency: send to the ``202``, which the server answers only once the
  run row is committed (one client, ``--n`` deliveries, default 100, after 5 warm-up
  ones). Throughput: deliveries accepted (202) per second by ``CLIENTS`` concurrent
  clients sending ``2 * --n`` deliveries in all. Every answer is checked (status, a run id)
  and so is the table (one run per delivery, source ``webhook bench``). No worker runs:
  the runs stay queued, since the figure is the web process's accept path.
- ``python -m bench schedules [--n SCHEDULES]``: ``--n`` schedules (default 1,000) of a
  one-transform graph, all due at the same second, fired by one real qcluster with two
  worker processes. Figures on the database clock: tick time to ``ScheduleTick.fired_at``
  (fire lag) and tick time to the run's start step ``started_at`` (its claim), p50 and
  p95. Checks one tick per schedule, each ``started``, and every run succeeded. The tick's
  ``fired_at`` is what the engine records: the firing claim's due_by, its now plus
  DUE_SLACK (0.25 s), so the fire lag reads up to 0.25 s high.
- ``python -m bench subgraph [--n PAIRS]``: a ``subgraph`` node calling a published
  one-transform child graph against the same transform inline, through one qcluster (two
  workers), alternated run by run; run created_at to finished_at, median of ``--n`` runs
  each (default 30). The overhead per call is the median of the paired differences.

Each case prints the machine's load average (os.getloadavg) with its figures: on a shared
machine they are upper bounds.
"""
from __future__ import annotations

import http.client
import json
import os
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from bench import graphs
from bench.cases import RUN_TIMEOUT, db_seconds, start_queued, wait_terminal
from bench.cluster import Cluster, WebServer, wait_until
from bench.core import Reporter, check, log, reset_tables, summary
from bench.loopback import free_port

# Concurrent clients for the throughput figure: a few, as a caller's retry pool would.
CLIENTS = 4


def load_note() -> tuple[list[float], str]:
    """(the 1, 5 and 15 minute load averages, words naming them with the core count)."""
    load = [round(v, 2) for v in os.getloadavg()]
    return load, f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores"


def _admin():
    from django.contrib.auth import get_user_model

    User = get_user_model()
    return User.objects.filter(username="bench-admin").first() or User.objects.create_superuser("bench-admin", "admin@localhost", None)


def _reset_triggers() -> None:
    """Empty the engine's tables and the triggers app's (schedules, webhooks, their logs):
    a schedule left behind would fire in a later case."""
    from django.apps import apps

    for model in reversed(list(apps.get_app_config("triggers").get_models())):
        model.objects.all().delete()
    reset_tables()


def _one_transform(name: str) -> dict[str, Any]:
    """start -> double (y = x * 2) -> end; input ``{x: integer}`` required."""
    spec = graphs.linear(1)
    spec["name"] = name
    spec["description"] = "Benchmark: one transform, y = x * 2."
    spec["input_schema"] = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    spec["state"] = {"y": {"reducer": "replace", "default": 0}}
    spec["nodes"][1]["config"] = {"set": {"y": "x * 2"}}
    spec["nodes"][-1]["config"] = {"output": ["y"]}
    return spec


# --------------------------------------------------------------------------- webhooks


class _Client:
    """One keep-alive HTTP connection to the web server that sends signed deliveries."""

    def __init__(self, port: int, path: str, secret: str):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.path = path
        self.secret = secret

    def send(self, x: int) -> tuple[float, int, dict[str, Any]]:
        """POST ``{"x": x}`` signed, with a fresh delivery id; (ms to the answer, status, body)."""
        from triggers.services import signature

        body = json.dumps({"x": x}).encode()
        stamp = str(int(time.time()))
        headers = {"Content-Type": "application/json", "X-Ballast-Timestamp": stamp,
                   "X-Ballast-Signature": signature(self.secret, stamp, body), "X-Ballast-Delivery": uuid.uuid4().hex}
        t0 = time.perf_counter()
        self.conn.request("POST", self.path, body=body, headers=headers)
        response = self.conn.getresponse()
        raw = response.read()
        elapsed = (time.perf_counter() - t0) * 1000
        return elapsed, response.status, json.loads(raw or b"null")

    def close(self) -> None:
        self.conn.close()


def _accepted(status: int, answer: Any) -> int:
    check(status == 202 and isinstance(answer, dict) and isinstance(answer.get("run"), int) and answer.get("replayed") is False,
          f"delivery answered {status} {answer!r}, expected 202 with a new run")
    return int(answer["run"])


def case_webhooks(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """Webhook delivery to run committed (p50, p95) and deliveries accepted per second."""
    from runs.models import Run
    from triggers.services import trigger_create

    count = n or 100
    _reset_triggers()
    admin = _admin()
    version = graphs.publish(_one_transform("bench-webhook"))
    created = trigger_create(graph=version.graph, name="bench", user=admin)
    check(created.secret, "the webhook has no secret")
    path = f"/api/v1/hooks/{created.token}/"
    port = free_port()
    web = WebServer("webhooks-web", db, port)
    # The webhook's own rate (120/minute by default) would answer 429 here; the counters
    # get a prefix of their own so no other process's Redis keys are touched.
    web.extra_env = {"BALLAST_WEBHOOK_RATE": "1000000/minute", "BALLAST_CACHE_KEY_PREFIX": f"bench-{os.getpid()}"}
    latencies: list[float] = []
    run_ids: list[int] = []
    with web:
        web.wait_ready()
        client = _Client(port, path, created.secret or "")
        try:
            for i in range(5):  # warm-up: the first request imports the views, opens the connection
                _, status, answer = client.send(i)
                run_ids.append(_accepted(status, answer))
            load_before, _ = load_note()
            for i in range(count):
                ms, status, answer = client.send(i)
                run_ids.append(_accepted(status, answer))
                latencies.append(ms)
        finally:
            client.close()

        total = 2 * count
        per_client = [total // CLIENTS + (1 if k < total % CLIENTS else 0) for k in range(CLIENTS)]
        answers: list[list[tuple[int, Any]]] = [[] for _ in range(CLIENTS)]
        errors: list[BaseException] = []
        barrier = threading.Barrier(CLIENTS + 1)

        def work(k: int) -> None:
            c = _Client(port, path, created.secret or "")
            try:
                barrier.wait()
                for i in range(per_client[k]):
                    _, status, answer = c.send(i)
                    answers[k].append((status, answer))
            except BaseException as exc:  # reported below, after every thread ended
                errors.append(exc)
            finally:
                c.close()

        threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join(RUN_TIMEOUT)
        wall = time.perf_counter() - t0
        check(not errors, f"a client failed: {errors[:1]!r}")
        check(not any(t.is_alive() for t in threads), "a client did not finish")
    for status, answer in (a for per in answers for a in per):
        run_ids.append(_accepted(status, answer))
    check(len(set(run_ids)) == len(run_ids), "two deliveries answered with the same run")
    rows = Run.objects.filter(pk__in=run_ids, source="webhook bench").count()
    check(rows == len(run_ids), f"{rows} committed runs from the webhook, expected {len(run_ids)}")
    load, words = load_note()
    median, p95 = summary(latencies)
    rate = total / wall
    log(f"webhooks on {db}: delivery to run committed {median:.1f} ms p50, {p95:.1f} ms p95; "
        f"{rate:.0f} deliveries/s accepted with {CLIENTS} clients; {words}")
    rep.emit("webhooks.latency", n=len(latencies), runs=1, samples=latencies, unit="ms", load=load_before, load_after=load,
             server="daphne ballast.asgi", note=f"signed delivery sent to 202 (answered after the run row commits), one keep-alive client; {words}")
    rep.emit("webhooks.accepted_per_s", n=total, runs=1, samples=[rate], unit="deliveries/s", clients=CLIENTS, seconds=round(wall, 3),
             load=load, server="daphne ballast.asgi", note=f"{total} signed deliveries by {CLIENTS} concurrent keep-alive clients, every one 202; {words}")
    _reset_triggers()


# --------------------------------------------------------------------------- schedules


YEARLY = "0 0 1 1 *"
SCHEDULE_LEAD_SECONDS = 3  # the ticks fall this long after the cluster is up and the rows are set


def case_schedules(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """Fire lag (tick time to fired_at) and tick time to the first step's claim, with
    ``n`` schedules due at the same second and one qcluster of two workers."""
    from runs.engine import api as engine
    from runs.models import Run, Step
    from triggers.models import Schedule, ScheduleTick
    from triggers.schedules import schedule_create

    count = n or 1000
    _reset_triggers()
    admin = _admin()
    version = graphs.publish(_one_transform("bench-schedule"))
    first = schedule_create(graph=version.graph, name="s0", user=admin, cron_expression=YEARLY, run_input={"x": 1}, overlap_policy="allow")
    # The rest as copies of the first, which schedule_create checked and audited: the case
    # times the firing, not 1,000 saves through the API.
    far = engine.db_now() + timedelta(days=1)
    fields = {f: getattr(first, f) for f in ("graph_id", "cron", "timezone", "input", "version_id", "run_as_id", "overlap_policy",
                                             "missed_policy", "catch_up_window_seconds", "created_by_id")}
    Schedule.objects.bulk_create([Schedule(name=f"s{i}", next_fire_at=far, **fields) for i in range(1, count)], batch_size=500)
    Schedule.objects.update(next_fire_at=far)
    ids = list(Schedule.objects.values_list("pk", flat=True))
    check(len(ids) == count, f"{len(ids)} schedules, expected {count}")
    try:
        with Cluster("schedules", db, workers=2) as cluster:
            cluster.wait_ready()
            at = (engine.db_now() + timedelta(seconds=SCHEDULE_LEAD_SECONDS)).replace(microsecond=0)
            Schedule.objects.update(next_fire_at=at)
            load_before, _ = load_note()
            wait_until(lambda: ScheduleTick.objects.count() >= count, RUN_TIMEOUT, f"{count} ticks to fire", cluster=cluster, poll=0.1)
            run_ids = list(ScheduleTick.objects.values_list("run_id", flat=True))
            wait_until(lambda: Step.objects.filter(run_id__in=run_ids, node_id="start", started_at__isnull=False).count() >= count,
                       RUN_TIMEOUT, f"{count} start steps to be claimed", cluster=cluster, poll=0.1)
            load_fired, _ = load_note()
            wait_terminal(run_ids, cluster=cluster, poll=0.1)
        ticks = list(ScheduleTick.objects.values_list("schedule_id", "tick_at", "fired_at", "outcome", "run_id"))
        check(sorted(t[0] for t in ticks) == sorted(ids), f"{len(ticks)} ticks for {count} schedules (one each expected)")
        check({t[1] for t in ticks} == {at} and {t[3] for t in ticks} == {"started"}, "a tick at another time or not started")
        check(Run.objects.filter(pk__in=run_ids, status="succeeded").count() == count, "not every scheduled run succeeded")
        claimed = dict(Step.objects.filter(run_id__in=run_ids, node_id="start").values_list("run_id", "started_at"))
        fire_lag = [(fired - tick).total_seconds() * 1000 for _, tick, fired, _, _ in ticks]
        claim_lag = [(claimed[rid] - tick).total_seconds() * 1000 for _, tick, _, _, rid in ticks]
    finally:
        _reset_triggers()
    load, words = load_note()
    for name, samples, what in (("schedules.fire_lag", fire_lag, "tick_at to ScheduleTick.fired_at"),
                                ("schedules.first_step_lag", claim_lag, "tick_at to the run's start step started_at (its claim)")):
        median, p95 = summary(samples)
        log(f"{name} on {db}, {count} schedules: {median:.0f} ms p50, {p95:.0f} ms p95, last {max(samples):.0f} ms")
        rep.emit(name, n=count, runs=1, samples=samples, unit="ms", max_ms=round(max(samples), 1), workers=2, load=load_before,
                 load_fired=load_fired, note=f"{count} schedules due at the same second, one qcluster of 2 workers; {what}; {words}")


# --------------------------------------------------------------------------- subgraph


def _subgraph_specs(child_graph_id: int, child_number: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inline, caller): start -> double (y = x * 2) -> end, and start -> call (the child,
    pinned, its output to ``result``) -> end."""
    inline = _one_transform("bench-subgraph-inline")
    caller = {
        "name": "bench-subgraph-caller",
        "description": "Benchmark: the one-transform graph called as a child run.",
        "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        "state": {"result": {"reducer": "replace", "default": {}}},
        "nodes": [
            {"id": "start", "kind": "start", "config": {}},
            {"id": "call", "kind": "subgraph",
             "config": {"graph": child_graph_id, "version": child_number, "input": {"x": "{{ input.x }}"}, "output_key": "result"}},
            {"id": "end", "kind": "end", "config": {"output": ["result"]}},
        ],
        "edges": [{"source": "start", "target": "call", "source_handle": None}, {"source": "call", "target": "end", "source_handle": None}],
    }
    return inline, caller


def _check_inline(run_id: int, x: int) -> None:
    from runs.models import Run

    run = Run.objects.get(pk=run_id)
    check(run.status == "succeeded" and run.output.get("y") == 2 * x, f"inline run {run_id}: {run.status} {run.output} {run.error}")


def _check_called(run_id: int, x: int) -> None:
    from runs.models import Run

    run = Run.objects.get(pk=run_id)
    check(run.status == "succeeded" and (run.output.get("result") or {}).get("y") == 2 * x, f"caller run {run_id}: {run.status} {run.output} {run.error}")
    children = list(Run.objects.filter(parent_step__run_id=run_id).values_list("status", flat=True))
    check(children == ["succeeded"], f"caller run {run_id}: children {children}, expected one that succeeded")


def case_subgraph(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """A subgraph node's cost per call over the same transform inline, through a qcluster."""
    from runs.models import Run

    pairs = n or 30
    reset_tables()
    child = graphs.publish(_one_transform("bench-subgraph-child"))
    inline_spec, caller_spec = _subgraph_specs(child.graph_id, child.number)
    inline, caller = graphs.publish(inline_spec), graphs.publish(caller_spec)
    inline_ms: list[float] = []
    called_ms: list[float] = []
    child_ms: list[float] = []
    with Cluster("subgraph", db, workers=2) as cluster:
        cluster.wait_ready()
        load_before, _ = load_note()
        for i in range(pairs + 2):  # two warm-up pairs
            x = i + 1
            rid = start_queued(inline, {"x": x})
            wait_terminal([rid], cluster=cluster, poll=0.005)
            _check_inline(rid, x)
            cid = start_queued(caller, {"x": x})
            wait_terminal([cid], cluster=cluster, poll=0.005)
            _check_called(cid, x)
            if i >= 2:
                inline_ms.append(db_seconds(rid)[0] * 1000)
                called_ms.append(db_seconds(cid)[0] * 1000)
                kid = Run.objects.filter(parent_step__run_id=cid).values_list("pk", flat=True).get()
                child_ms.append(db_seconds(kid)[0] * 1000)
    reset_tables()
    load, words = load_note()
    overhead = [c - i for c, i in zip(called_ms, inline_ms, strict=True)]
    log(f"subgraph on {db}: inline {summary(inline_ms)[0]:.1f} ms, with a child run {summary(called_ms)[0]:.1f} ms per run "
        f"(the child's own run {summary(child_ms)[0]:.1f} ms); "
        f"overhead {summary(overhead)[0]:.1f} ms per call (p95 {summary(overhead)[1]:.1f}); {words}")
    common = {"n": pairs, "runs": 1, "unit": "ms", "workers": 2, "load": load_before, "load_after": load}
    rep.emit("subgraph.inline_run", samples=inline_ms, note=f"start -> transform -> end, run created_at to finished_at; {words}", **common)
    rep.emit("subgraph.child_run", samples=called_ms, note=f"start -> subgraph (one-transform child) -> end, created_at to finished_at; {words}", **common)
    rep.emit("subgraph.child_own_run", samples=child_ms, note=f"the child run alone, created_at to finished_at; {words}", **common)
    rep.emit("subgraph.overhead", samples=overhead, note=f"per call: caller run minus the inline run, paired run by run; {words}", **common)
