"""Browser test helpers: screenshots into artifacts/, signing in, users, Playwright's patience, and waits on the page's own state (motion stopped, a socket's first message) instead of fixed pauses."""
from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page

from accounts.authentication import ROLES
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from runs.engine import api as engine
from runs.models import Run
from tests.support.bounded import TIME_SLACK
from tests.support.daphne import Daphne

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page PNG as artifacts/<name>.png and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def sign_in(page: Page, base_url: str, username: str, password: str) -> None:
    """Sign in through the app's own login page and wait for the home page."""
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base_url}/")


def make_user(username: str, *groups: str, staff: bool = False) -> User:
    """User ``username`` (password ``pw-<username>-1``) in ``groups``, made once."""
    user = User.objects.filter(username=username).first() or User.objects.create_user(username, password=f"pw-{username}-1")
    user.set_password(f"pw-{username}-1")
    user.is_staff = user.is_superuser = staff
    user.save()
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    user.groups.set(Group.objects.filter(name__in=groups))
    return user


def login(page, live_server, user: User) -> None:
    """Sign ``user`` in on the live server (password as :func:`make_user` sets it)."""
    sign_in(page, live_server.url, user.username, f"pw-{user.username}-1")


def admin_page(page: Page, daphne: Daphne) -> None:
    """Make superuser 'ada' and sign ``page`` in on ``daphne``."""
    get_user_model().objects.create_superuser("ada", "ada@localhost", "pw-ada-live-1")
    sign_in(page, daphne.url, "ada", "pw-ada-live-1")


def approve_and_drive(run: Run) -> None:
    """Approve ``run``'s pending approval and run its remaining steps here (local mode)."""
    with engine.local_mode() as queue:
        approval_decide(approval_id=ApprovalRequest.objects.get(run=run, status="pending").pk, decision="approve", actor="tester")
        engine.drive_local(run.pk, queue=queue, timeout=30)


def format_usd(value: Decimal) -> str:
    """The front end's formatUsd (frontend/src/shell/format.ts): $0; two decimals from $1;
    below, four significant digits with trailing zeros dropped, in plain notation (as
    JavaScript prints numbers from 1e-7 up)."""
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:.2f}"
    rounded = value.quantize(Decimal(1).scaleb(value.adjusted() - 3))
    return "$" + format(rounded.normalize(), "f")


# The ceiling of every browser-test wait, expect() included (tests/e2e/conftest.py sets
# it): the machine running these is shared and often loaded, and Playwright's 5 s default
# for expect() failed here with nothing wrong. Each wait ends as soon as its condition holds.
# It grows with the suite's TIME_SLACK (60 s at the default 4): a CI whose PostgreSQL lane
# ran 25 minutes beside the browser pass took more than 30 s to start a qcluster and run a
# draft (stop 37's CI failed on test_builder_draft_run there, and passed on the rerun pass).
PATIENT_MS = int(15_000 * max(TIME_SLACK, 2.0))


def approver(username: str) -> User:
    """A member of the approvers group with password ``pw-<username>-1``."""
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    user = User.objects.create_user(username, password=f"pw-{username}-1", email=f"{username}@example.com")
    user.groups.add(Group.objects.get(name="approvers"))
    return user


# Polls of the page for wait_until_still: often enough to see every frame of an animation.
_STILL_POLL_MS = 16
_STILL_JS = """([selector, measure, quiet, key]) => {
  const el = document.querySelector(selector);
  let value = null;
  if (el) {
    if (measure === "box") {
      const r = el.getBoundingClientRect();
      value = [r.x, r.y, r.width, r.height].join(",");
    } else if (measure === "pixels") {
      value = el.toDataURL();
    } else {
      value = el.getAttribute(measure);
    }
  }
  const store = (window.__ballastStill ??= {});
  const now = performance.now();
  const seen = store[key];
  if (!seen || seen.value !== value) {
    store[key] = { value, since: now };
    return false;
  }
  return el !== null && now - seen.since >= quiet;
}"""


def wait_until_still(page: Page, selector: str, *, measure: str = "box", quiet_ms: int = 100, timeout_ms: int = 10_000) -> None:
    """Wait until the first element matching ``selector`` exists and its ``measure`` has
    not changed for ``quiet_ms`` milliseconds of the page's clock: ``"box"`` (its bounding
    box), ``"pixels"`` (a canvas's drawing) or an attribute name (say ``"style"``, where
    React Flow keeps its pan and zoom). For animations (fit view, auto-layout, a drop, a
    chart drawing): it ends when the motion has stopped, and fails after ``timeout_ms``
    if it never does."""
    page.wait_for_function(_STILL_JS, arg=[selector, measure, quiet_ms, uuid.uuid4().hex], polling=_STILL_POLL_MS, timeout=timeout_ms)


def next_paint(page: Page) -> None:
    """Return once the page has painted twice more: state set by a handler that already
    ran (a socket message, a response) has been rendered by then."""
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(null))))")


# Counts the messages each WebSocket of the page received, by path (window.__socketFrames),
# for waits on a socket's first message. Playwright adds it to every document it loads.
COUNT_SOCKET_FRAMES = """(() => {
  const Native = window.WebSocket;
  window.__socketFrames = {};
  window.WebSocket = class extends Native {
    constructor(url, protocols) {
      super(url, protocols);
      const path = new URL(url, window.location.href).pathname;
      this.addEventListener("message", () => { window.__socketFrames[path] = (window.__socketFrames[path] || 0) + 1; });
    }
  };
})();"""


def wait_for_socket_message(page: Page, path: str, *, timeout_ms: int = 20_000) -> None:
    """Wait until a WebSocket of the page at ``path`` (say ``/ws/approvals/``) has received
    a message, then for it to be rendered; the page must have been loaded after
    ``page.add_init_script(COUNT_SOCKET_FRAMES)``."""
    page.wait_for_function("(path) => (window.__socketFrames || {})[path] > 0", arg=path, timeout=timeout_ms)
    next_paint(page)
