"""The sequential fast path on SQLite (no data-modifying CTEs): fixed statements in one transaction.

The transaction is IMMEDIATE (settings), so it holds SQLite's single writer lock from
BEGIN and the version and lease checks cannot race. A failed check rolls it all back and
the caller takes the slow path. Statuses and event kinds are parameters (fastpath.params).
"""
from __future__ import annotations

from typing import Any

from django.db import connection, transaction

RUN_SQL = """
UPDATE runs_run SET state_sizes = %(state_sizes)s, scheduler = %(scheduler)s, step_count = step_count + 1,
    input_tokens = input_tokens + %(in_tokens)s, output_tokens = output_tokens + %(out_tokens)s,
    cost_usd = cost_usd + %(cost)s, status = %(run_running)s, version = version + 1, updated_at = %(now)s
WHERE id = %(run)s AND version = %(version)s
"""
# The run's event counter row (runs.engine.events), bumped by the number of events the
# transaction writes, after the run and step rows are written.
SEQ_SQL = """
INSERT INTO runs_runeventcounter (run_id, last) VALUES (%(run)s, %(n_events)s)
ON CONFLICT (run_id) DO UPDATE SET last = runs_runeventcounter.last + excluded.last
RETURNING last
"""
STEP_SQL = """
UPDATE runs_step SET status = %(st_succeeded)s, output = %(output)s, updates = %(updates)s, usage = %(usage)s,
    cost_usd = %(step_cost)s, price_version = %(price_version)s, lease_owner = '', lease_expires_at = NULL, finished_at = %(now)s,
    state_seq = %(version)s + 1
WHERE id = %(step)s AND status = %(st_running)s AND attempt = %(attempt)s AND lease_owner = %(owner)s
"""
# The versions of the keys the step wrote (runs.engine.state), from one JSON parameter.
STATE_SQL = """
INSERT INTO runs_runstatekey (run_id, key, seq, value, size, contrib)
SELECT %(run)s, w.key, %(version)s + 1, w.value -> '$.v', w.value ->> '$.s', w.value ->> '$.c'
FROM json_each(%(writes)s) AS w
"""
ATTEMPT_SQL = """
UPDATE runs_stepattempt SET status = %(att_succeeded)s, usage = %(usage)s, cost_usd = %(step_cost)s,
    price_version = %(price_version)s, finished_at = %(now)s
WHERE step_id = %(step)s AND number = %(attempt)s
"""
NEW_STEP_SQL = """
INSERT INTO runs_step (run_id, parent_id, child_key, node_id, kind, iteration, depth, status, attempt, max_attempts,
    idempotency_key, lease_owner, lease_expires_at, started_at, created_at, price_version)
VALUES (%(run)s, NULL, '', %(next_node)s, %(next_kind)s, %(next_iteration)s, %(next_depth)s, %(st_running)s, 1,
    %(next_max_attempts)s, %(next_key)s, %(owner)s, %(lease_until)s, %(now)s, %(now)s, '')
RETURNING id
"""
NEW_ATTEMPT_SQL = """
INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version)
VALUES (%(next_step)s, 1, %(owner)s, %(att_running)s, %(now)s, '')
"""
EVENTS_SQL = """
INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at) VALUES
    (%(run)s, %(seq)s - 2, %(step)s, %(ev_succeeded)s, %(done_event)s, %(now)s),
    (%(run)s, %(seq)s - 1, %(next_step)s, %(ev_created)s, %(created_event)s, %(now)s),
    (%(run)s, %(seq)s, %(next_step)s, %(ev_started)s, %(started_event)s, %(now)s)
RETURNING id
"""

# The end step's commit: the run finished instead of a successor (fastpath.finish).
RUN_FINISH_SQL = """
UPDATE runs_run SET state_sizes = %(state_sizes)s, scheduler = %(scheduler)s,
    input_tokens = input_tokens + %(in_tokens)s, output_tokens = output_tokens + %(out_tokens)s,
    cost_usd = cost_usd + %(cost)s, status = %(run_finished)s, output = %(run_output)s, error = NULL,
    finished_at = %(now)s, version = version + 1, updated_at = %(now)s
WHERE id = %(run)s AND version = %(version)s
"""
FINISH_EVENTS_SQL = """
INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at) VALUES
    (%(run)s, %(seq)s - 1, %(step)s, %(ev_succeeded)s, %(done_event)s, %(now)s),
    (%(run)s, %(seq)s, %(step)s, %(ev_finished)s, %(finished_event)s, %(now)s)
RETURNING id
"""


class _Stale(Exception):
    """The version or lease check failed: roll back."""


def commit(params: dict[str, Any]) -> tuple[int, int, list[int]] | None:
    """Run the fenced commit: (the new step's id, the last event seq, the three event ids
    in seq order), or None when the version or lease check failed. The events' seq come
    from the run's counter, bumped by SEQ_SQL in this transaction (runs.engine.events)."""
    params["n_events"] = 3
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(RUN_SQL, params)
            if cursor.rowcount != 1:
                raise _Stale
            cursor.execute(STEP_SQL, params)
            if cursor.rowcount != 1:
                raise _Stale
            if params["writes"] != "{}":
                cursor.execute(STATE_SQL, params)
            cursor.execute(SEQ_SQL, params)
            params["seq"] = int(cursor.fetchone()[0])
            cursor.execute(ATTEMPT_SQL, params)
            cursor.execute(NEW_STEP_SQL, params)
            params["next_step"] = cursor.fetchone()[0]
            cursor.execute(NEW_ATTEMPT_SQL, params)
            cursor.execute(EVENTS_SQL, params)
            ids = sorted(int(r[0]) for r in cursor.fetchall())
    except _Stale:
        return None
    return int(params["next_step"]), int(params["seq"]), ids


def finish(params: dict[str, Any]) -> tuple[int, list[int]] | None:
    """Run the fenced end-step commit inside the caller's transaction: (the last event
    seq, the two event ids in seq order), or None (this part rolled back, nothing written)
    when the version or lease check failed. The seq come from the run's counter, bumped by
    SEQ_SQL in this transaction."""
    params["n_events"] = 2
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(RUN_FINISH_SQL, params)
            if cursor.rowcount != 1:
                raise _Stale
            cursor.execute(STEP_SQL, params)
            if cursor.rowcount != 1:
                raise _Stale
            if params["writes"] != "{}":
                cursor.execute(STATE_SQL, params)
            cursor.execute(SEQ_SQL, params)
            params["seq"] = int(cursor.fetchone()[0])
            cursor.execute(ATTEMPT_SQL, params)
            cursor.execute(FINISH_EVENTS_SQL, params)
            ids = sorted(int(r[0]) for r in cursor.fetchall())
    except _Stale:
        return None
    return int(params["seq"]), ids
