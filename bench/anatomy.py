"""Where a node commit's time goes: SQL statements per engine call, and a profile.

``queries`` wraps the engine's internal functions in THIS process only (no engine code is
changed) and records every SQL statement Django sends inside each call, with
``connection.execute_wrapper`` (the mechanism behind CaptureQueriesContext; the PostgreSQL
fast path's prepared statement goes through Django's cursor wrapper, so it is counted).
On PostgreSQL it also reports how many fast-path commits ran as a prepared statement. On
PostgreSQL each transaction also costs a BEGIN (sent by psycopg before the first
statement) and a COMMIT round trip, which Django's wrapper does not see: they are added
in ``round_trips``.

``profile`` samples the in-process linear case with pyinstrument and sums self time by
library and by function.
"""
from __future__ import annotations

import re
import statistics
import time
from collections import Counter, defaultdict
from typing import Any

from bench import graphs
from bench.cases import check_linear, start_inprocess
from bench.core import RESULTS_DIR, Reporter, check, log, reset_tables

TRACED = ("run_create", "step_claim", "step_commit", "step_fail", "due_pending_steps", "expired_step_ids")


def _shape(sql: str) -> str:
    """A statement's verb and table, e.g. ``UPDATE runs_step``."""
    text = " ".join(sql.split())
    m = re.match(r'(SELECT|INSERT INTO|UPDATE|DELETE FROM|SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT)\s*(.*)', text, re.I)
    if not m:
        return text[:40]
    verb, rest = m.group(1).upper(), m.group(2)
    if verb == "SELECT":
        t = re.search(r'FROM\s+"?(\w+)"?', rest, re.I)
        lock = " FOR UPDATE" if "FOR UPDATE" in text.upper() else ""
        return f"SELECT {t.group(1) if t else '?'}{lock}"
    if verb.endswith("SAVEPOINT"):
        return verb
    t = re.match(r'"?(\w+)"?', rest)
    return f"{verb.split()[0]} {t.group(1) if t else '?'}"


def case_queries(rep: Reporter, db: str, n: int | None, runs: int) -> dict[str, Any]:
    """SQL statements per engine call in a linear run (per node commit is the figure)."""
    from django.db import connection
    from django.test.utils import override_settings

    # Tracing wraps the engine's internal functions where the loop looks them up (this
    # profiler is the one place outside the engine that reaches past runs.engine.api).
    from runs.engine.store import claims, commit, operations, recovery_queries

    owners = {"run_create": operations, "step_claim": claims, "step_commit": commit, "step_fail": commit,
              "due_pending_steps": recovery_queries, "expired_step_ids": recovery_queries}

    n = n or 20
    version = graphs.publish(graphs.linear(n))
    reset_tables()
    start_inprocess(version)  # warm-up

    calls: list[tuple[str, list[str]]] = []
    current: list[list[str]] = []
    everything: list[str] = []
    in_transaction: set[str] = set()  # statements sent inside an atomic block (BEGIN ... COMMIT)
    sample_params: dict[str, Any] = {}  # the last parameters of each statement text

    durations: dict[str, list[float]] = defaultdict(list)  # ms per statement text
    # PostgreSQL: after each fast-path commit, how many times its session has executed the
    # commit as a prepared statement (pg_prepared_statements; 0: parsed and planned anew).
    from runs.engine.store.fastpath_postgresql import COMMIT_SQL

    prepared_runs: list[int] = []

    def wrapper(execute, sql, params, many, context):
        everything.append(sql)
        sample_params[sql] = params
        if current:
            current[-1].append(sql)
        if connection.in_atomic_block:
            in_transaction.add(sql)
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            durations[sql].append((time.perf_counter() - t) * 1000)
            if sql == COMMIT_SQL:
                # On the driver's connection itself: Django's wrappers do not see this one.
                row = connection.connection.execute(
                    "SELECT coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements"
                    " WHERE statement LIKE %s AND strpos(statement, 'new_step AS') > 0",
                    ["%locked_run AS (%"],
                ).fetchone()
                prepared_runs.append(int(row[0]))

    originals = {name: getattr(owners[name], name) for name in TRACED}

    def traced(name, fn):
        def inner(*args, **kwargs):
            current.append([])
            try:
                return fn(*args, **kwargs)
            finally:
                calls.append((name, current.pop()))

        return inner

    per_run_totals = []
    try:
        for name, fn in originals.items():
            setattr(owners[name], name, traced(name, fn))
        for _ in range(runs):
            before = len(everything)
            with connection.execute_wrapper(wrapper):
                rid, _ = start_inprocess(version)
            check_linear(rid, n)
            per_run_totals.append(len(everything) - before)
    finally:
        for name, fn in originals.items():
            setattr(owners[name], name, fn)

    commits = [sqls for name, sqls in calls if name == "step_commit"]
    check(len(commits) == runs * (n + 2), f"{len(commits)} step_commit calls, expected {runs * (n + 2)}")
    # A middle node's commit: not the start (its successor is the first kept step) nor the end.
    middle = [c for i, c in enumerate(commits) if 1 < i % (n + 2) < n + 1]
    counts = [len(c) for c in middle]
    typical = max(set(map(tuple, middle)), key=lambda s: sum(1 for c in middle if tuple(c) == s))
    shapes = [_shape(s) for s in typical]
    savepoints = sum(1 for s in shapes if "SAVEPOINT" in s)
    # A commit inside an atomic block also costs a COMMIT, never seen by the wrapper, and a
    # BEGIN: visible on SQLite (Django sends BEGIN IMMEDIATE through the cursor), not on
    # PostgreSQL (psycopg sends it before the first statement). One statement in
    # autocommit mode (the PostgreSQL fast path) is its own transaction: one round trip.
    transactional = any(sql in in_transaction for sql in typical)
    extra_rt = 0 if not transactional else 1 if shapes and shapes[0].upper().startswith("BEGIN") else 2
    rep.emit("queries.commit", n=n, runs=runs, samples=[float(c) for c in counts], unit="statements/commit",
             round_trips=len(typical) + extra_rt, savepoints=savepoints, statements=shapes,
             note="SQL statements Django sends in one step_commit of a middle node (fenced update, attempt, "
                  "run lock, successor insert leased to this worker, events, run update); round_trips adds BEGIN and COMMIT "
                  "when the statements run in a transaction block", autocommit=not transactional)
    by_call = defaultdict(list)
    for name, sqls in calls:
        by_call[name].append(len(sqls))
    for name, values in sorted(by_call.items()):
        if name == "step_commit":
            continue
        rep.emit(f"queries.{name}", n=n, runs=len(values), samples=[float(v) for v in values], unit="statements/call")
    per_node = [t / (n + 2) for t in per_run_totals]
    rep.emit("queries.per_node", n=n, runs=runs, samples=per_node, unit="statements/node",
             note="every statement of a whole in-process run (create, claims, commits, drive_local polls) / (n + 2) steps")
    log("typical middle-node commit: " + "; ".join(shapes))
    statement_ms = sum(statistics.median(durations[sql]) for sql in set(typical))
    rep.emit("queries.commit_time", n=n, runs=len(middle), median=statement_ms, p95=None, unit="ms/commit", per_commit=1,
             note="sum over the commit's statements of each one's median time in the driver call (round trip + server), "
                  "excluding BEGIN/COMMIT; the rest of a node's time is Python")
    if connection.vendor == "postgresql":
        check(prepared_runs, "no fast-path commit was seen on PostgreSQL")
        prepared = [1.0 if count > 0 else 0.0 for count in prepared_runs]
        rep.emit("queries.commit_prepared", n=n, runs=len(prepared), median=100 * sum(prepared) / len(prepared), p95=None,
                 unit="% of fast-path commits", prepares_per_run=sum(1 for c in prepared_runs if c == 1) / runs,
                 fast_commits_per_run=len(prepared_runs) / runs,
                 note="fast-path commits executed as a server-side prepared statement (pg_prepared_statements of the "
                      "session after each commit); prepares_per_run: how often it was parsed and planned per run "
                      "(once per connection; drive_local keeps the connection across runs since issue 11 item 5, so about 1/runs)")
    if connection.vendor == "postgresql" and len(typical) == 1:
        _planning(rep, n, runs, typical[0], sample_params[typical[0]])

    # Fan-out: every branch is claimed on its own and every commit reads the run's active
    # steps, so statements (and rows) per node grow with the number of branches.
    from bench.cases import check_fanout

    fan = 100
    fan_version = graphs.publish(graphs.fanout(fan))
    start_inprocess(fan_version)
    per_node, kinds = [], Counter()
    for _ in range(runs):
        seen: list[str] = []

        def count_all(execute, sql, params, many, context, seen=seen):
            seen.append(sql)
            return execute(sql, params, many, context)

        # One step thread: an execute_wrapper sees this thread's statements only, and the
        # branches would otherwise run (and commit) on step threads of their own.
        with override_settings(BALLAST_WORKER_STEP_THREADS=1), connection.execute_wrapper(count_all):
            rid, _ = start_inprocess(fan_version)
        check_fanout(rid, fan)
        per_node.append(len(seen) / (fan + 3))
        kinds = Counter(_shape(q) for q in seen)
    rep.emit("queries.fanout_per_node", n=fan, runs=runs, samples=per_node, unit="statements/node",
             top_statements=dict(kinds.most_common(8)),
             note=f"every statement of an in-process fan-out run of {fan} branches / {fan + 3} steps (one step thread)")
    return {"statements": shapes, "count": statistics.median(counts)}


def _planning(rep: Reporter, n: int, runs: int, sql: str, params: Any) -> None:
    """What the one-statement commit costs the server: planning vs execution (EXPLAIN
    ANALYZE), and its round trip with client-side binding (Django's default: the text is
    parsed and planned on every call) vs a prepared statement. The statement replayed is
    a commit that already happened, so its fence fails and it writes nothing."""
    import psycopg
    from django.db import connection, transaction

    plans, execs = [], []
    for _ in range(runs):
        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("EXPLAIN (ANALYZE, SUMMARY) " + sql, params)
                lines = [r[0] for r in cur.fetchall()]
            transaction.set_rollback(True)
        for line in lines:
            if line.startswith("Planning Time:"):
                plans.append(float(line.split()[2]))
            elif line.startswith("Execution Time:"):
                execs.append(float(line.split()[2]))
    rep.emit("queries.commit_planning", n=n, runs=runs, samples=plans, unit="ms", execution_noop_ms=statistics.median(execs),
             note="EXPLAIN ANALYZE of the one-statement commit: server planning time on every call with client-side binding")

    sd = connection.settings_dict
    raw = psycopg.connect(host=sd["HOST"] or None, port=sd["PORT"] or None, dbname=sd["NAME"], user=sd["USER"] or None,
                          password=sd["PASSWORD"] or None, autocommit=True)
    try:
        client, prepared = psycopg.ClientCursor(raw), raw.cursor()
        timings: dict[str, list[float]] = {"client": [], "prepared": []}
        for _ in range(20):  # warm-up; the prepared statement is created here
            client.execute(sql, params)
            prepared.execute(sql, params, prepare=True)
        for _ in range(runs * 40):
            t = time.perf_counter()
            client.execute(sql, params)
            client.fetchall()
            timings["client"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            prepared.execute(sql, params, prepare=True)
            prepared.fetchall()
            timings["prepared"].append((time.perf_counter() - t) * 1000)
    finally:
        raw.close()
    rep.emit("queries.commit_replay", n=n, runs=runs * 40, samples=timings["client"], unit="ms",
             prepared_median_ms=statistics.median(timings["prepared"]),
             note="round trip of the (no-op) commit statement: client-side binding (median) vs prepared (prepared_median_ms)")


# --------------------------------------------------------------------------- profile

_GROUPS = [
    ("psycopg: driver and waiting for the server", ("/psycopg/", "/psycopg_binary/", "/psycopg_pool/")),
    ("sqlite3 driver (incl. fsync wait)", ("/sqlite3/",)),
    ("django.db: ORM query building, SQL compile, model instances", ("/django/db/",)),
    ("django: other (signals, timezone, utils)", ("/django/",)),
    ("json encode/decode", ("/json/",)),
    ("pydantic", ("/pydantic/", "/pydantic_core/")),
    ("expressions and templates: runs/expressions, runs/templating, runs/sandbox/*",
     ("/runs/expressions", "/runs/templating", "/runs/sandbox/")),
    ("copy.deepcopy", ("/copy.py",)),
    ("engine: runs/engine/*", ("/runs/engine/",)),
    ("node kinds: runs/nodes/*", ("/runs/nodes/",)),
    ("builder (spec, topology)", ("/builder/",)),
    ("bench harness", ("/bench/",)),
]


def _group(path: str | None) -> str:
    path = path or ""
    for name, needles in _GROUPS:
        if any(n in path for n in needles):
            return name
    return "other (stdlib, threading, logging)"


# Library functions whose inclusive time per step is reported next to the engine's own.
_INCLUSIVE = {
    "django.db.backends.utils._execute",  # the driver call: network + server + psycopg
    "django.db.models.sql.compiler.as_sql",  # building SQL text
    "django.db.models.sql.compiler.execute_sql",  # building + executing
    "django.db.models.query._fetch_all",
    "django.db.models.base.__init__",  # model instances
    "django.db.transaction.__exit__",  # COMMIT
    "django.db.transaction.__enter__",
    "json.__init__.dumps",
    "json.__init__.loads",
    "copy.deepcopy",
    "runs.sandbox.expressions.evaluate",
    "runs.nodes.transform.execute",
    "pydantic.main.model_validate",
}


def case_profile(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """pyinstrument over ``runs`` in-process linear runs of ``n`` nodes."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        rep.skip("profile", "pyinstrument is not installed (pip install -e '.[bench]')")
        return
    n = n or 100
    version = graphs.publish(graphs.linear(n))
    reset_tables()
    for _ in range(2):
        start_inprocess(version)
    profiler = Profiler(interval=0.001, async_mode="disabled")
    t0 = time.perf_counter()
    profiler.start()
    ids = [start_inprocess(version)[0] for _ in range(runs)]
    profiler.stop()
    wall = time.perf_counter() - t0
    for rid in ids:
        check_linear(rid, n)

    root = profiler.last_session.root_frame()
    groups: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    inclusive: dict[str, float] = defaultdict(float)
    total = 0.0
    repo = str(RESULTS_DIR.parent.parent) + "/"

    def short(path: str | None) -> str:
        path = path or "?"
        return path.split("site-packages/")[-1].replace(repo, "")

    def walk(frame, stack: frozenset) -> None:
        nonlocal total
        if frame.is_synthetic:  # "[self]" time of its parent frame (or await time)
            owner = frame.parent
            if owner is not None:
                where = f"{owner.function} ({short(owner.file_path)}:{owner.line_no})"
                groups[_group(owner.file_path)] += frame.time
                functions[where] += frame.time
                total += frame.time
            return
        own = frame.time - sum(c.time for c in frame.children)
        if own > 0:
            groups[_group(frame.file_path)] += own
            functions[f"{frame.function} ({short(frame.file_path)}:{frame.line_no})"] += own
            total += own
        key = f"{short(frame.file_path).rsplit('.py', 1)[0].replace('/', '.')}.{frame.function}"
        if key not in stack and (key in _INCLUSIVE or "runs.engine." in key):
            inclusive[key] += frame.time
            stack = stack | {key}
        for child in frame.children:
            walk(child, stack)

    check(root is not None, "the profiler recorded nothing")
    walk(root, frozenset())
    per_node_ms = wall * 1000 / (runs * n)
    share = {k: round(100 * v / total, 1) for k, v in groups.most_common()}
    top = [(k, round(100 * v / total, 1)) for k, v in functions.most_common(20)]
    engine_calls = {k: round(1000 * v / (runs * (n + 2)), 3) for k, v in sorted(inclusive.items(), key=lambda kv: -kv[1])[:25]}
    text_path = RESULTS_DIR / f"profile-{db}-{time.strftime('%Y%m%dT%H%M%S')}.txt"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    text_path.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    rep.emit("profile.linear.inprocess", n=n, runs=runs, median=per_node_ms, p95=per_node_ms, unit="ms/node", per_commit=1,
             share_percent=share, top_self=top, inclusive_ms_per_step=engine_calls, report=str(text_path),
             note="pyinstrument (1 ms sampling, wall clock incl. I/O wait) over the runs; self time grouped by library")
    log("profile by library: " + ", ".join(f"{k}: {v}%" for k, v in share.items()))
    for k, v in top:
        log(f"  {v:5.1f}%  {k}")
