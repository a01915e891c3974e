"""A daphne serving ballast.asgi (and the built front end) on the test database, for browser tests of live pages."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.engine import api as engine
from runs.models import Run
from tests.support.browser import sign_in
from tests.support.cluster import test_database_url

ROOT = Path(__file__).resolve().parents[2]


# Ceilings for processes on a loaded machine (condition-based waits: they end as soon as
# the condition holds).
START_TIMEOUT_S = 90.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Daphne:
    """daphne serving ballast.asgi on the test database, in its own process group."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Daphne:
        env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "BALLAST_DEBUG": "1",
            "BALLAST_LOG_LEVEL": "WARNING",
            "BALLAST_LIVE_POLL_SECONDS": "0.2",
            # With Redis the page must be served by the push path, not the safety poll.
            "BALLAST_LIVE_SAFETY_SECONDS": "120",
            # Runs started from the page are validated here: the test tools must exist.
            "BALLAST_EXTRA_TOOL_MODULES": "tests.support.tools",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "ballast.asgi:application"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                sock.settimeout(0.2)
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            assert self.proc.poll() is None, "daphne exited"
            time.sleep(0.05)
        raise AssertionError(f"daphne did not accept connections within {START_TIMEOUT_S} s")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


@pytest.fixture
def daphne(transactional_db: None) -> Iterator[Daphne]:
    """A daphne on a free port for the test; killed (its process group) at teardown."""
    server = Daphne(free_port()).start()
    yield server
    server.kill()


def admin_page(page: Page, daphne: Daphne) -> None:
    """Make superuser 'ada' and sign ``page`` in on ``daphne``."""
    get_user_model().objects.create_superuser("ada", "ada@localhost", "pw-ada-live-1")
    sign_in(page, daphne.url, "ada", "pw-ada-live-1")


def approve_and_drive(run: Run) -> None:
    """Approve ``run``'s pending approval and run its remaining steps here (local mode)."""
    with engine.local_mode() as queue:
        approval_decide(approval_id=ApprovalRequest.objects.get(run=run, status="pending").pk, decision="approve", actor="tester")
        engine.drive_local(run.pk, queue=queue, timeout=30)
