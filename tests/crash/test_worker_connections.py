"""Database connections of qcluster processes (runs/engine/cluster.py): none crosses
django-q2's forks, and workers keep theirs from one task to the next."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
import pytest
from django.db import connection

from runs.services import run_start
from tests.support.cluster import REPO_ROOT, test_database_url, wait_for_status
from tests.support.specs import chain, graph, node, publish
from tests.support.tools import read_effects

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True)]

RUNS = 5


def _session_graph():
    nodes = [node("start", "start"), node("probe", "tool", config={"tool": "db_session", "args": {}}), node("end", "end")]
    return graph(nodes, chain("start", "probe", "end"))


def _sessions_per_task(cluster_factory, effects_file, **env: str) -> list[tuple[int, int]]:
    """(worker pid, session) of each of RUNS runs, one after the other through a
    one-worker cluster (each run is one task: its steps follow in the same worker; with
    no drain window, since a task still draining when the next run starts would claim
    that run too, on the same connection)."""
    version = publish(_session_graph())
    cluster = cluster_factory("conn", workers=1, extra_env={"BALLAST_DOORBELL_DRAIN_SECONDS": "0", **env}).start()
    cluster.wait_ready()
    for _ in range(RUNS):
        run = run_start(version=version, run_input={})
        wait_for_status(run, "succeeded", clusters=[cluster], timeout=60)
    if connection.vendor == "postgresql":
        _assert_no_shared_sockets(cluster.pid)
    effects = [e for e in read_effects(str(effects_file)) if e["label"] == "session"]
    assert len(effects) == RUNS, effects
    return [(e["pid"], e["session"]) for e in effects]


def _assert_no_shared_sockets(main_pid: int) -> None:
    """No TCP connection to the database server is open in two processes of the cluster
    (a connection inherited across a fork shows as the same local port in both)."""
    port = int(connection.settings_dict.get("PORT") or 5432)
    owners: dict[int, set[int]] = {}
    main = psutil.Process(main_pid)
    for proc in [main, *main.children(recursive=True)]:
        try:
            sockets = proc.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        for sock in sockets:
            if sock.raddr and sock.raddr.port == port:
                owners.setdefault(sock.laddr.port, set()).add(proc.pid)
    shared = {local: pids for local, pids in owners.items() if len(pids) > 1}
    assert owners and not shared, f"database sockets open in more than one process: {shared}"


def test_workers_keep_their_connection_between_tasks(cluster_factory, effects_file):
    seen = _sessions_per_task(cluster_factory, effects_file)
    assert len({pid for pid, _ in seen}) == 1, seen  # one worker ran every task
    assert len({session for _, session in seen}) == 1, seen  # on one connection


def test_max_age_zero_reconnects_per_task(cluster_factory, effects_file):
    # BALLAST_WORKER_CONN_MAX_AGE=0 is Django's default behaviour: django-q2 closes the
    # connection before every task. What the test above would see without the setting.
    seen = _sessions_per_task(cluster_factory, effects_file, BALLAST_WORKER_CONN_MAX_AGE="0")
    assert len({pid for pid, _ in seen}) == 1, seen
    assert len({session for _, session in seen}) == RUNS, seen


_FORK_PROBE = """
import functools, json, multiprocessing, os
import django
django.setup()
from django.db import connection
from runs.engine.store import connections

if os.environ.get("PROBE_HOOK") == "1":  # what cluster.serve registers
    os.register_at_fork(before=functools.partial(connections.close_before_fork, os.getpid()))
connection.ensure_connection()  # open in the forking thread, as a sentinel's may be


def child(queue):
    queue.put(connection.connection is not None)


ctx = multiprocessing.get_context("fork")  # as django-q2 forks
queue = ctx.Queue()
proc = ctx.Process(target=child, args=(queue,))
proc.start()
inherited = queue.get(timeout=30)
proc.join(30)
with connection.cursor() as cursor:  # the parent's own connection still works
    cursor.execute("SELECT 1")
    ok = cursor.fetchone()[0] == 1
print(json.dumps({"inherited": inherited, "parent_ok": ok}))
"""


@pytest.mark.parametrize("hook", [True, False])
def test_no_connection_crosses_the_fork(hook):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(DATABASE_URL=test_database_url(), DJANGO_SETTINGS_MODULE="ballast.settings", PROBE_HOOK="1" if hook else "0")
    out = subprocess.run([sys.executable, "-c", _FORK_PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["parent_ok"]
    # Without the hook the child holds the parent's open connection (one socket, two
    # processes): the hazard the hook removes.
    assert report["inherited"] is (not hook)
