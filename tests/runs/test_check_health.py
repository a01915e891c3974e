"""``manage.py check_health``: exit 0 while this host's worker clusters are alive (fresh heartbeats, a live process, the host heartbeat on PostgreSQL), 1 with a one-line reason otherwise."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, connections

from runs.engine.store import clock
from runs.models import HostHeartbeat, Worker
from tests.support import engine as engine_api
from tests.support.cluster import test_database_url
from tests.support.commands import call_manage

HOST = engine_api.HOST
ON_POSTGRESQL = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="host heartbeats are written on PostgreSQL only")


def _this_process_cluster(*, beat_age: float = 0.0) -> Worker:
    """A Worker row for this test process, as qcluster's supervisor writes it."""
    now = clock.now()
    return Worker.objects.create(name=engine_api.current_worker(), host=HOST, pid=os.getpid(), started_at=now,
                                 heartbeat_at=now - timedelta(seconds=beat_age))


def _host_beat(*, age: float = 0.0, host: str = HOST) -> None:
    now = clock.now()
    HostHeartbeat.objects.update_or_create(host=host, defaults={"beat_at": now - timedelta(seconds=age), "up_since": now - timedelta(minutes=1)})


@pytest.mark.django_db
def test_alive_when_a_cluster_of_this_host_beats() -> None:
    _this_process_cluster()
    _host_beat()
    done = call_manage("check_health")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.strip() == f"ok: 1 worker cluster(s) alive on {HOST}"
    detail = json.loads(call_manage("check_health", "--json").stdout)
    assert (detail["host"], detail["alive"], detail["clusters_alive"], detail["reason"]) == (HOST, True, 1, "")
    assert detail["host_heartbeats"] == (connection.vendor == "postgresql")


@pytest.mark.django_db
def test_dead_without_any_cluster_on_this_host() -> None:
    # A cluster on another host does not make this one alive.
    now = clock.now()
    Worker.objects.create(name="elsewhere:1:1", host="elsewhere", pid=1, started_at=now, heartbeat_at=now)
    done = call_manage("check_health")
    assert done.returncode == 1
    assert done.stderr.strip() == f"no worker cluster is registered on host {HOST}"
    assert call_manage("check_health", "--host", "elsewhere").returncode == (1 if connection.vendor == "postgresql" else 0)


@pytest.mark.django_db
def test_dead_when_the_clusters_heartbeat_is_stale() -> None:
    _this_process_cluster(beat_age=10 * engine_api.heartbeat_window())
    _host_beat()
    done = call_manage("check_health", "--json")
    assert done.returncode == 1
    assert done.stderr.strip().startswith(f"no worker cluster of host {HOST} sent a heartbeat in the last")
    assert len(done.stderr.strip().splitlines()) == 1
    detail = json.loads(done.stdout)
    assert (detail["alive"], detail["clusters"], detail["clusters_alive"]) == (False, 1, 0)
    assert detail["cluster_heartbeat_age_seconds"] >= 9 * engine_api.heartbeat_window()


@pytest.mark.django_db
def test_dead_when_the_registered_process_is_gone() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # exited and reaped: its pid names no process
    now = clock.now()
    Worker.objects.create(name=f"{HOST}:{gone.pid}:1", host=HOST, pid=gone.pid, started_at=now, heartbeat_at=now)
    _host_beat()
    done = call_manage("check_health")
    assert done.returncode == 1
    assert done.stderr.strip() == f"the worker cluster of host {HOST} (pid {gone.pid}) is registered but its process is gone"


@ON_POSTGRESQL
@pytest.mark.django_db
def test_dead_when_the_host_heartbeat_is_stale_or_missing() -> None:
    _this_process_cluster()
    done = call_manage("check_health")
    assert (done.returncode, done.stderr.strip()) == (1, f"host {HOST} has no host heartbeat")
    _host_beat(age=settings.BALLAST_HOST_SILENT_SECONDS + 5)
    done = call_manage("check_health")
    assert done.returncode == 1
    assert done.stderr.strip().startswith(f"host {HOST}'s heartbeat is ")
    _host_beat()
    assert call_manage("check_health").returncode == 0


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_manage_py_check_health_exit_codes() -> None:
    # The command as a container's liveness probe runs it: a fresh process on the same database.
    env = {**os.environ, "DATABASE_URL": test_database_url()}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "manage.py", "check_health"], cwd=settings.BASE_DIR, env=env,
                              capture_output=True, text=True, timeout=120)

    dead = run()
    assert (dead.returncode, dead.stderr.strip()) == (1, f"no worker cluster is registered on host {HOST}")
    cluster = _this_process_cluster()  # this test's process stands for the cluster: it exists
    # ...and beats as a cluster's supervisor and host-beat thread do, while the probe
    # starts (a fresh interpreter on a loaded machine takes longer than the window).
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.is_set():
                Worker.objects.filter(pk=cluster.pk).update(heartbeat_at=clock.now())
                _host_beat()
                stop.wait(0.5)
        finally:
            connections.close_all()

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    try:
        alive = run()
    finally:
        stop.set()
        beater.join()
    assert alive.returncode == 0, alive.stderr
