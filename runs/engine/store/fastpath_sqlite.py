"""The sequential fast path on SQLite (no data-modifying CTEs): fixed statements in one transaction.

The transaction is IMMEDIATE (settings), so it holds SQLite's single writer lock from
BEGIN and the version and lease checks cannot race. A failed check rolls it all back and
the caller takes the slow path. Statuses and event kinds are parameters (fastpath.params).
"""
from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction

# A parallel branch locks the run first (one writer at a time: nothing to gain from a
# snapshot statement). See runs.engine.store.paths.FastPath.
BRANCH_FROM_SNAPSHOT = False

# The run update every fast-path commit opens with (D3: one fence, three commits): the usage
# totals, size map, bookkeeping and version, only if the version is the one the worker
# read; ``{run_set}`` is what the run row takes besides.
_RUN_FENCE = """
UPDATE runs_run SET state_sizes = %(state_sizes)s, scheduler = %(scheduler)s,
    input_tokens = input_tokens + %(in_tokens)s, output_tokens = output_tokens + %(out_tokens)s,
    cost_usd = cost_usd + %(cost)s, {run_set}, version = version + 1, updated_at = %(now)s
WHERE id = %(run)s AND version = %(version)s
"""
RUN_SQL = _RUN_FENCE.format(run_set="step_count = step_count + 1, status = %(run_running)s")
# The run's event counter row (runs.engine.store.events), bumped by the number of events the
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
# The versions of the keys the step wrote (runs.engine.store.state), from one JSON parameter.
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
INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version, build)
VALUES (%(next_step)s, 1, %(owner)s, %(att_running)s, %(now)s, '', %(build)s)
"""
EVENTS_SQL = """
INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at) VALUES
    (%(run)s, %(seq)s - 2, %(step)s, %(ev_succeeded)s, %(done_event)s, %(now)s),
    (%(run)s, %(seq)s - 1, %(next_step)s, %(ev_created)s, %(created_event)s, %(now)s),
    (%(run)s, %(seq)s, %(next_step)s, %(ev_started)s, %(started_event)s, %(now)s)
RETURNING id
"""

# The end step's commit: the run finished instead of a successor (fastpath.finish).
RUN_FINISH_SQL = _RUN_FENCE.format(
    run_set="status = %(run_finished)s, output = %(run_output)s, error = NULL, finished_at = %(now)s"
)
FINISH_EVENTS_SQL = """
INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at) VALUES
    (%(run)s, %(seq)s - 1, %(step)s, %(ev_succeeded)s, %(done_event)s, %(now)s),
    (%(run)s, %(seq)s, %(step)s, %(ev_finished)s, %(finished_event)s, %(now)s)
RETURNING id
"""


# parallel_commit (fastpath): the run row and the step under our lease, read inside the
# IMMEDIATE transaction (it holds the writer lock, so nothing changes them until it ends).
LOCK_SQL = """
SELECT id, version, status, scheduler, state_sizes, step_count, max_steps, max_parallelism,
    input_tokens, output_tokens, cost_usd
FROM runs_run WHERE id = %(run)s AND budget_usd IS NULL AND budget_tokens IS NULL
"""
FENCE_SQL = """
SELECT id FROM runs_step WHERE id = %(step)s AND status = %(st_running)s AND attempt = %(attempt)s AND lease_owner = %(owner)s
"""
ACTIVE_SQL = """
SELECT id, node_id, status, dispatched_at, available_at, parent_id FROM runs_step
WHERE run_id = %(run)s AND status IN (%(a0)s, %(a1)s, %(a2)s, %(a3)s, %(a4)s) AND id <> %(step)s ORDER BY id
"""
KEYS_SQL = """
SELECT k.key, k.value, CASE WHEN k.key IN (SELECT value FROM json_each(%(keys)s)) THEN k.contrib END FROM runs_runstatekey AS k
WHERE k.run_id = %(run)s AND k.seq = (SELECT MAX(seq) FROM runs_runstatekey WHERE run_id = k.run_id AND key = k.key)
"""
PARALLEL_RUN_SQL = _RUN_FENCE.format(run_set="step_count = step_count + %(n_new)s, status = %(run_status)s")
NEW_STEPS_SQL = """
INSERT INTO runs_step (run_id, parent_id, child_key, node_id, kind, iteration, depth, status, attempt, max_attempts,
    idempotency_key, lease_owner, lease_expires_at, started_at, dispatched_at, due_at, created_at, price_version)
SELECT %(run)s, NULL, '', s.value ->> '$.node_id', s.value ->> '$.kind', s.value ->> '$.iteration', s.value ->> '$.depth',
    s.value ->> '$.status', s.value ->> '$.attempt', s.value ->> '$.max_attempts', s.value ->> '$.key', s.value ->> '$.owner',
    s.value ->> '$.lease_until', s.value ->> '$.started_at', s.value ->> '$.dispatched_at', s.value ->> '$.dispatched_at',
    %(now)s, ''
FROM json_each(%(new_steps)s) AS s ORDER BY s.key
RETURNING id, idempotency_key
"""
RELEASE_SQL = """
UPDATE runs_step SET dispatched_at = %(now)s, due_at = %(now)s
WHERE run_id = %(run)s AND id IN (SELECT value FROM json_each(%(dispatch_old_json)s))
"""
# The run's oldest due sibling, claimed for us when the commit keeps nothing.
PICK_SQL = """
UPDATE runs_step SET status = %(st_running)s, attempt = 1, lease_owner = %(owner)s, lease_expires_at = %(lease_until)s,
    started_at = %(now)s
WHERE id = (
    SELECT id FROM runs_step
    WHERE run_id = %(run)s AND status = %(st_pending)s AND parent_id IS NULL AND attempt = 0 AND due_at <= %(now)s
      AND (available_at IS NULL OR available_at <= %(now)s)
    ORDER BY due_at, id LIMIT 1
)
RETURNING id, node_id, kind, iteration, depth, max_attempts, idempotency_key
"""
PICK_ATTEMPT_SQL = """
INSERT INTO runs_stepattempt (step_id, number, worker, status, started_at, price_version, build)
VALUES (%(picked)s, 1, %(owner)s, %(att_running)s, %(now)s, '', %(build)s)
"""
PARALLEL_EVENTS_SQL = """
INSERT INTO runs_runevent (run_id, seq, step_id, kind, data, created_at)
SELECT %(run)s, %(seq)s - %(n_events)s + (e.value ->> '$.ord'), e.value ->> '$.step_id', e.value ->> '$.kind',
    json(e.value ->> '$.data'), %(now)s
FROM json_each(%(events_json)s) AS e
RETURNING id, seq, step_id
"""


class _Stale(Exception):
    """The version or lease check failed: roll back."""


def commit(params: dict[str, Any]) -> tuple[int, int, list[int]] | None:
    """Run the fenced commit: (the new step's id, the last event seq, the three event ids
    in seq order), or None when the version or lease check failed. The events' seq come
    from the run's counter, bumped by SEQ_SQL in this transaction (runs.engine.store.events)."""
    params["n_events"] = 3
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            _fenced_writes(cursor, RUN_SQL, params)
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
            _fenced_writes(cursor, RUN_FINISH_SQL, params)
            cursor.execute(FINISH_EVENTS_SQL, params)
            ids = sorted(int(r[0]) for r in cursor.fetchall())
    except _Stale:
        return None
    return int(params["seq"]), ids


def _fenced_writes(cursor: Any, run_sql: str, params: dict[str, Any]) -> None:
    """The writes every fast-path commit opens with (D3): the run row (``run_sql``, built
    on ``_RUN_FENCE``: checked by version), the step under our lease, the versions of the
    keys it wrote, the run's event counter bumped by ``params["n_events"]`` (its new last
    seq put in ``params["seq"]``) and the attempt. Raises _Stale, for the caller's
    transaction to roll back, when the version or lease check fails."""
    cursor.execute(run_sql, params)
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


def _scalars(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` without list values (the shared parameters hold some for PostgreSQL's
    arrays): Django's SQLite cursor quotes every parameter it is given for its query log."""
    return {k: v for k, v in params.items() if not isinstance(v, list)}


def lock(params: dict[str, Any]) -> tuple[Any, ...] | None:
    """parallel_commit's read of the run row (LOCK_SQL; the IMMEDIATE transaction holds
    the writer lock), or None (no such run, or a budget: the portable path decides)."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK_SQL, _scalars(params))
        row = cursor.fetchone()
    return None if row is None else tuple(row)


def read(params: dict[str, Any]) -> tuple[int | None, list[list[Any]], dict[str, list[Any]]]:
    """parallel_commit's reads (see fastpath_postgresql.read for the shapes)."""
    statuses = params["active_statuses"]
    args = {**_scalars(params), **{f"a{i}": s for i, s in enumerate(statuses)}, "keys": json.dumps(params["keys"])}
    with connection.cursor() as cursor:
        cursor.execute(FENCE_SQL, args)
        fence = cursor.fetchone()
        if fence is None:
            return None, [], {}
        cursor.execute(ACTIVE_SQL, args)
        active = [list(r) for r in cursor.fetchall()]
        cursor.execute(KEYS_SQL, args)
        keys = {k: [json.loads(v) if v is not None else None, json.loads(c) if c is not None else None] for k, v, c in cursor.fetchall()}
    return int(fence[0]), active, keys


def parallel(params: dict[str, Any]) -> tuple[int, list[list[Any]], dict[str, int], list[Any] | None] | None:
    """parallel_commit's writes, in the caller's transaction (see
    fastpath_postgresql.parallel for the shapes), or None when the fence failed (this
    part rolled back)."""
    dispatch_old = params["dispatch_old"]
    params = _scalars(params)
    try:
        # No savepoint of its own: a failed fence raises out of the caller's transaction,
        # which rolls back (fastpath.parallel_commit).
        with connection.cursor() as cursor:
            picked = None
            if params["claim_next"]:
                cursor.execute(PICK_SQL, params)
                picked = cursor.fetchone()
            n_events = params["n_events"]
            params = {**params, "n_events": n_events + (1 if picked else 0)}
            _fenced_writes(cursor, PARALLEL_RUN_SQL, params)
            new_ids: dict[str, int] = {}
            if params["n_new"]:
                cursor.execute(NEW_STEPS_SQL, params)
                new_ids = {k: int(i) for i, k in cursor.fetchall()}
                if params["kept_key"]:
                    cursor.execute(PICK_ATTEMPT_SQL, {**params, "picked": new_ids[params["kept_key"]]})
            if dispatch_old:
                cursor.execute(RELEASE_SQL, {**params, "dispatch_old_json": json.dumps(dispatch_old)})
            rows = json.loads(params["events"])
            for row in rows:
                row["step_id"] = new_ids[row["ref"]] if row["ref"] else params["step"]
            if picked:
                cursor.execute(PICK_ATTEMPT_SQL, {**params, "picked": picked[0]})
                rows.append({"ord": n_events + 1, "step_id": picked[0], "kind": params["ev_started"],
                             "data": {"node_id": picked[1], "iteration": picked[3], "attempt": 1}})
            cursor.execute(PARALLEL_EVENTS_SQL, {**params, "n_events": params["n_events"], "events_json": json.dumps(rows)})
            events = sorted(([int(i), int(q), int(sid)] for i, q, sid in cursor.fetchall()), key=lambda e: e[1])
    except _Stale:
        return None
    return int(params["seq"]), events, new_ids, list(picked) if picked else None
