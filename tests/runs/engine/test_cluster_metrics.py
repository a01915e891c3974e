"""A worker host serves its own metrics: a real qcluster with BALLAST_METRICS_PORT answers /metrics from its main process with what its worker processes counted (multiprocess mode), its slots, and no database gauge; its start drops a previous start's files."""
from __future__ import annotations

import subprocess

import httpx
import pytest

from runs.services import run_start
from tests.support.cluster import wait_for_status, wait_until
from tests.support.metrics import parse, sample_value
from tests.support.redis_server import free_port
from tests.support.specs import chain, effect, graph, node, publish

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_a_worker_host_serves_what_its_processes_counted(cluster_factory, tmp_path) -> None:
    directory = tmp_path / "metrics"
    directory.mkdir()
    dead_pid = subprocess.Popen(["true"])
    dead_pid.wait()
    dead_file = directory / f"counter_{dead_pid.pid}.db"
    dead_file.write_bytes(b"left by an earlier start")
    port = free_port()
    cluster = cluster_factory(
        "m", workers=2,
        extra_env={
            "PROMETHEUS_MULTIPROC_DIR": str(directory), "BALLAST_METRICS_PORT": str(port), "BALLAST_METRICS_ADDRESS": "127.0.0.1",
            "BALLAST_WORKER_STEP_THREADS": "3",
        },
    ).start()
    cluster.wait_ready()
    assert not dead_file.exists()  # cleaned at start (a dead process's counts are not this start's)
    run = run_start(version=publish(graph([node("start", "start"), effect("a"), effect("b"), node("end", "end")], chain("start", "a", "b", "end"))), run_input={})
    wait_for_status(run, "succeeded", timeout=90, clusters=[cluster])

    def scrape() -> list:
        return parse(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)

    # The counts are recorded just after each commit: wait for the last one.
    wait_until(lambda: sample_value(scrape(), "ballast_steps_committed_total", kind="tool") >= 2, 60, "the commits counted", clusters=[cluster])
    families = scrape()
    assert sample_value(families, "ballast_worker_slots") == 2 * 3  # worker processes x step threads
    assert sample_value(families, "ballast_steps_started_total") == sample_value(families, "ballast_step_commit_seconds_count")
    assert sample_value(families, "ballast_step_claim_seconds_count", result="claimed") >= 1
    assert not [f for f in families if f.name in {"ballast_runs", "ballast_queue_depth"}]  # the database's gauges are the web's
    pids = {name.stem.rsplit("_", 1)[1] for name in directory.glob("*.db")}
    assert str(cluster.pid) in pids and len(pids) >= 2  # the main process (slots) and a worker (steps)
    cluster.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
