"""Browser test helpers: screenshots into artifacts/, signing in, users, and Playwright's patience."""
from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from accounts.authentication import ROLES

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


# How long an expectation waits: the machine running these is shared and often loaded
# (Playwright's 5 s default failed here on PostgreSQL with nothing wrong). Each wait ends
# as soon as its condition holds.
PATIENT_MS = 20_000


@pytest.fixture(autouse=True)
def _patient_expect() -> Iterator[None]:
    """Playwright's ``expect`` waits up to PATIENT_MS in the tests that use this (autouse) fixture."""
    expect.set_options(timeout=PATIENT_MS)
    yield
    expect.set_options(timeout=5_000)  # Playwright's default, for the other modules


def approver(username: str) -> User:
    """A member of the approvers group with password ``pw-<username>-1``."""
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    user = User.objects.create_user(username, password=f"pw-{username}-1", email=f"{username}@example.com")
    user.groups.add(Group.objects.get(name="approvers"))
    return user
