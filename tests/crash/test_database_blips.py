"""A lost database connection costs no finished step (issue 23, item 2), on PostgreSQL.

Real qclusters; ``pg_terminate_backend`` of backends of this test's own database only
(checked by name before each terminate): the worker's own connection while its node
runs, or every backend of the cluster while it is idle.
"""
from __future__ import annotations

import time

import pytest
from django.db import connection

from runs.models import AttemptStatus, RunStatus, Step, StepAttempt, StepStatus
from runs.services import run_start
from tests.support.cluster import wait_for_status, wait_until
from tests.support.specs import chain, graph, node, publish
from tests.support.tools import read_effects

pytestmark = [
    pytest.mark.crash,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_terminate_backend: PostgreSQL"),
]


def _terminate(pids: list[int]) -> None:
    """Terminate the given backends, each checked to belong to this test's database (a
    backend that ended by itself since it was listed is skipped: its pid may not be reused
    for another database's session here, and there is nothing left to terminate)."""
    ours = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        for pid in pids:
            cursor.execute("SELECT datname FROM pg_stat_activity WHERE pid = %s", [pid])
            row = cursor.fetchone()
            if row is None:
                continue
            assert row[0] == ours, (pid, row, ours)
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def _backend_gone(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is None


@pytest.mark.parametrize("tool", ["session_then_hold", "session_then_hold_unsafe"])
def test_a_step_whose_connection_is_terminated_mid_node_commits_once(cluster_factory, effects_file, tmp_path, tool):
    """The node finishes on a dead connection: the worker reconnects and commits the same
    attempt; no re-run (the side effect once), no park (not safe to repeat either)."""
    release = tmp_path / "release"
    spec = graph(
        [node("start", "start"), node("hold", "tool", config={"tool": tool, "args": {"label": "held", "release_file": str(release)}}), node("end", "end")],
        chain("start", "hold", "end"),
    )
    version = publish(spec)
    cluster = cluster_factory("blip", workers=1).start()
    cluster.wait_ready()
    run = run_start(version=version, run_input={})

    def held() -> list[dict]:
        return [e for e in read_effects(str(effects_file)) if e["label"] == "held"]

    wait_until(lambda: bool(held()), 60, "the node to report its database session", clusters=[cluster], run_id=run.pk)
    session = held()[0]["session"]
    _terminate([session])
    wait_until(lambda: _backend_gone(session), 30, "the terminated backend to be gone", clusters=[cluster])
    released_at = time.time()
    release.touch()
    run = wait_for_status(run, (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.WAITING), timeout=60, clusters=[cluster])
    assert run.status == RunStatus.SUCCEEDED, cluster.log_tail()
    step = Step.objects.get(run=run, node_id="hold")
    assert (step.status, step.attempt) == (StepStatus.SUCCEEDED, 1)
    assert list(StepAttempt.objects.filter(step=step).values_list("number", "status")) == [(1, AttemptStatus.SUCCEEDED)]
    assert len(held()) == 1, held()  # ran once: no re-run, and (unsafe) no park
    log = cluster.log_path.read_text(errors="replace")
    assert "reconnecting and trying again" in log and "lease handed back" not in log
    print(f"\n[{tool}] node released -> step committed: {step.finished_at.timestamp() - released_at:.3f}s")


def _stat_saves() -> list:
    """The expiry stamps of the django-q2 cluster status the sentinel saves through the
    database cache every 0.5 s (each save moves it)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT expires FROM ballast_cache WHERE cache_key LIKE %s", ["%:cluster:%"])
        return [r[0] for r in cursor.fetchall()]


def test_every_backend_of_an_idle_cluster_terminated_reconnects_at_once(cluster_factory, effects_file):
    """The sentinel's status saves and the pusher's pulls reconnect on their next call
    (not after django-q2's 30 s scheduler tick, logging "the connection is closed" every
    0.5 s meanwhile), and the next run is taken from the queue."""
    version = publish(graph([node("start", "start"), node("end", "end")], chain("start", "end")))
    cluster = cluster_factory("idle", workers=1).start()
    cluster.wait_ready()
    wait_until(lambda: bool(_stat_saves()), 60, "the sentinel's first status save", clusters=[cluster])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [connection.settings_dict["NAME"]]
        )
        pids = [r[0] for r in cursor.fetchall()]
    assert pids
    before = max(_stat_saves())
    mark = len(cluster.log_path.read_text(errors="replace"))
    _terminate(pids)
    seen: set = set()

    def sentinel_saved_twice() -> bool:
        seen.update(e for e in _stat_saves() if e > before)
        return len(seen) >= 2

    wait_until(sentinel_saved_twice, 60, "the sentinel to save its status twice on a new connection", clusters=[cluster])
    run = run_start(version=version, run_input={})
    assert wait_for_status(run, RunStatus.SUCCEEDED, timeout=60, clusters=[cluster]).status == RunStatus.SUCCEEDED
    after = cluster.log_path.read_text(errors="replace")[mark:]
    # django-q2's own records (the sentinel's saves, the pusher's pulls) never say it; the
    # recovery thread may log its one traceback of the outage (psycopg reports a session
    # the server ended while it idled as "the connection is closed") and goes on.
    django_q = [line for line in after.splitlines() if " django-q " in line]
    assert not [line for line in django_q if "the connection is closed" in line], after[-3000:]
    assert "Failed to pull task from broker" not in after, after[-3000:]
