"""Round trips per node commit, counted so they cannot creep back (issue: benchmarks).

A step that is its run's only active step commits, with the lease of its successor, as
one statement on PostgreSQL and as six fixed statements in one transaction on SQLite (seven
when the step wrote state keys: their versions, runs.engine.store.state).
On PostgreSQL that statement is a server-side prepared statement (issue 11), and it goes
through Django's cursor wrapper so ``execute_wrapper`` hooks count it.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import Step
from runs.services import run_start
from tests.support import engine
from tests.support.specs import chain, graph, node, publish, transform

pytestmark = pytest.mark.django_db(transaction=True)


def linear(n: int):
    ids = [f"t{i}" for i in range(n)]
    nodes = [node("start", "start"), *[transform(i, x="x + 1") for i in ids], node("end", "end")]
    return graph(nodes, chain("start", *ids, "end"), state={"x": {"default": 0}})


def queries_for(n: int) -> int:
    version = publish(linear(n))
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        with CaptureQueriesContext(connection) as captured:
            engine.drive_local(run.pk, queue=queue, timeout=60)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.state["x"] == n
    assert Step.objects.filter(run=run, status="succeeded").count() == n + 2
    return len(captured.captured_queries)


def test_round_trips_per_node_commit():
    # The marginal cost of 30 more nodes, so the run's first and last commits don't count.
    per_node = (queries_for(40) - queries_for(10)) / 30
    if connection.vendor == "postgresql":
        assert per_node == 1, per_node  # one fenced statement commits a node and leases the next
    else:
        assert per_node <= 10, per_node  # fixed: BEGIN, 6 statements, the written keys' versions, the event counter, COMMIT


def test_fast_path_commits_are_seen_by_execute_wrappers():
    # What `python -m bench queries` and any instrumentation hook count: a bare psycopg
    # cursor would bypass connection.execute_wrapper and the commits would count as 0.
    from runs.engine.store import fastpath_postgresql, fastpath_sqlite

    n = 6
    version = publish(linear(n))
    seen: list[str] = []

    def count(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        with connection.execute_wrapper(count):
            engine.drive_local(run.pk, queue=queue, timeout=60)
    run.refresh_from_db()
    assert run.status == "succeeded" and run.state["x"] == n
    fenced = fastpath_postgresql.COMMIT_SQL if connection.vendor == "postgresql" else fastpath_sqlite.RUN_SQL
    # The start step and t0 .. t5 each commit with their single successor through the fast
    # path (the end's commit ends the run: the portable path).
    assert seen.count(fenced) == n + 1, [s[:60] for s in seen]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_fast_path_commit_is_prepared_once_per_connection():
    n = 8
    version = publish(linear(n))
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        session = connection.connection
        # One task's worth of work: the start step and every successor leased to this
        # worker (drive_local would also close the connection between polls).
        engine.step_execute(queue.popleft())
    run.refresh_from_db()
    assert run.status == "succeeded" and run.state["x"] == n
    assert connection.connection is session
    with connection.cursor() as cursor:  # the session the commits ran on
        cursor.execute(
            "SELECT strpos(statement, 'new_step AS') > 0, generic_plans + custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s ORDER BY 1",
            ["%locked_run AS (%"],
        )
        rows = cursor.fetchall()
    # The commit statement, executed by every fast-path commit of the run (start, t0 ..
    # t7): parsed once, not once per commit; and the end step's, once.
    assert rows == [(False, 1), (True, n + 1)], rows


def test_fast_path_falls_back_when_the_run_changed_underneath():
    from runs.models import Run

    version = publish(linear(3))
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
    claimed = engine.step_claim(queue.popleft(), "w:1:1")
    outcome = engine.step_commit(claimed, engine.execute_node(claimed))  # keeps t0 with a snapshot
    kept = outcome.next_step
    assert kept.snapshot is not None
    Run.objects.filter(pk=run.pk).update(version=kept.snapshot.version + 5)  # someone else wrote the run
    outcome = engine.step_commit(kept, engine.execute_node(kept))
    assert outcome.committed and outcome.next_step is not None  # committed through the slow path
    run.refresh_from_db()
    assert run.state["x"] == 1


def test_run_creation_is_a_fixed_handful_of_statements():
    # The fixed per-run cost (issue 11 item 5): the run, its initial state keys, its start
    # step, its first event (with the event counter) and the first entry of its audit
    # chain, written without reading anything back. The chain used to cost a savepoint,
    # the run's lock, two reads and an update of its head (15 statements on SQLite, 11
    # on PostgreSQL, before audit.chain.audit_new).
    from audit.chain import audit_verify
    from audit.models import AuditChain, AuditEntry

    version = publish(linear(1))
    with engine.local_mode():
        run_start(version=version, run_input={})  # warm: the compiled graph, the cache table
        with CaptureQueriesContext(connection) as captured:
            run = run_start(version=version, run_input={})
    sql = [q["sql"] for q in captured.captured_queries]
    if connection.vendor == "postgresql":
        # The run's id from its sequence, then the seven INSERTs as one statement in
        # autocommit (operations._create_postgresql): two round trips, no BEGIN/COMMIT.
        assert len(sql) == 2 and "nextval" in sql[0], [s[:70] for s in sql]
        assert sql[1].startswith("WITH i0 AS (INSERT INTO") and sql[1].count("INSERT INTO") == 7, sql[1][:200]
    else:
        writes = [s for s in sql if s.upper().startswith(("INSERT", "UPDATE", "DELETE"))]
        reads = [s for s in sql if s.upper().startswith("SELECT")]
        assert reads == [], reads
        assert len(writes) == 7, [s[:70] for s in writes]  # run, state keys, step, counter, event, audit entry, chain head
        assert not any("SAVEPOINT" in s.upper() for s in sql), sql
        assert len(sql) <= 9, [s[:70] for s in sql]  # and BEGIN / COMMIT where the backend logs them
    entry = AuditEntry.objects.get(scope=f"run:{run.pk}")
    assert (entry.seq, entry.action, entry.prev_hash) == (1, "run.start", "0" * 64)
    assert AuditChain.objects.get(scope=f"run:{run.pk}").hash == entry.hash
    assert audit_verify(scope=f"run:{run.pk}").ok


def test_a_run_chain_that_exists_already_is_never_forked_by_creation():
    # audit_new writes the chain's first entry without a lock or a read: a head that
    # somehow exists (it cannot for a new run) must fail the transaction, not start a
    # second chain.
    from django.db import IntegrityError, transaction

    from audit.chain import audit_new
    from audit.models import AuditChain
    from runs.models import Run

    version = publish(linear(1))
    with engine.local_mode():
        run = run_start(version=version, run_input={})
    before = AuditChain.objects.get(scope=f"run:{run.pk}")
    with pytest.raises(IntegrityError), transaction.atomic():
        audit_new("system", "run.start", Run.objects.get(pk=run.pk), actor_type="system")
    assert AuditChain.objects.get(scope=f"run:{run.pk}").hash == before.hash


@pytest.mark.skipif(connection.vendor != "postgresql", reason="generic plans of prepared statements are PostgreSQL's")
@pytest.mark.parametrize("analysed", [False, True], ids=["tables-not-analysed", "tables-analysed-small"])
@pytest.mark.parametrize("which", ["COMMIT_SQL", "FINISH_SQL"])
def test_fast_path_generic_plan_finds_rows_by_their_keys(which, analysed, monkeypatch):
    # After five executions a connection keeps one generic plan of the prepared commit for
    # its lifetime. Its fence must reach the step and its attempt through their keys: the
    # planner once locked the step through the (status, due_at) index (every running
    # step's entry, live or dead) and updated the attempt by a sequential scan. With the
    # tables analysed while they held a handful of rows (a new database; the benchmark
    # empties and analyses them), the default planner reads runs_run, runs_step and
    # runs_stepattempt by sequential scans, which a long run then pays for on every
    # commit (a 1,000-step loop: 3.1 against 1.2 ms a step at 100 steps); the fast path's
    # connections price those scans out (fastpath_postgresql._prefer_index_plans).
    import re

    from psycopg._queries import PostgresQuery  # noqa: PLC2701 (psycopg's own placeholder conversion)
    from psycopg.adapt import Transformer

    from runs.engine.store import fastpath_postgresql

    captured: list[dict] = []
    name = "commit" if which == "COMMIT_SQL" else "finish"
    real = getattr(fastpath_postgresql, name)

    def spy(params):
        captured.append(dict(params))
        return real(params)

    monkeypatch.setattr(fastpath_postgresql, name, spy)
    # The tables as a new database has them: earlier tests' rows were deleted, not truncated
    # (tests/support/flush.py), and their dead rows would steer the planner elsewhere.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE runs_run, runs_step, runs_stepattempt, runs_runeventcounter, runs_runstatekey CASCADE")
    version = publish(linear(2))
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        engine.drive_local(run.pk, queue=queue, timeout=60)
    assert captured
    sql = getattr(fastpath_postgresql, which)
    query = PostgresQuery(Transformer())
    # Text-format placeholders: the EXECUTE below passes every value as a literal.
    query.convert(re.sub(r"%\((\w+)\)s", r"%(\1)t", sql), captured[-1])

    def literal(value) -> str:
        if value is None:
            return "NULL"
        return "'" + bytes(value).decode().replace("'", "''") + "'"

    connection.ensure_connection()
    raw = connection.connection
    if analysed:
        with raw.cursor() as cursor:
            cursor.execute("ANALYZE runs_run, runs_step, runs_stepattempt, runs_runeventcounter, runs_runstatekey")
    with raw.transaction(), raw.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(b"PREPARE fence_plan AS " + query.query)
        cursor.execute("EXPLAIN (COSTS OFF) EXECUTE fence_plan(" + ", ".join(literal(v) for v in query.params) + ")")
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("DEALLOCATE fence_plan")
    assert "Seq Scan" not in plan, plan
    assert "step_status" not in plan, plan
    assert "Index Scan using runs_run_pkey on runs_run" in plan, plan
    assert "Index Scan using runs_step_pkey on runs_step" in plan, plan
    assert re.search(r"Index Scan using \w+ on runs_stepattempt\n", plan), plan


@pytest.mark.parametrize("table", ["runs_step", "runs_stepattempt", "runs_runevent", "runs_runstatekey"])
def test_no_index_of_a_hot_table_repeats_the_leading_columns_of_another(table):
    # Every node commit inserts into these tables (and updates a step, never HOT): an index
    # whose columns lead another index is one more entry per row for no read it serves.
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    indexes = {name: tuple(c["columns"]) for name, c in constraints.items() if (c["index"] or c["unique"]) and not c["primary_key"]}
    redundant = [
        (name, other) for name, cols in indexes.items() for other, longer in indexes.items()
        if other != name and not constraints[name]["unique"] and len(longer) > len(cols) and longer[: len(cols)] == cols
    ]
    assert redundant == [], redundant


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement creation is PostgreSQL's")
def test_run_creation_in_one_statement_writes_the_orm_paths_rows():
    from django.test import override_settings

    from audit.chain import audit_verify
    from audit.models import AuditChain, AuditEntry
    from runs.models import Run, RunEvent, RunEventCounter, RunStateKey

    version = publish(linear(2))

    def rows(run_id: int) -> dict:
        run = Run.objects.get(pk=run_id)
        step = Step.objects.get(run_id=run_id)
        entry = AuditEntry.objects.get(scope=f"run:{run_id}")
        return {
            "run": (run.status, run.input, run.scheduler, run.state_sizes, run.step_count, run.version, run.max_steps,
                    run.max_parallelism, run.budget_usd, run.budget_tokens, run.cost_usd, run.created_at is not None),
            "state": list(RunStateKey.objects.filter(run_id=run_id).order_by("key").values_list("key", "seq", "value", "size", "contrib")),
            "step": (step.node_id, step.kind, step.status, step.attempt, step.max_attempts, step.iteration,
                     step.dispatched_at == step.due_at is not None, step.idempotency_key.startswith(str(run.uuid)) or bool(step.idempotency_key)),
            "events": list(RunEvent.objects.filter(run_id=run_id).values_list("seq", "kind", "step_id")),
            "counter": RunEventCounter.objects.get(run_id=run_id).last,
            "audit": (entry.seq, entry.action, entry.object_type, entry.object_id == str(run_id), entry.data, entry.actor, entry.actor_type),
            "chain": AuditChain.objects.get(scope=f"run:{run_id}").hash == entry.hash,
            "verified": audit_verify(scope=f"run:{run_id}").ok,
        }

    with engine.local_mode():
        with override_settings(BALLAST_FAST_COMMIT=False):
            orm = run_start(version=version, run_input={"a": [1, "b"]})
        with CaptureQueriesContext(connection) as captured:
            fast = run_start(version=version, run_input={"a": [1, "b"]})
    assert any(q["sql"].startswith("WITH i0 AS (INSERT") for q in captured.captured_queries)
    assert rows(fast.pk) == rows(orm.pk)
    # The instance returned is the saved run, as Run.objects.create returns it.
    assert fast.pk and not fast._state.adding and fast.state == Run.objects.get(pk=fast.pk).state
    # And it runs to its end.
    with engine.local_mode() as queue:
        queue.extend(Step.objects.filter(run_id=fast.pk).values_list("pk", flat=True))
        assert engine.drive_local(fast.pk, queue=queue, timeout=60) == "succeeded"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="enable_seqscan and prepared statements are PostgreSQL's")
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "preparing-off"])
def test_fast_path_prices_sequential_scans_out_only_where_it_prepares(prepared):
    # A connection that prepares the fast path's statements keeps their generic plans, so
    # it prices sequential scans out (fastpath_postgresql._prefer_index_plans); with
    # preparing off (``?prepare_threshold=none``, behind a transaction pooler) every
    # execution is planned afresh, and a session setting would reach the pooler's other
    # clients, so it is left alone.
    connection.close()
    connection.ensure_connection()
    raw = connection.connection
    if not prepared:
        raw.prepare_threshold = None
    version = publish(linear(2))
    with engine.local_mode() as queue:
        run = run_start(version=version, run_input={})
        engine.drive_local(run.pk, queue=queue, timeout=60)
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert connection.connection is raw
    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_seqscan")
        assert cursor.fetchone()[0] == ("off" if prepared else "on")
    connection.close()
