"""The run page live in Chromium: statuses change as the engine commits, without a reload,
and after the server drops the socket (the web process is killed and restarted) the page
shows the events missed in between, none twice. WebSockets need an ASGI server, so these
tests run a real daphne (ballast.asgi) on the test database instead of the live server."""
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
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.engine import api as engine
from runs.engine import events as run_events
from runs.models import Run, RunEventKind
from tests.api.conftest import approval_spec
from tests.e2e.conftest import screenshot, sign_in
from tests.support.cluster import test_database_url
from tests.support.specs import publish, run_local

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
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
        env = {**os.environ, "DATABASE_URL": test_database_url(), "BALLAST_DEBUG": "1", "BALLAST_LOG_LEVEL": "WARNING",
               "BALLAST_LIVE_POLL_SECONDS": "0.2"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "ballast.asgi:application"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                sock.settimeout(0.2)
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            assert self.proc.poll() is None, "daphne exited"
            time.sleep(0.1)
        raise AssertionError("daphne did not start")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def daphne(transactional_db: None) -> Iterator[Daphne]:
    server = Daphne(free_port()).start()
    yield server
    server.kill()


def waiting_run() -> Run:
    return run_local(publish(approval_spec()), {"name": "Ada"})


def approve_and_drive(run: Run) -> None:
    with engine.local_mode() as queue:
        approval_decide(approval_id=ApprovalRequest.objects.get(run=run, status="pending").pk, decision="approve", actor="tester")
        engine.drive_local(run.pk, queue=queue, timeout=30)


def shown_seqs(page: Page) -> list[int]:
    return [int(v) for v in page.locator("table[aria-label='Run events'] tbody tr").evaluate_all("rows => rows.map(r => r.dataset.seq)")]


def admin_page(page: Page, daphne: Daphne) -> None:
    get_user_model().objects.create_superuser("ada", "ada@localhost", "pw-ada-live-1")
    sign_in(page, daphne.url, "ada", "pw-ada-live-1")


def test_run_page_shows_nodes_change_status_live_without_reload(daphne: Daphne, page: Page) -> None:
    run = waiting_run()
    admin_page(page, daphne)
    page.goto(f"{daphne.url}/runs/{run.pk}/")
    heading = page.get_by_role("heading", name=f"Run #{run.pk}")
    expect(heading).to_contain_text("waiting at approval")
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()
    expect(page.locator("table[aria-label='Run events'] tbody tr")).to_have_count(run.read_event_seq())
    page.evaluate("window.__notReloaded = true")
    screenshot(page, "run-live-waiting")

    approve_and_drive(run)
    run.refresh_from_db()
    assert run.status == "succeeded"
    expect(heading).to_contain_text("succeeded")
    expect(page.locator("td[data-node='send']")).to_contain_text("succeeded")
    expect(page.locator("td[data-node='end']")).to_contain_text("succeeded")
    expect(page.locator("table[aria-label='Run events'] tbody tr")).to_have_count(run.read_event_seq())
    assert shown_seqs(page) == list(range(1, run.read_event_seq() + 1))
    assert page.evaluate("window.__notReloaded") is True  # the same page, never reloaded
    screenshot(page, "run-live-succeeded")


def test_server_drops_the_socket_and_the_page_shows_missed_events_none_twice(daphne: Daphne, page: Page) -> None:
    run = waiting_run()
    admin_page(page, daphne)
    page.goto(f"{daphne.url}/runs/{run.pk}/")
    expect(page.locator("table[aria-label='Run events'] tbody tr")).to_have_count(run.read_event_seq())
    page.evaluate("window.__notReloaded = true")

    daphne.kill()  # the server drops the socket: the web process is gone
    expect(page.get_by_role("status").filter(has_text="Reconnecting")).to_be_visible()
    for i in range(3):  # events commit while no web process serves the page
        run_events.create(run_id=run.pk, kind=RunEventKind.STEP_REQUEUED, data={"by": f"while down {i}"})
    approve_and_drive(run)
    run.refresh_from_db()
    daphne.start()  # a new web process, on the same port

    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible(timeout=30_000)
    expect(page.locator("table[aria-label='Run events'] tbody tr")).to_have_count(run.read_event_seq(), timeout=20_000)
    expect(page.get_by_role("heading", name=f"Run #{run.pk}")).to_contain_text("succeeded")
    time.sleep(1.0)  # a late duplicate would show by now
    assert shown_seqs(page) == list(range(1, run.read_event_seq() + 1))
    assert page.get_by_text("by while down 1").count() == 1
    assert page.evaluate("window.__notReloaded") is True
    screenshot(page, "run-live-after-reconnect")
