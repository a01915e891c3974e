"""The run list with 100,000 runs: server time per page (first, filtered, searched, deep keyset) through the API."""
from __future__ import annotations

import base64
import os
import random
import time
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from bench import graphs
from bench.core import Reporter, check, log, reset_tables

PAGE = 50
# Status mix of the seeded runs (a history: mostly finished, some live).
MIX = (("succeeded", 70), ("failed", 14), ("waiting", 9), ("running", 3), ("queued", 2), ("cancelled", 2))


def _seed(count: int, batch: int = 5000) -> dict[str, Any]:
    """``count`` runs over 30 days across 4 graphs and 4 starters, in bulk (rows only, no
    engine: the list reads rows). Live runs carry the step rows the badges read: a waiting
    run a waiting step (every tenth of them parked), a running run a running step whose
    lease expired (so every page works out "interrupted" for real). Every run has its event
    counter. Returns what the variants filter on."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import transaction
    from django.utils import timezone

    from runs.models import Run, RunEventCounter, Step

    User = get_user_model()
    admin = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser("bench-admin", "a@localhost", None)
    operator = User.objects.filter(username="bench-operator").first() or User.objects.create_user("bench-operator", "o@localhost", None)
    operator.groups.add(Group.objects.get_or_create(name="operators")[0])
    starters = [User.objects.get_or_create(username=f"bench-starter-{i}")[0] for i in range(3)] + [operator]
    versions = [graphs.publish({**graphs.linear(2), "name": f"bench-list-{i}"}) for i in range(4)]
    rng = random.Random(12)
    statuses = [s for s, w in MIX for _ in range(w)]
    now = timezone.now()
    span = timedelta(days=30).total_seconds()
    done = 0
    while done < count:
        size = min(batch, count - done)
        rows = []
        for i in range(size):
            k = done + i
            status = rng.choice(statuses)
            created = now - timedelta(seconds=span * (1 - k / count))  # ids and times increase together
            rows.append(Run(
                uuid=uuid.uuid4(), graph_version=versions[k % 4], status=status, created_by=starters[k % 4],
                input={"order_id": f"A-{k:06d}", "reason": rng.choice(("arrived broken", "late", "wrong size", "changed mind"))},
                error={"code": "node_failed", "message": "boom"} if status == "failed" else None,
                started_at=created, finished_at=created + timedelta(seconds=3) if status in ("succeeded", "failed", "cancelled") else None,
            ))
        with transaction.atomic():
            Run.objects.bulk_create(rows)
            check(rows[0].pk is not None, "bulk_create returned no primary keys")
            RunEventCounter.objects.bulk_create([RunEventCounter(run_id=r.pk, last=5) for r in rows])
            steps = []
            for r in rows:
                if r.status == "waiting":
                    steps.append(Step(run_id=r.pk, node_id="review", kind="approval", status="parked" if r.pk % 10 == 0 else "waiting",
                                      idempotency_key=f"{r.uuid}:review:0"))
                elif r.status == "running":
                    steps.append(Step(run_id=r.pk, node_id="work", kind="transform", status="running", attempt=1,
                                      lease_owner="gone-host:1:1", lease_expires_at=now - timedelta(minutes=5), idempotency_key=f"{r.uuid}:work:0"))
            Step.objects.bulk_create(steps)
        done += size
    # created_at is auto_now_add: spread it over the 30 days afterwards, in id order.
    from django.db import connection

    first = Run.objects.order_by("id").values_list("id", flat=True).first()
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("UPDATE runs_run SET created_at = now() - make_interval(secs => %s * (1 - (id - %s)::float / %s))", [span, first, count])
            cur.execute("ANALYZE")
        else:
            cur.execute("UPDATE runs_run SET created_at = strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-' || CAST(%s * (1 - (id - %s) * 1.0 / %s) AS TEXT) || ' seconds')",
                        [span, first, count])
            cur.execute("ANALYZE")
    ids = list(Run.objects.order_by("id").values_list("id", flat=True)[:: max(1, count // 10)])
    return {"admin": admin, "operator": operator, "versions": versions, "user": starters[1].username, "first_id": first,
            "deep_id": ids[1] if len(ids) > 1 else first, "day": (now - timedelta(days=10)).date(), "sample_order": f"A-{count // 3:06d}"}


def _seed_again(count: int) -> dict[str, Any]:
    """What :func:`_seed` returned, for its rows already in the tables."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from graphs.models import GraphVersion
    from runs.models import Run

    User = get_user_model()
    versions = [GraphVersion.objects.filter(graph__name=f"bench-list-{i}").latest("number") for i in range(4)]
    first = Run.objects.order_by("id").values_list("id", flat=True).first()
    ids = list(Run.objects.order_by("id").values_list("id", flat=True)[:: max(1, count // 10)])
    return {"admin": User.objects.get(username="bench-admin"), "operator": User.objects.get(username="bench-operator"),
            "versions": versions, "user": "bench-starter-1", "first_id": first, "deep_id": ids[1],
            "day": (timezone.now() - timedelta(days=10)).date(), "sample_order": f"A-{count // 3:06d}"}


def _cursor(position: int) -> str:
    """A next-page cursor of CursorPage (-id ordering) positioned after run ``position``."""
    return base64.b64encode(urlencode({"p": str(position)}).encode("ascii")).decode("ascii")


def _explain(query: Any) -> str:
    from django.db import connection

    sql, params = query.query.sql_with_params()
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) " + sql, params)
        else:
            cur.execute("EXPLAIN QUERY PLAN " + sql, params)
        return "\n".join(" | ".join(str(c) for c in row) for row in cur.fetchall())


def case_run_list(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """``n`` runs (default 100,000); GET /api/v1/runs/ pages of 50 through the Django test
    client in this process (middleware, session auth, DRF, the serializer with waiting_for,
    interrupted and event_seq): ms per page and SQL statements per page, as a superuser and
    as a member of ``operators`` (the readable-runs filter), for the first page, filtered
    pages, searches and a deep keyset page. On PostgreSQL each variant's list query is
    EXPLAINed (ANALYZE) to stderr."""
    from django.db import connection
    from django.test import Client

    from runs import selectors
    from runs.api.serializers import RunListFilterInput, run_filter
    from runs.models import Run

    count = n or 100_000
    t0 = time.perf_counter()
    if os.environ.get("BENCH_RUN_LIST_REUSE") and Run.objects.count() == count:
        seed = _seed_again(count)  # the rows of the last run of this case (a re-run to read plans)
    else:
        reset_tables()
        seed = _seed(count)
    log(f"run_list: {count} runs ready in {time.perf_counter() - t0:.1f} s")
    g, v = seed["versions"][1].graph_id, seed["versions"][1].number
    variants = [
        ("first", {}),
        ("status_failed", {"status": "failed"}),
        ("status_running", {"status": "running"}),
        ("graph_version", {"graph": g, "version": v}),
        ("user", {"user": seed["user"]}),
        ("date_range", {"created_after": str(seed["day"]), "created_before": str(seed["day"] + timedelta(days=1))}),
        ("waiting_decision", {"waiting_for": "decision"}),
        ("search_id", {"search": f"#{seed['deep_id']}"}),
        ("search_input", {"search": seed["sample_order"]}),
        ("deep_keyset", {"cursor": _cursor(seed["deep_id"])}),
        ("deep_keyset_failed", {"status": "failed", "cursor": _cursor(seed["deep_id"])}),
    ]
    clients = {}
    for who in ("admin", "operator"):
        client = Client()
        client.force_login(seed[who])
        clients[who] = client
    for who, client in clients.items():
        for name, params in variants:
            query = {"page_size": PAGE, **params}
            url = "/api/v1/runs/"
            statements: list[str] = []

            def counter(execute, sql, p, many, context, statements=statements):
                statements.append(sql)
                return execute(sql, p, many, context)

            with connection.execute_wrapper(counter):
                response = client.get(url, query, HTTP_HOST="127.0.0.1")
            check(response.status_code == 200, f"{name}: {response.status_code} {response.content[:300]!r}")
            rows = response.json()["results"]
            want = 1 if name.startswith("search") else PAGE  # an order id and a run id are unique
            check(len(rows) == want, f"{name} as {who}: {len(rows)} rows, expected {want}")
            samples, cpu = [], []
            for _ in range(max(runs, 5) * 2):
                t, c = time.perf_counter(), time.process_time()
                client.get(url, query, HTTP_HOST="127.0.0.1")
                samples.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
            cpu.sort()
            rep.emit(f"run_list.{who}.{name}", n=count, runs=len(samples), samples=samples, unit="ms/page", queries=len(statements),
                     python_cpu_ms_median=cpu[len(cpu) // 2],
                     params=params, note=f"GET /api/v1/runs/ page of {PAGE}, {count} runs, as {who} (test client, in process)")
            if db == "postgres" and who == "operator" or (db == "sqlite" and who == "admin" and name in ("first", "status_failed", "deep_keyset")):
                data = {k: v for k, v in params.items() if k != "cursor"}
                f = RunListFilterInput(data=data)
                f.is_valid(raise_exception=True)
                qs = selectors.run_list(viewer=seed[who], filters=run_filter(f.validated_data))
                if "cursor" in params:
                    qs = qs.filter(pk__lt=seed["deep_id"])
                log(f"--- plan {who}.{name}\n{_explain(qs[:PAGE + 1])}")
