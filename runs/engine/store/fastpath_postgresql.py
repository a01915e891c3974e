"""The sequential fast path on PostgreSQL: the whole commit as ONE fenced data-modifying CTE.

For a step that is its run's only active step: its output, the versions of the state
keys it wrote (runs.engine.store.state: one row per key, ``jsonb_each`` over one parameter;
the rest of the state is not touched), the run's size map, bookkeeping and totals,
its single successor leased to the same worker, the attempts and the events, in one
statement in autocommit mode (one round trip), prepared once per connection. The end
step's commit (FINISH_SQL) finishes the run instead, in one statement too. Statuses
and event kinds are parameters taken from the model enums (see fastpath.params).
"""
from __future__ import annotations

import functools
import time
from typing import Any

import psycopg
from django.db import connection
from django.db.models import AutoField
from django.db.models.sql import InsertQuery

# A parallel branch commits from its worker's snapshot in one statement (BRANCH_SQL). See
# runs.engine.store.paths.FastPath.
BRANCH_FROM_SNAPSHOT = True

# The fence every fast-path commit opens with (D1: one prefix, three statements). The run
# row is locked first (the order recovery and the slow path use; NO KEY UPDATE as
# writes.lock_run, so claims' foreign-key checks never wait on it) and only if its
# version is the one the committing worker read (its snapshot, or the row it locked a
# moment before in the same transaction: parallel_commit); the step row only if its
# lease is still ours. If either check fails the statement writes nothing and returns
# NULL: the caller takes the slow path, which re-reads everything. The events take
# their seq from the run's counter row, bumped by the same statement, after the run and
# step rows are locked (runs.engine.store.events: no gaps). ``{run_set}``: what the run row
# takes besides the usage totals, size map, bookkeeping and version; ``{n_events}``: how
# many events the statement numbers; ``{pre}``: CTEs that run between the fence and the
# run update (parallel_commit's claim of a sibling, counted into ``{n_events}``);
# ``{run_check}``: more conditions on the run row (a branch commit's check of the run's
# active steps, BRANCH_SQL).
# Rows are found by their keys, never through a join the planner may turn into a scan:
# the statement is prepared, and after five executions PostgreSQL keeps one generic plan
# for the connection's lifetime, chosen from the statistics of that moment (a table just
# emptied, or not yet analysed, looks tiny). ``status || ''`` keeps the step's lock on
# the primary key: in a generic plan ``status = $n`` costs the same as ``id = $n``, and
# the planner took the (status, due_at) index, a walk over every running step's entry,
# live or dead (step updates are not HOT). The attempt is found by (step_id, number),
# its unique index, not by a semi-join with ``step_upd``, which stale statistics made a
# sequential scan of runs_stepattempt on every commit.
_FENCE = """
WITH locked_run AS (
    SELECT id FROM runs_run WHERE id = %(run)s AND version = %(version)s{run_check} FOR NO KEY UPDATE
), locked_step AS (
    SELECT id FROM runs_step
    WHERE id = %(step)s AND status || '' = %(st_running)s AND attempt = %(attempt)s AND lease_owner = %(owner)s
      AND EXISTS (SELECT 1 FROM locked_run)
    FOR NO KEY UPDATE
){pre}, run_upd AS (
    UPDATE runs_run SET state_sizes = %(state_sizes)s::jsonb, scheduler = %(scheduler)s::jsonb,
        input_tokens = input_tokens + %(in_tokens)s, output_tokens = output_tokens + %(out_tokens)s,
        cost_usd = cost_usd + %(cost)s, {run_set}, version = version + 1, updated_at = %(now)s
    WHERE id IN (SELECT id FROM locked_run) AND EXISTS (SELECT 1 FROM locked_step)
    RETURNING id
), seq_upd AS (
    INSERT INTO runs_runeventcounter (run_id, last) SELECT id, {n_events} FROM run_upd
    ON CONFLICT (run_id) DO UPDATE SET last = runs_runeventcounter.last + excluded.last
    RETURNING last
), step_upd AS (
    UPDATE runs_step SET status = %(st_succeeded)s, output = %(output)s::jsonb, updates = %(updates)s::jsonb,
        usage = %(usage)s::jsonb, cost_usd = %(step_cost)s, price_version = %(price_version)s, lease_owner = '',
        lease_expires_at = NULL, finished_at = %(now)s, state_seq = %(version)s + 1
    WHERE id IN (SELECT id FROM locked_step) AND EXISTS (SELECT 1 FROM run_upd)
    RETURNING id
), state_rows AS (
    INSERT INTO runs_runstatekey (run_id, key, seq, value, size, contrib)
    SELECT %(run)s, w.key, %(version)s + 1, w.value -> 'v', (w.value ->> 's')::integer, NULLIF(w.value -> 'c', 'null'::jsonb)
    FROM jsonb_each(%(writes)s::jsonb) AS w
    WHERE EXISTS (SELECT 1 FROM step_upd)
), att_upd AS (
    UPDATE runs_stepattempt SET status = %(att_succeeded)s, usage = %(usage)s::jsonb, cost_usd = %(step_cost)s,
        price_version = %(price_version)s, finished_at = %(now)s
    WHERE step_id = %(step)s AND number = %(attempt)s AND EXISTS (SELECT 1 FROM step_upd)
)"""


def fenced_sql(*, run_set: str, n_events: str, pre: str = "", run_check: str = "") -> str:
    """The fence prefix (``_FENCE``) with its holes filled: a WITH list that ends after
    ``att_upd``, for a statement to append its own CTEs and final SELECT to."""
    return _FENCE.format(run_set=run_set, n_events=n_events, pre=pre, run_check=run_check)


# The sequential commit: the fence, then the single successor leased to the same worker,
# its attempt and the three events.
COMMIT_SQL = fenced_sql(run_set="step_count = step_count + 1, status = %(run_running)s", n_events="3") + """, new_step AS (
    INSERT INTO runs_step (run_id, parent_id, child_key, node_id, kind, iteration, depth, status, attempt, max_attempts,
        idempotency_key, lease_owner, lease_expires_at, started_at, created_at, price_version)
    SELECT %(run)s, NULL, '', %(next_node)s, %(next_kind)s, %(next_iteration)s, %(next_depth)s, %(st_running)s, 1,
        %(next_max_attempts)s, %(next_key)s, %(owner)s, %(lease_until)s, %(now)s, %(now)s, ''
    WHERE EXISTS (SELECT 1 FROM step_upd)
    RETURNING id
), new_att AS (
    INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version, build)
    SELECT id, 1, %(owner)s, %(att_running)s, %(now)s, '', %(build)s FROM new_step
), events AS (
    INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at)
    SELECT %(run)s, (SELECT last - 2 FROM seq_upd), id, %(ev_succeeded)s, %(done_event)s::jsonb, %(now)s FROM step_upd
    UNION ALL SELECT %(run)s, (SELECT last - 1 FROM seq_upd), id, %(ev_created)s, %(created_event)s::jsonb, %(now)s FROM new_step
    UNION ALL SELECT %(run)s, (SELECT last FROM seq_upd), id, %(ev_started)s, %(started_event)s::jsonb, %(now)s FROM new_step
    RETURNING id, seq
)
SELECT (SELECT id FROM new_step), (SELECT last FROM seq_upd), (SELECT array_agg(id ORDER BY seq) FROM events)
"""

# The end step's commit: the same fence, the run finished (succeeded, its output) instead
# of a successor; its two events numbered from the run's counter like COMMIT_SQL's. Run
# inside a transaction with the run_finished signal (fastpath.finish).
FINISH_SQL = fenced_sql(
    run_set="status = %(run_finished)s, output = %(run_output)s::jsonb, error = NULL, finished_at = %(now)s", n_events="2"
) + """, events AS (
    INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at)
    SELECT %(run)s, (SELECT last - 1 FROM seq_upd), id, %(ev_succeeded)s, %(done_event)s::jsonb, %(now)s FROM step_upd
    UNION ALL SELECT %(run)s, (SELECT last FROM seq_upd), id, %(ev_finished)s, %(finished_event)s::jsonb, %(now)s FROM step_upd
    RETURNING id, seq
)
SELECT (SELECT id FROM step_upd), (SELECT last FROM seq_upd), (SELECT array_agg(id ORDER BY seq) FROM events)
"""

# A step's first claim (claims.step_claim), the common case only, in one statement: a
# pending top-level step of a queued or running run without a budget, on its first
# attempt, leased to us; the run started if it was queued; the attempt; the events
# (run_started when the run starts, step_started) numbered from the counter. Anything
# else matches no row and the portable claim decides (a lost-attempt count, a run that
# ended, a budget, a child step, a duplicate delivery). The locks are taken in the
# portable claim's order: the step (compare-and-set), then the run row only when it
# starts (``run_upd`` references nothing but ``claimed``), then the event counter with
# NOWAIT (``counter`` references ``run_upd``; waiting for it while holding the step
# could deadlock with a writer that holds it and then updates the step, so the error
# 55P03 rolls the statement back and the claim tries again: claims.step_claim). The
# final SELECT reads the run row as it was before this statement (the caller applies
# the start) and the latest version of every state key. ``{step_cols}``/``{run_cols}``:
# the models' columns, filled in by :func:`claim`.
CLAIM_SQL = """
WITH pick AS (
    {pick}
), claimed AS (
    UPDATE runs_step SET status = %(st_running)s, attempt = 1, lease_owner = %(owner)s, lease_expires_at = %(lease_until)s,
        started_at = %(now)s
    WHERE id = (SELECT id FROM pick) AND status || '' = %(st_pending)s AND attempt = 0 AND parent_id IS NULL
      AND (available_at IS NULL OR available_at <= %(due_by)s)
      AND EXISTS (SELECT 1 FROM runs_run AS r WHERE r.id = runs_step.run_id AND r.status = ANY(%(run_claimable)s)
                  AND r.budget_usd IS NULL AND r.budget_tokens IS NULL)
    RETURNING {step_cols}
), run_upd AS (
    UPDATE runs_run SET status = %(run_running)s, started_at = %(now)s, version = version + 1
    WHERE id = (SELECT run_id FROM claimed) AND status = %(run_queued)s
    RETURNING id
), counter AS (
    SELECT last FROM runs_runeventcounter
    WHERE run_id = (SELECT run_id FROM claimed) AND (SELECT count(*) FROM run_upd) >= 0
    FOR UPDATE NOWAIT
), seq_upd AS (
    INSERT INTO runs_runeventcounter (run_id, last)
    SELECT run_id, 1 + (SELECT count(*) FROM run_upd) FROM claimed WHERE (SELECT count(*) FROM counter) >= 0
    ON CONFLICT (run_id) DO UPDATE SET last = runs_runeventcounter.last + excluded.last
    RETURNING last
), att AS (
    INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version, build)
    SELECT id, 1, %(owner)s, %(att_running)s, %(now)s, '', %(build)s FROM claimed
), events AS (
    INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at)
    SELECT id, (SELECT last - 1 FROM seq_upd), NULL, %(ev_run_started)s, '{{}}'::jsonb, %(now)s FROM run_upd
    UNION ALL SELECT run_id, (SELECT last FROM seq_upd), id, %(ev_started)s,
        jsonb_build_object('node_id', node_id, 'iteration', iteration, 'attempt', 1), %(now)s FROM claimed
    RETURNING id, seq
)
SELECT (SELECT id FROM pick), {claimed_cols}, (SELECT count(*) FROM run_upd), (SELECT last FROM seq_upd),
    (SELECT array_agg(id ORDER BY seq) FROM events),
    (SELECT json_object_agg(k.key, k.value) FROM (SELECT DISTINCT ON (key) key, value FROM runs_runstatekey
        WHERE run_id = c.run_id ORDER BY key, seq DESC) AS k)::text,
    {run_cols}
FROM (SELECT 1) AS one LEFT JOIN claimed AS c ON true LEFT JOIN runs_run AS r ON r.id = c.run_id
"""
# ``{pick}`` of CLAIM_SQL: the step named by the queue message (claims.step_claim), or the
# step due the longest (claims.step_claim_due: the doorbell's pick, SKIP LOCKED so that
# concurrent claimers take different steps, as claims.due_steps orders them).
PICK_BY_ID = "SELECT %(step)s::bigint AS id"
PICK_DUE = """SELECT id FROM runs_step
    WHERE status = %(st_pending)s AND due_at <= %(due_by)s AND (available_at IS NULL OR available_at <= %(due_by)s)
    ORDER BY due_at, id LIMIT 1
    FOR NO KEY UPDATE SKIP LOCKED"""

# parallel_commit, statement 1: lock the run row and read what the decision needs from it.
# A locked row is returned as its latest committed version (PostgreSQL re-reads it after
# waiting), but other tables read in the same statement would come from the snapshot
# taken before the wait: the steps and state keys are read by the next statement, which
# takes a fresh snapshot (READ COMMITTED) while this transaction holds the lock.
LOCK_SQL = """
SELECT id, version, status, scheduler, state_sizes, step_count, max_steps, max_parallelism,
    input_tokens, output_tokens, cost_usd
FROM runs_run WHERE id = %(run)s AND budget_usd IS NULL AND budget_tokens IS NULL FOR NO KEY UPDATE
"""
# Statement 2: the step, only under our lease (locked: the fence); the run's other active
# steps (what the join rule, the parallelism bound and the run status read); the latest
# version of each state key (the state the successor this commit leases starts from,
# what its claim would read), with the reducer contributions of the keys the step writes.
READ_SQL = """
SELECT
    (SELECT id FROM runs_step WHERE id = %(step)s AND status = %(st_running)s AND attempt = %(attempt)s
        AND lease_owner = %(owner)s FOR NO KEY UPDATE),
    (SELECT json_agg(json_build_array(id, node_id, status, dispatched_at, available_at, parent_id) ORDER BY id)
        FROM runs_step WHERE run_id = %(run)s AND status = ANY(%(active_statuses)s) AND id <> %(step)s),
    (SELECT json_object_agg(k.key, json_build_array(k.value, CASE WHEN k.key = ANY(%(keys)s) THEN k.contrib END))
        FROM (SELECT DISTINCT ON (key) key, value, contrib FROM runs_runstatekey
              WHERE run_id = %(run)s ORDER BY key, seq DESC) AS k)
"""
# Statement 3: the fence again (a no-op re-lock: this transaction holds both rows), the
# new steps (one JSON array; the kept one leased to us, the others released as due or
# held by the parallelism bound), older held steps released, and, when the commit keeps
# nothing, the run's oldest due sibling claimed for us in the same statement (``pick``,
# SKIP LOCKED: a sibling another worker is claiming is left to it), with its attempt and
# started event. Events: one JSON array numbered from the counter, the pick's last.
def _parallel_sql(run_check: str = "") -> str:
    """PARALLEL_SQL, with ``run_check`` added to the run row's fence (BRANCH_SQL)."""
    return fenced_sql(
        run_set="step_count = step_count + %(n_new)s, status = %(run_status)s",
        n_events="%(n_events)s + (SELECT count(*) FROM picked)",
        run_check=run_check,
        pre=""", pick AS (
    SELECT id FROM runs_step
    WHERE run_id = %(run)s AND status = %(st_pending)s AND parent_id IS NULL AND attempt = 0 AND due_at <= %(now)s
      AND (available_at IS NULL OR available_at <= %(now)s) AND %(claim_next)s AND EXISTS (SELECT 1 FROM locked_step)
    ORDER BY due_at, id LIMIT 1
    FOR NO KEY UPDATE SKIP LOCKED
), picked AS (
    UPDATE runs_step SET status = %(st_running)s, attempt = 1, lease_owner = %(owner)s, lease_expires_at = %(lease_until)s,
        started_at = %(now)s
    WHERE id IN (SELECT id FROM pick)
    RETURNING id, node_id, kind, iteration, depth, max_attempts, idempotency_key
), picked_att AS (
    INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version, build)
    SELECT id, 1, %(owner)s, %(att_running)s, %(now)s, '', %(build)s FROM picked
)""",
) + """, new_steps AS (
    INSERT INTO runs_step (run_id, parent_id, child_key, node_id, kind, iteration, depth, status, attempt, max_attempts,
        idempotency_key, lease_owner, lease_expires_at, started_at, dispatched_at, due_at, created_at, price_version)
    SELECT %(run)s, NULL, '', s.node_id, s.kind, s.iteration, s.depth, s.status, s.attempt, s.max_attempts,
        s.key, s.owner, s.lease_until, s.started_at, s.dispatched_at, s.dispatched_at, %(now)s, ''
    FROM jsonb_to_recordset(%(new_steps)s::jsonb) AS s(ord integer, node_id text, kind text, iteration integer, depth integer,
        status text, attempt integer, max_attempts integer, key text, owner text, lease_until timestamptz,
        started_at timestamptz, dispatched_at timestamptz)
    WHERE EXISTS (SELECT 1 FROM step_upd)
    ORDER BY s.ord
    RETURNING id, idempotency_key
), new_att AS (
    INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version, build)
    SELECT id, 1, %(owner)s, %(att_running)s, %(now)s, '', %(build)s FROM new_steps WHERE idempotency_key = %(kept_key)s
), released AS (
    UPDATE runs_step SET dispatched_at = %(now)s, due_at = %(now)s
    WHERE id = ANY(%(dispatch_old)s) AND run_id = %(run)s AND EXISTS (SELECT 1 FROM step_upd)
), events AS (
    INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at)
    -- ids in seq order, as every other writer numbers them (runs.engine.store.events).
    SELECT * FROM (
        (SELECT %(run)s, (SELECT last FROM seq_upd) - (SELECT count(*) FROM picked) - %(n_events)s + e.ord,
            COALESCE(ns.id, %(step)s), e.kind, e.data, %(now)s
        FROM jsonb_to_recordset(%(events)s::jsonb) AS e(ord integer, ref text, kind text, data jsonb)
        LEFT JOIN new_steps AS ns ON ns.idempotency_key = e.ref
        WHERE EXISTS (SELECT 1 FROM step_upd))
        UNION ALL SELECT %(run)s, (SELECT last FROM seq_upd), id, %(ev_started)s,
            json_build_object('node_id', node_id, 'iteration', iteration, 'attempt', 1)::jsonb, %(now)s FROM picked
    ) AS numbered (run_id, seq, step_id, kind, data, created_at)
    ORDER BY seq
    RETURNING id, seq, step_id
)
SELECT (SELECT id FROM step_upd), (SELECT last FROM seq_upd),
    (SELECT json_agg(json_build_array(id, seq, step_id) ORDER BY seq) FROM events),
    (SELECT json_agg(json_build_array(id, idempotency_key)) FROM new_steps),
    (SELECT json_build_array(id, node_id, kind, iteration, depth, max_attempts, idempotency_key) FROM picked)
"""


PARALLEL_SQL = _parallel_sql()
# A branch commit from the worker's BranchSnapshot (fastpath.parallel_commit), ONE
# statement in autocommit: PARALLEL_SQL fenced, besides the run version, by the run's
# other active steps as the decisions read them (fastpath.active_fingerprint: id, node,
# busy/held or the status, backoff or not, parent): claims do not move the run version,
# so the version alone would miss a sibling another worker took or handed back. The
# active steps are read with the statement's snapshot, taken before the run row's lock;
# a commit that moved the run in between fails the version check on the locked row
# (PostgreSQL re-checks a row it waited for), and a claim committed in between could
# equally slip past the locked path's read, and changes none of the fingerprint's
# classes (a dispatched step pending or running is busy either way).
BRANCH_SQL = _parallel_sql(run_check="""
      AND (SELECT COALESCE(jsonb_agg(jsonb_build_array(id, node_id,
              CASE WHEN status = %(st_running)s OR (status = %(st_pending)s AND dispatched_at IS NOT NULL) THEN 'busy'
                   WHEN status = %(st_pending)s THEN 'held' ELSE status END,
              available_at IS NULL, parent_id) ORDER BY id), '[]'::jsonb)
           FROM runs_step WHERE run_id = %(run)s AND status = ANY(%(active_statuses)s) AND id <> %(step)s)
          = %(expect_active)s::jsonb""")


def next_id(model: Any) -> int:
    """A new primary key from ``model``'s identity sequence (taken, never rolled back: an
    unused one leaves a gap, as a rolled-back insert does)."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s))", [connection.ops.quote_name(table), model._meta.pk.column])
        return int(cursor.fetchone()[0])


def insert_rows(inserts: list[tuple[Any, list[Any], bool]]) -> list[int | None]:
    """Insert ``(model, unsaved objects, return the first object's id)`` groups as ONE
    statement (a data-modifying CTE per group, each INSERT compiled by Django as
    ``bulk_create`` would: field defaults, ``pre_save``, adapters): one round trip where
    the ORM takes one per group, and no transaction block of its own (autocommit: the
    statement is atomic). Returns per group the first new row's id, or None when not
    asked. Foreign keys among the groups must be set by the caller (known ids); they are
    checked at the end of the statement (deferred constraints)."""

    parts: list[str] = []
    params: list[Any] = []
    for i, (model, objs, returning) in enumerate(inserts):
        fields = [f for f in model._meta.concrete_fields if not (isinstance(f, AutoField) and objs[0].pk is None)]
        query = InsertQuery(model)
        query.insert_values(fields, objs, raw=False)
        compiler = query.get_compiler(connection=connection)
        compiler.returning_fields = [model._meta.pk] if returning else None
        [(sql, args)] = compiler.as_sql()
        parts.append(f"i{i} AS ({sql})")
        params.extend(args)
    picks = ", ".join(f"(SELECT min({connection.ops.quote_name(m._meta.pk.column)}) FROM i{i})" if r else "NULL"
                      for i, (m, _, r) in enumerate(inserts))
    with connection.cursor() as cursor:
        cursor.execute("WITH " + ", ".join(parts) + " SELECT " + picks, params)
        row = cursor.fetchone()
    return [None if v is None else int(v) for v in row]


class _PreparedCursor(psycopg.Cursor):
    """A server-side binding cursor whose every execute asks psycopg to prepare.

    Wrapped in Django's own cursor wrapper (see :func:`commit`), whose ``execute`` takes no
    ``prepare`` argument: this is where it is passed on."""

    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None) -> Any:
        return super().execute(query, params, prepare=True, binary=binary)


def finish(params: dict[str, Any]) -> tuple[int, list[int]] | None:
    """Run the fenced end-step commit (FINISH_SQL, prepared like COMMIT_SQL, inside the
    caller's transaction): (the last event seq, the two event ids in seq order), or None
    when the version or lease check failed (nothing written)."""
    row = _execute(FINISH_SQL, params)
    if row is None:
        return None
    return int(row[1]), [int(i) for i in row[2]]


def commit(params: dict[str, Any]) -> tuple[int, int, list[int]] | None:
    """Run the fenced commit: (the new step's id, the last event seq, the three event ids
    in seq order), or None when the version or lease check failed.

    Runs COMMIT_SQL as a server-side prepared statement, parsed and planned once per
    connection: Django's cursors bind parameters on the client, so the server would plan
    the big CTE on every commit. psycopg prepares only while the connection's
    ``prepare_threshold`` is not None, and Django opens connections with None unless the
    database OPTIONS say otherwise: ballast.settings sets it (``database_from_url``),
    ``?prepare_threshold=none`` in DATABASE_URL turns preparing off behind a pooler that
    cannot keep prepared statements. Django's other cursors bind on the client and never
    prepare, whatever the threshold.

    The statement goes through Django's cursor wrapper, not a bare psycopg cursor (which
    would bypass it, TRAPS.md): ``connection.execute_wrapper`` hooks and Django's database
    errors (a refused value surfaces as DataError, as on every other commit path, and the
    loop fails the step) see it; it is logged like Django's own queries under DEBUG or
    CaptureQueriesContext."""
    row = _execute(COMMIT_SQL, params)
    if row is None:
        return None
    return int(row[0]), int(row[1]), [int(i) for i in row[2]]


def claim(params: dict[str, Any], step_cols: list[str], run_cols: list[str], *, due: bool = False) -> tuple[Any, ...] | None:
    """Run CLAIM_SQL (prepared, in autocommit) for the step ``params["step"]``, or with
    ``due`` for the step due the longest: the picked step's id, then the claimed step's
    columns ``step_cols`` (all NULL when the picked step was not claimed: the portable
    claim decides), whether the run started (1 or 0), the last event seq, the event ids
    in seq order, the state as JSON text, then the run's columns ``run_cols`` as they
    were before the claim; or None when nothing was picked (no step is due). Raises
    Django's OperationalError (SQLSTATE 55P03) when another transaction holds the run's
    event counter: nothing was written."""
    sql = _claim_sql(tuple(step_cols), tuple(run_cols), due)
    return _execute(sql, params)


@functools.cache
def _claim_sql(step_cols: tuple[str, ...], run_cols: tuple[str, ...], due: bool) -> str:
    return CLAIM_SQL.format(
        pick=PICK_DUE if due else PICK_BY_ID,
        step_cols=", ".join(step_cols),
        claimed_cols=", ".join(f"c.{c}" for c in step_cols),
        run_cols=", ".join(f"r.{c}" for c in run_cols),
    )


def lock(params: dict[str, Any]) -> tuple[Any, ...] | None:
    """parallel_commit's first statement (LOCK_SQL), inside the caller's transaction: the
    run row locked, or None (no such run, or a budget: the portable path decides those)."""
    return _execute(LOCK_SQL, params)


def read(params: dict[str, Any]) -> tuple[int | None, list[list[Any]], dict[str, list[Any]]]:
    """parallel_commit's second statement (READ_SQL), with the run row locked: (the step's
    id, or None when the lease is no longer ours; the other active steps as [id, node_id,
    status, dispatched_at, available_at, parent_id]; {key: [value, contributions or None]}:
    the state's latest versions, contributions only for the written keys)."""
    row = _execute(READ_SQL, params, allow_null=True)
    assert row is not None
    return row[0], row[1] or [], row[2] or {}


def parallel(params: dict[str, Any]) -> tuple[int, list[list[Any]], dict[str, int], list[Any] | None] | None:
    """parallel_commit's write (PARALLEL_SQL), in the caller's transaction, or, with
    ``params["expect_active"]`` (a branch commit from a BranchSnapshot, in autocommit),
    BRANCH_SQL, fenced by the run's active steps too: (the last event
    seq; the events as [id, seq, step id] in seq order; new step ids by idempotency key;
    the claimed sibling as [id, node_id, kind, iteration, depth, max_attempts, key], or
    None), or None when the fence failed (nothing written)."""
    row = _execute(BRANCH_SQL if "expect_active" in params else PARALLEL_SQL, params)
    if row is None:
        return None
    return int(row[1]), row[2] or [], {k: int(i) for i, k in (row[3] or [])}, row[4]


def _execute(sql: str, params: dict[str, Any], *, allow_null: bool = False) -> tuple[Any, ...] | None:
    """Execute one of this module's statements, prepared (see :func:`commit`); its one row,
    or None when the row is missing or (unless ``allow_null``) its first value is NULL (a
    fence failed)."""
    connection.ensure_connection()
    connection.validate_thread_sharing()  # what connection.cursor() checks too
    _prefer_index_plans(connection.connection)
    started = time.perf_counter()
    # django-stubs types the driver cursor as Django's own wrapper.
    with connection.make_cursor(_PreparedCursor(connection.connection)) as cursor:  # type: ignore[arg-type]
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if connection.queries_logged:
        # Logged here, not by Django's debug cursor: that one asks the cursor for the
        # query it sent, which psycopg does not keep for a prepared execution.
        connection.queries_log.append({"sql": sql, "time": f"{time.perf_counter() - started:.3f}"})
    if not row or (row[0] is None and not allow_null):
        return None
    return tuple(row)


def _prefer_index_plans(raw: psycopg.Connection[Any]) -> None:
    """Set ``enable_seqscan = off`` for the session of a connection that runs the fast path
    (workers, ``drive_local``), once, outside a transaction (a SET in a transaction that
    rolls back is undone).

    Why: every statement here finds its rows by their keys, and a prepared statement keeps
    one generic plan from its sixth execution until an ANALYZE of a table it reads. Planned
    while the tables were small (a new database, or the benchmark's tables just emptied
    and analysed), that plan reads runs_run, runs_step and runs_stepattempt by sequential
    scans, and keeps doing so as a long run grows them: a 1,000-step loop on PostgreSQL cost
    3.1 ms a step against 1.2 ms at 100 steps (``python -m bench scaling``), with the
    server's own time per commit flat and the scans in the plan (auto_explain). With the
    setting, the planner takes an index whenever one serves (a scan with no index still
    runs: the setting only prices sequential scans out); the queries such a connection
    also runs (claims, recovery, the queue broker's) read by indexed keys too. Web requests
    close their connections at the end (``CONN_MAX_AGE`` 0 outside workers), so a request
    that drove a test run does not keep the setting. PostgreSQL's documentation of
    ``enable_seqscan``: runtime-config-query.html#GUC-ENABLE-SEQSCAN.

    Not with preparing off (``?prepare_threshold=none``, behind a transaction pooler):
    every execution is then planned from the statistics of the moment, so no plan goes
    stale, and a session setting would leak through the pooler to other clients.
    """
    if getattr(raw, "_ballast_index_plans", False) or raw.prepare_threshold is None:
        return
    if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return
    with raw.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
    raw._ballast_index_plans = True  # type: ignore[attr-defined]
