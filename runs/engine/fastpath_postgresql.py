"""The sequential fast path on PostgreSQL: the whole commit as ONE fenced data-modifying CTE.

For a step that is its run's only active step: its output, the versions of the state
keys it wrote (runs.engine.state: one row per key, ``jsonb_each`` over one parameter;
the rest of the state is not touched), the run's size map, bookkeeping and totals,
its single successor leased to the same worker, the attempts and the events, in one
statement in autocommit mode (one round trip), prepared once per connection. The end
step's commit (FINISH_SQL) finishes the run instead, in one statement too. Statuses
and event kinds are parameters taken from the model enums (see fastpath.params).
"""
from __future__ import annotations

import time
from typing import Any

import psycopg
from django.db import connection

# The run row is locked first (the order recovery and the slow path use; NO KEY UPDATE as
# writes.lock_run, so claims' foreign-key checks never wait on it) and only if its
# version is the one this worker's last commit left; the step row only if its lease is
# still ours. If either check fails the statement writes nothing and returns NULL: the
# caller takes the slow path, which re-reads everything. The three events take their seq
# from the run's counter row, bumped by the same statement, after the run and step rows
# are locked (runs.engine.events: no gaps).
COMMIT_SQL = """
WITH locked_run AS (
    SELECT id FROM runs_run WHERE id = %(run)s AND version = %(version)s FOR NO KEY UPDATE
), locked_step AS (
    SELECT id FROM runs_step
    WHERE id = %(step)s AND status = %(st_running)s AND attempt = %(attempt)s AND lease_owner = %(owner)s
      AND EXISTS (SELECT 1 FROM locked_run)
    FOR NO KEY UPDATE
), run_upd AS (
    UPDATE runs_run SET state_sizes = %(state_sizes)s::jsonb, scheduler = %(scheduler)s::jsonb, step_count = step_count + 1,
        input_tokens = input_tokens + %(in_tokens)s, output_tokens = output_tokens + %(out_tokens)s,
        cost_usd = cost_usd + %(cost)s, status = %(run_running)s, version = version + 1, updated_at = %(now)s
    WHERE id IN (SELECT id FROM locked_run) AND EXISTS (SELECT 1 FROM locked_step)
    RETURNING id
), seq_upd AS (
    INSERT INTO runs_runeventcounter (run_id, last) SELECT id, 3 FROM run_upd
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
    WHERE step_id IN (SELECT id FROM step_upd) AND number = %(attempt)s
), new_step AS (
    INSERT INTO runs_step (run_id, parent_id, child_key, node_id, kind, iteration, depth, status, attempt, max_attempts,
        idempotency_key, lease_owner, lease_expires_at, started_at, created_at, price_version)
    SELECT %(run)s, NULL, '', %(next_node)s, %(next_kind)s, %(next_iteration)s, %(next_depth)s, %(st_running)s, 1,
        %(next_max_attempts)s, %(next_key)s, %(owner)s, %(lease_until)s, %(now)s, %(now)s, ''
    WHERE EXISTS (SELECT 1 FROM step_upd)
    RETURNING id
), new_att AS (
    INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version)
    SELECT id, 1, %(owner)s, %(att_running)s, %(now)s, '' FROM new_step
), events AS (
    INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at)
    SELECT %(run)s, (SELECT last - 2 FROM seq_upd), id, %(ev_succeeded)s, %(done_event)s::jsonb, %(now)s FROM step_upd
    UNION ALL SELECT %(run)s, (SELECT last - 1 FROM seq_upd), id, %(ev_created)s, %(created_event)s::jsonb, %(now)s FROM new_step
    UNION ALL SELECT %(run)s, (SELECT last FROM seq_upd), id, %(ev_started)s, %(started_event)s::jsonb, %(now)s FROM new_step
    RETURNING id, seq
)
SELECT (SELECT id FROM new_step), (SELECT last FROM seq_upd), (SELECT array_agg(id ORDER BY seq) FROM events)
"""

# The end step's commit: the same fences, the run finished (succeeded, its output) instead
# of a successor; its two events numbered from the run's counter like COMMIT_SQL's. Run
# inside a transaction with the run_finished signal (fastpath.finish).
FINISH_SQL = """
WITH locked_run AS (
    SELECT id FROM runs_run WHERE id = %(run)s AND version = %(version)s FOR NO KEY UPDATE
), locked_step AS (
    SELECT id FROM runs_step
    WHERE id = %(step)s AND status = %(st_running)s AND attempt = %(attempt)s AND lease_owner = %(owner)s
      AND EXISTS (SELECT 1 FROM locked_run)
    FOR NO KEY UPDATE
), run_upd AS (
    UPDATE runs_run SET state_sizes = %(state_sizes)s::jsonb, scheduler = %(scheduler)s::jsonb,
        input_tokens = input_tokens + %(in_tokens)s, output_tokens = output_tokens + %(out_tokens)s,
        cost_usd = cost_usd + %(cost)s, status = %(run_finished)s, output = %(run_output)s::jsonb, error = NULL,
        finished_at = %(now)s, version = version + 1, updated_at = %(now)s
    WHERE id IN (SELECT id FROM locked_run) AND EXISTS (SELECT 1 FROM locked_step)
    RETURNING id
), seq_upd AS (
    INSERT INTO runs_runeventcounter (run_id, last) SELECT id, 2 FROM run_upd
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
    WHERE step_id IN (SELECT id FROM step_upd) AND number = %(attempt)s
), events AS (
    INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at)
    SELECT %(run)s, (SELECT last - 1 FROM seq_upd), id, %(ev_succeeded)s, %(done_event)s::jsonb, %(now)s FROM step_upd
    UNION ALL SELECT %(run)s, (SELECT last FROM seq_upd), id, %(ev_finished)s, %(finished_event)s::jsonb, %(now)s FROM step_upd
    RETURNING id, seq
)
SELECT (SELECT id FROM step_upd), (SELECT last FROM seq_upd), (SELECT array_agg(id ORDER BY seq) FROM events)
"""


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


def _execute(sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """Execute one of this module's statements, prepared (see :func:`commit`); its one row,
    or None when the row is missing or its first value is NULL (a fence failed)."""
    connection.ensure_connection()
    connection.validate_thread_sharing()  # what connection.cursor() checks too
    started = time.perf_counter()
    # django-stubs types the driver cursor as Django's own wrapper.
    with connection.make_cursor(_PreparedCursor(connection.connection)) as cursor:  # type: ignore[arg-type]
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if connection.queries_logged:
        # Logged here, not by Django's debug cursor: that one asks the cursor for the
        # query it sent, which psycopg does not keep for a prepared execution.
        connection.queries_log.append({"sql": sql, "time": f"{time.perf_counter() - started:.3f}"})
    return None if not row or row[0] is None else tuple(row)
