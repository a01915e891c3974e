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

from bench.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.browser import PATIENT_MS  # noqa: E402
from tests.support.daphne import daphne  # noqa: E402, F401  (fixture: daphne serving the built front end)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


# One ceiling for every wait, expect() included (tests.support.browser.PATIENT_MS says why).
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




