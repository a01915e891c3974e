"""Store conformance for fan-out: branches claimed and committed through the fast path.

Every test runs on the portable path and on the database's fast path (conftest.py), which
must agree on rows, events and hand-offs; ``assert_took_parallel`` fails a fast
parametrization whose commit fell back to the portable path. Commits here keep their
successor (``keep_next``, the worker loop's default): that is the path fan-outs take.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import AttemptStatus, Run, RunEvent, RunEventKind, RunStatus, Step, StepAttempt, StepStatus
from runs.nodes.base import NodeResult
from runs.vocabulary import NodeError
from tests.support import engine
from tests.support.conformance import W2, W, kinds, last_event_id, started, step, version
from tests.support.specs import edge, graph, node, transform

pytestmark = pytest.mark.django_db(transaction=True)


def fanout(n, **extra):
    ids = [f"b{k}" for k in range(1, n + 1)]
    return graph(
        [node("start", "start"), *[transform(i, hits="1") for i in ids], node("join", "join"), node("end", "end", config={"output": ["hits"]})],
        [edge("start", i) for i in ids] + [edge(i, "join") for i in ids] + [edge("join", "end")],
        state={"hits": {"reducer": "add", "default": 0}},
        **extra,
    )


def commit(store_path, claimed, result=None):
    """Commit ``claimed`` (keeping a successor), checking it took the parallel path."""
    with CaptureQueriesContext(connection) as queries, engine.local_mode() as queue:
        outcome = engine.step_commit(claimed, result or engine.execute_node(claimed))
    store_path.assert_took_parallel(queries)
    return outcome, list(queue)


def test_a_fan_out_creates_its_branches_keeps_one_and_releases_the_rest(store_path):
    run, start_id = started(fanout(3))
    claimed = engine.step_claim(start_id, W)
    after = last_event_id(run)
    outcome, queued = commit(store_path, claimed, NodeResult())
    branches = {s.node_id: s for s in Step.objects.filter(run=run).exclude(node_id="start")}
    assert sorted(branches) == ["b1", "b2", "b3"]
    kept = outcome.next_step
    assert kept is not None and kept.node_id == "b1" and kept.attempt == 1 and kept.snapshot is None
    assert (branches["b1"].status, branches["b1"].lease_owner, branches["b1"].attempt) == (StepStatus.RUNNING, W, 1)
    for other in ("b2", "b3"):
        assert (branches[other].status, branches[other].attempt) == (StepStatus.PENDING, 0)
        assert branches[other].dispatched_at is not None and branches[other].due_at is not None
    assert outcome.dispatch == queued == [branches["b2"].pk, branches["b3"].pk]
    assert kinds(run, after) == [RunEventKind.STEP_SUCCEEDED] + [RunEventKind.STEP_CREATED] * 3 + [RunEventKind.STEP_STARTED]
    assert list(StepAttempt.objects.filter(step_id=branches["b1"].pk).values_list("number", "status", "worker")) == [(1, AttemptStatus.RUNNING, W)]
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.status, fresh.step_count) == (RunStatus.RUNNING, 4)


def test_a_branch_that_creates_nothing_claims_its_oldest_due_sibling_in_its_commit(store_path):
    run, start_id = started(fanout(3))
    b1 = commit(store_path, engine.step_claim(start_id, W), NodeResult())[0].next_step
    after = last_event_id(run)
    outcome, queued = commit(store_path, b1)
    nxt = outcome.next_step
    b2 = step(run, "b2")
    assert nxt is not None and nxt.step_id == b2.pk and nxt.attempt == 1 and nxt.worker == W
    assert nxt.state["hits"] == 1  # the state as b1 committed it
    assert (b2.status, b2.lease_owner, b2.attempt) == (StepStatus.RUNNING, W, 1)
    assert list(StepAttempt.objects.filter(step_id=b2.pk).values_list("number", "status")) == [(1, AttemptStatus.RUNNING)]
    assert queued == [] and outcome.dispatch == []
    assert kinds(run, after) == [RunEventKind.STEP_SUCCEEDED, RunEventKind.STEP_STARTED]
    # b2's doorbell (delivered later) finds it running: a duplicate does nothing.
    assert engine.step_claim(b2.pk, W2) is None
    assert Step.objects.get(pk=b2.pk).attempt == 1
    assert not Step.objects.filter(run=run, node_id="join").exists()


def test_the_last_branch_creates_the_join_and_the_rest_runs_sequentially(store_path):
    run, start_id = started(fanout(3))
    claimed = commit(store_path, engine.step_claim(start_id, W), NodeResult())[0].next_step
    for _ in range(2):
        claimed = commit(store_path, claimed)[0].next_step
    assert claimed.node_id == "b3"
    outcome, queued = commit(store_path, claimed)
    join = outcome.next_step
    assert join is not None and join.node_id == "join" and queued == []
    # The join is the run's only active step: its claim carries a snapshot, so the join
    # and the end commit through the sequential path.
    assert join.snapshot is not None and join.snapshot.version == Run.objects.get(pk=run.pk).version
    end = engine.step_commit(join, engine.execute_node(join)).next_step
    assert engine.step_commit(end, engine.execute_node(end)).run_status == RunStatus.SUCCEEDED
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.status == RunStatus.SUCCEEDED and fresh.state["hits"] == 3 and fresh.output == {"hits": 3}
    steps = list(Step.objects.filter(run=run).values_list("node_id", "status", "attempt"))
    assert len(steps) == 6 and all(s[1:] == (StepStatus.SUCCEEDED, 1) for s in steps)
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))  # numbered without gaps across every path


def test_a_branch_with_a_lost_lease_writes_nothing(store_path):
    run, start_id = started(fanout(2))
    b1 = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    Step.objects.filter(pk=b1.step_id).update(lease_owner=W2)  # recovery gave it away
    before = (last_event_id(run), Run.objects.get(pk=run.pk).version)
    with engine.local_mode():
        outcome = engine.step_commit(b1, engine.execute_node(b1))
    assert not outcome.committed and outcome.next_step is None
    assert (last_event_id(run), Run.objects.get(pk=run.pk).version) == before
    assert Step.objects.get(pk=step(run, "b2").pk).status == StepStatus.PENDING
    assert Step.objects.get(pk=b1.step_id).status == StepStatus.RUNNING


def test_a_held_branch_is_released_when_a_slot_frees(store_path):
    run, start_id = started(fanout(3, settings={"max_parallelism": 2}))
    outcome, queued = commit(store_path, engine.step_claim(start_id, W), NodeResult())
    b3 = step(run, "b3")
    assert queued == [step(run, "b2").pk] and b3.dispatched_at is None  # the bound holds b3
    outcome, queued = commit(store_path, outcome.next_step)
    assert outcome.next_step is not None and outcome.next_step.node_id == "b2"  # the due sibling
    assert queued == [b3.pk]  # the freed slot releases b3 to the queue
    assert Step.objects.get(pk=b3.pk).due_at is not None


def test_a_branch_commits_while_its_sibling_waits_out_a_retry_backoff(store_path):
    """Issue 23, item 7: on SQLite a branch's commit read its sibling's ``available_at``
    back naive through the fixed statements and compared it with an aware ``now``
    (plan_dispatch: "can't compare offset-naive and offset-aware datetimes"). The branch
    commits, the sibling in backoff is neither released early nor lost."""
    spec = fanout(3)
    for n in spec["nodes"]:
        if n["id"] == "b2":
            n["retry"] = {"max_attempts": 3, "backoff_seconds": 60}
    run, start_id = started(spec)
    b1 = commit(store_path, engine.step_claim(start_id, W), NodeResult())[0].next_step
    b2 = engine.step_claim(step(run, "b2").pk, W2)
    with engine.local_mode():
        assert engine.step_fail(b2, NodeError("flaky", code="flaky", retryable=True)).committed
    waiting = step(run, "b2")
    assert waiting.status == StepStatus.PENDING and waiting.dispatched_at is None and waiting.available_at is not None
    outcome, queued = commit(store_path, b1)
    assert outcome.committed
    assert outcome.next_step is not None and outcome.next_step.node_id == "b3"  # the due sibling, not b2
    assert queued == [] and step(run, "b2").dispatched_at is None  # still waiting out its backoff
    assert Run.objects.get(pk=run.pk).state["hits"] == 1


def test_a_step_whose_run_has_a_budget_takes_the_portable_path(store_path):
    run, start_id = started(fanout(2))
    Run.objects.filter(pk=run.pk).update(budget_tokens=1000)
    claimed = engine.step_claim(start_id, W)
    with CaptureQueriesContext(connection) as queries, engine.local_mode():
        outcome = engine.step_commit(claimed, NodeResult())
    assert outcome.committed and Step.objects.filter(run=run).count() == 3
    assert not any("AND budget_usd IS NULL AND budget_tokens IS NULL" in q["sql"] for q in queries.captured_queries)


def test_an_in_process_fan_out_claims_each_branch_once(store_path, settings):
    """A sibling the committing worker took in its commit is not claimed again in-process:
    its local doorbell is dropped (dispatch.taken), not spent on a transaction that finds
    it running. The start is the only step a claim takes; every branch is started once.
    One step thread: with more, the released siblings are claimed at once onto threads of
    their own (test_parallel_steps.py), and none is left for a commit to take."""
    settings.BALLAST_WORKER_STEP_THREADS = 1
    run, _ = started(fanout(3))
    with engine.local_mode() as queue, CaptureQueriesContext(connection) as queries:
        queue.append(step(run, "start").pk)
        assert engine.drive_local(run.pk, queue=queue, timeout=30) == RunStatus.SUCCEEDED
    # The portable claim's compare-and-set, or the first claim's one statement (PostgreSQL's fast path).
    claims = [q for q in queries.captured_queries if '"attempt" = ("runs_step"."attempt" + 1)' in q["sql"] or "WITH pick AS" in q["sql"]]
    assert len(claims) == 1, [q["sql"][:120] for q in claims]
    assert sorted(StepAttempt.objects.filter(step__run=run).values_list("step__node_id", flat=True)) == [
        "b1", "b2", "b3", "end", "join", "start"
    ]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row xmin: PostgreSQL")
def test_a_fan_outs_doorbells_are_enqueued_in_one_transaction():
    """The ORM broker's doorbells of one hand-off commit together (one WAL flush): their
    queue rows carry the same inserting transaction id."""
    from django_q.brokers import get_broker

    from runs.engine import dispatch

    get_broker().purge_queue()
    dispatch.enqueue([101, 102, 103])
    dispatch.enqueue([104])
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM django_q_ormq ORDER BY id")
        xmins = [row[0] for row in cursor.fetchall()]
    assert len(xmins) == 4 and len(set(xmins[:3])) == 1 and xmins[3] != xmins[0]
    get_broker().purge_queue()


# --------------------------------------------------------------------------- one statement a branch (PostgreSQL)
# A branch leased by a parallel commit carries the run as that commit left it
# (ClaimedStep.branch_snapshot); its commit is then ONE fenced statement in autocommit,
# checked against the run's version and active steps, and takes the locked path when
# either moved. These tests pin the statement counts and the two fallbacks.

pg_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement branch commit is PostgreSQL's")


def _count(queries, marker):
    return sum(marker in q["sql"] for q in queries.captured_queries)


@pg_only
def test_an_in_process_fan_out_commits_each_branch_in_one_statement(settings):
    from tests.support.conformance import BRANCH_MARKER, PARALLEL_MARKER

    # One step thread: the branches run one after another on this thread, each from the
    # snapshot the previous commit left (with more, they run at once on threads of their
    # own: test_parallel_steps.py).
    settings.BALLAST_WORKER_STEP_THREADS = 1
    run, _ = started(fanout(4))
    with engine.local_mode() as queue, CaptureQueriesContext(connection) as queries:
        queue.append(step(run, "start").pk)
        assert engine.drive_local(run.pk, queue=queue, timeout=30) == RunStatus.SUCCEEDED
    # The start fans out from its claim's snapshot (the run's only active step), every
    # branch from the snapshot its predecessor's commit left: one statement each, no
    # run lock, no read, no BEGIN/COMMIT.
    assert _count(queries, PARALLEL_MARKER) == 0
    assert _count(queries, BRANCH_MARKER) == 5
    assert Run.objects.get(pk=run.pk).state["hits"] == 4
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


@pg_only
def test_a_branch_whose_run_moved_since_its_snapshot_takes_the_locked_path():
    from tests.support.conformance import BRANCH_MARKER, PARALLEL_MARKER

    run, start_id = started(fanout(3))
    with engine.local_mode():
        b1 = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    assert b1 is not None and b1.branch_snapshot is not None
    # Another worker claims and commits b2 first: the run's version moves.
    b2 = engine.step_claim(step(run, "b2").pk, W2)
    with engine.local_mode():
        assert engine.step_commit(b2, engine.execute_node(b2), keep_next=False).committed
    with CaptureQueriesContext(connection) as queries, engine.local_mode():
        outcome = engine.step_commit(b1, engine.execute_node(b1))
    assert outcome.committed
    assert _count(queries, BRANCH_MARKER) == 1 and _count(queries, PARALLEL_MARKER) == 1  # tried, then locked
    b3 = outcome.next_step
    assert b3 is not None and b3.node_id == "b3" and b3.state["hits"] == 2  # both branches merged
    # The chain met another worker's commit: its next commit does not try the snapshot.
    assert b3.branch_snapshot is not None and b3.branch_snapshot.contended
    with CaptureQueriesContext(connection) as queries:
        join = engine.step_commit(b3, engine.execute_node(b3)).next_step
    assert _count(queries, BRANCH_MARKER) == 0 and _count(queries, PARALLEL_MARKER) == 1
    assert join is not None and join.node_id == "join"
    assert Run.objects.get(pk=run.pk).state["hits"] == 3


@pg_only
def test_a_branch_snapshot_is_checked_against_the_active_steps_not_only_the_version():
    """A sibling handed to the queue by a writer that does not move the run version
    (here by hand) changes what the parallelism bound decides: the branch statement
    writes nothing and the locked path, reading the rows, does not release it twice."""
    from django.utils import timezone

    from tests.support.conformance import BRANCH_MARKER, PARALLEL_MARKER

    run, start_id = started(fanout(3, settings={"max_parallelism": 2}))
    with engine.local_mode():
        b1 = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    b3 = step(run, "b3")
    assert b3.dispatched_at is None  # held by the bound
    before = version(run)
    now = timezone.now()
    Step.objects.filter(pk=b3.pk).update(dispatched_at=now, due_at=now)
    assert version(run) == before
    with CaptureQueriesContext(connection) as queries, engine.local_mode() as queue:
        outcome = engine.step_commit(b1, engine.execute_node(b1))
    assert _count(queries, BRANCH_MARKER) == 1 and _count(queries, PARALLEL_MARKER) == 1
    assert outcome.committed and list(queue) == [] and outcome.dispatch == []
    assert outcome.next_step is not None and outcome.next_step.node_id == "b2"


@pg_only
def test_a_sibling_claimed_by_another_worker_does_not_spoil_the_snapshot():
    """A claim moves a dispatched sibling from pending to running without moving the run
    version: both count against the bound alike, so the branch still commits in one
    statement, and takes no sibling another worker holds."""
    from tests.support.conformance import BRANCH_MARKER, PARALLEL_MARKER

    run, start_id = started(fanout(3))
    with engine.local_mode():
        b1 = engine.step_commit(engine.step_claim(start_id, W), NodeResult()).next_step
    assert engine.step_claim(step(run, "b2").pk, W2) is not None
    with CaptureQueriesContext(connection) as queries, engine.local_mode():
        outcome = engine.step_commit(b1, engine.execute_node(b1))
    assert _count(queries, BRANCH_MARKER) == 1 and _count(queries, PARALLEL_MARKER) == 0
    assert outcome.next_step is not None and outcome.next_step.node_id == "b3"
    assert step(run, "b2").lease_owner == W2
