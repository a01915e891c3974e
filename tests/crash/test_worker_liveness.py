"""Lease-owner liveness on this host (runs/engine/workers.py), the basis of fast takeover.

A SIGKILLed worker stays in the process table as a zombie until its parent (or, for an
orphan, the init process) reaps it. A zombie has exited: it holds no lease, runs no
code, and its /proc/PID/stat still shows the same start time, so a liveness check that
only compares start times keeps treating it as alive until it is reaped.
"""
from __future__ import annotations

import signal
import subprocess
import time

import pytest

from runs.engine import workers

pytestmark = pytest.mark.crash


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        data = fh.read()
    return data[data.rfind(")") + 2 :].split()[0]


def _identity(pid: int) -> str:
    return f"{workers.HOST}:{pid}:{workers._process_start_ticks(pid)}"


def test_live_and_reaped_processes():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        owner = _identity(proc.pid)
        assert not workers.owner_is_dead(owner)
        assert not workers.owner_is_dead(workers.current_worker())
        assert workers.owner_is_dead(owner.rsplit(":", 1)[0] + ":1")  # pid reused: other start time
        assert not workers.owner_is_dead(f"otherhost:{proc.pid}:1")  # other hosts: leases expire instead
    finally:
        proc.kill()
        proc.wait()
    assert workers.owner_is_dead(owner)


def test_killed_but_unreaped_owner_counts_as_dead():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        owner = _identity(proc.pid)
        proc.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _state(proc.pid) != "Z":  # killed; we do not wait() for it, so it stays a zombie
            if time.monotonic() > deadline:
                raise RuntimeError("the killed child never became a zombie")
            time.sleep(0.01)
        assert workers.owner_is_dead(owner)
    finally:
        proc.wait()
