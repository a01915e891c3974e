"""Browser tests: Playwright drives Debian's Chromium (/usr/bin/chromium) against pytest-django's live server.

They run once per `make test`, on SQLite (marker ``browser``); screenshots go to
artifacts/ (git-ignored) so a person can look at every page.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls in fixtures are
# still synchronous and safe here (see TRAPS.md).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
from bench.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


# The ceiling of every wait, expect() included (Playwright's own default for expect is 5 s,
# which failed on this shared, often loaded 2-core machine with nothing wrong). Each wait
# ends as soon as its condition holds, so a ceiling costs nothing when all is well.
PATIENT_MS = 30_000
expect.set_options(timeout=PATIENT_MS)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the session; fails (not skips) when Chromium is missing."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium (make test does)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    ctx.set_default_timeout(PATIENT_MS)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


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
