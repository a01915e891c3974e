"""Lease-owner liveness on this host (runs/engine/workers.py, psutil), the basis of fast takeover.

A SIGKILLed worker stays in the process table as a zombie until its parent (or, for an
orphan, the init process) reaps it. A zombie has exited: it holds no lease and runs no
code, so it counts as dead. An owner whose liveness cannot be determined (no permission,
no process table) counts as alive: recovery must never take a live worker's lease.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from runs.engine import workers
from tests.support.bounded import wait_until
from tests.support.leases import dead_owner


def test_live_and_reaped_processes():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        owner = workers.worker_id(proc.pid)
        assert not workers.owner_is_dead(owner)
        assert not workers.owner_is_dead(workers.current_worker())
        assert workers.owner_is_dead(owner.rsplit(":", 1)[0] + ":1")  # pid reused: other start time
        assert not workers.owner_is_dead(f"otherhost:{proc.pid}:1")  # other hosts: leases expire instead
        assert not workers.owner_is_dead("not an owner")
    finally:
        proc.kill()
        proc.wait()
    assert workers.owner_is_dead(owner)


def test_killed_but_unreaped_owner_counts_as_dead():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        owner = workers.worker_id(proc.pid)
        proc.send_signal(signal.SIGKILL)
        # Killed; we do not wait() for it, so it stays a zombie.
        wait_until(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE, 5, "the killed child to be a zombie", poll=0.01)
        assert workers.owner_is_dead(owner)
    finally:
        proc.wait()


@pytest.mark.parametrize(
    "failure",
    [psutil.AccessDenied(pid=1), FileNotFoundError("/proc/stat"), PermissionError("/proc")],
    ids=["access-denied", "no-process-table", "permission"],
)
def test_owner_whose_liveness_is_unknown_counts_as_alive(monkeypatch, failure):
    owner = dead_owner()
    assert workers.owner_is_dead(owner)  # the process table says so

    def unknown(pid):
        raise failure

    monkeypatch.setattr(psutil, "Process", unknown)
    assert not workers.owner_is_dead(owner)
    assert not workers.owner_is_dead(workers.current_worker())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/stat is Linux's")
def test_worker_id_keeps_the_proc_start_ticks_form():
    # Worker ids written before liveness went through psutil must still match.
    pid = os.getpid()
    with open(f"/proc/{pid}/stat") as fh:
        data = fh.read()
    ticks = data[data.rfind(")") + 2 :].split()[19]
    assert workers.worker_id(pid) == f"{workers.HOST}:{pid}:{ticks}"


def test_process_group_members():
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert workers.process_group_members(proc.pid) == [proc.pid]
    finally:
        proc.kill()
        proc.wait()
    assert workers.process_group_members(proc.pid) == []
