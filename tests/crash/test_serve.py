"""``manage.py serve`` (what ``make up`` runs) supervises REAL web and worker processes:
a child that dies is restarted with a logged, growing backoff while the other stays up,
and SIGTERM to serve stops both within the grace period."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import psutil
import pytest

from runs.models import Worker
from tests.support import bounded
from tests.support.bounded import assert_took_under, stopwatch
from tests.support.cluster import REPO_ROOT, WAIT_CEILING, test_database_url, wait_until

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int) -> bool:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/node-kinds/", timeout=2)
    except urllib.error.HTTPError:
        return True  # 401/403: the web server answered
    except OSError:
        return False
    return True


def child(serve: subprocess.Popen, name: str) -> psutil.Process | None:
    """serve's live ``runserver`` (web) or ``qcluster`` (worker) child."""
    word = "runserver" if name == "web" else "qcluster"
    for proc in psutil.Process(serve.pid).children():
        try:
            if word in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE:
                return proc
        except psutil.NoSuchProcess:
            continue
    return None


@pytest.fixture
def serve(tmp_path):
    port = free_port()
    log_path = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(
        DATABASE_URL=test_database_url(),
        DJANGO_SETTINGS_MODULE="ballast.settings",
        BALLAST_STOP_GRACE_SECONDS="4",
        BALLAST_RECOVERY_INTERVAL="0.2",
        BALLAST_LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
    )
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}"],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    groups: set[int] = set()
    proc.port, proc.log_path, proc.groups = port, log_path, groups  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        for pid in {proc.pid, *groups}:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)


def log_text(serve) -> str:
    return serve.log_path.read_text(errors="replace")


def test_serve_restarts_a_dead_child_keeps_the_other_up_and_stops_on_sigterm(serve):
    port = serve.port
    wait_until(lambda: answers(port) and child(serve, "worker") is not None and Worker.objects.exists(), WAIT_CEILING, "web and worker to be up")
    web, worker = child(serve, "web"), child(serve, "worker")
    serve.groups.update({web.pid, worker.pid})

    # The worker dies (its whole process group, SIGKILL): restarted after 1 s; the web never stops answering.
    os.killpg(worker.pid, signal.SIGKILL)

    def restarted() -> psutil.Process | None:
        # The web must answer all along: every look checks it.
        assert answers(port), "the web server stopped while the worker was down"
        new = child(serve, "worker")
        return new if new is not None and new.pid != worker.pid else None

    worker2 = bounded.wait_until(restarted, WAIT_CEILING, "the worker's restart", poll=0.1, describe=lambda: log_text(serve))
    serve.groups.add(worker2.pid)
    assert child(serve, "web").pid == web.pid
    assert f"worker (pid {worker.pid}) exited with code -9" in log_text(serve)
    assert "restarting it in 1s" in log_text(serve)
    # serve logs the restart just after it started the new process, which the wait above may
    # have seen first (stop 37's CI read the log in between).
    wait_until(lambda: "worker restarted" in log_text(serve), WAIT_CEILING, "serve to log the worker's restart")
    wait_until(lambda: Worker.objects.filter(pid=worker2.pid).exists(), WAIT_CEILING, "the new worker to register")

    # It dies again at once: the backoff doubles.
    os.killpg(worker2.pid, signal.SIGKILL)
    wait_until(lambda: "restarting it in 2s" in log_text(serve), WAIT_CEILING, "the second, longer backoff")
    wait_until(lambda: getattr(child(serve, "worker"), "pid", worker2.pid) != worker2.pid, WAIT_CEILING, "the worker's second restart")
    worker3 = child(serve, "worker")
    serve.groups.add(worker3.pid)

    # The web server dies: restarted; the worker stays the same process.
    web.kill()
    wait_until(lambda: getattr(child(serve, "web"), "pid", web.pid) != web.pid and answers(port), WAIT_CEILING, "the web server's restart")
    serve.groups.add(child(serve, "web").pid)
    assert child(serve, "worker").pid == worker3.pid
    assert f"web (pid {web.pid}) exited" in log_text(serve)

    # SIGTERM to serve stops both, within the worker's grace period (4 s) and a margin.
    began = stopwatch()
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=WAIT_CEILING) == 0
    took = began.elapsed
    print(f"\n[serve] SIGTERM -> serve exited in {took:.1f} s")
    assert_took_under(took, 4 + 2, f"serve's stop on SIGTERM\n{log_text(serve)}")
    # Neither child overran its stop allowance (serve kills what does, and logs it).
    assert "did not stop within" not in log_text(serve)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in (child_pid for child_pid in serve.groups))
    assert not Worker.objects.filter(pid=worker3.pid).exists()  # the worker deregistered: a graceful stop
