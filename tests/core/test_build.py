"""core.build: BALLAST_BUILD first, else the package version with the git revision of a checkout (and .dirty), else the version alone."""
from __future__ import annotations

import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from core import build as build_module
from core.build import MAX_LENGTH, build, git_revision

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(autouse=True)
def fresh_build():
    build.cache_clear()
    yield
    build.cache_clear()


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_ballast_build_is_taken_as_given_and_cut_to_the_column(monkeypatch):
    monkeypatch.setenv("BALLAST_BUILD", " image-7f3a ")
    assert build() == "image-7f3a"
    build.cache_clear()
    monkeypatch.setenv("BALLAST_BUILD", "x" * 300)
    assert build() == "x" * MAX_LENGTH


def test_a_blank_ballast_build_counts_as_unset(monkeypatch):
    monkeypatch.setenv("BALLAST_BUILD", "  ")
    assert build().startswith(version("ballast"))


def test_the_build_is_read_once_per_process(monkeypatch):
    monkeypatch.setenv("BALLAST_BUILD", "first")
    assert build() == "first"
    monkeypatch.setenv("BALLAST_BUILD", "second")
    assert build() == "first"


def test_without_a_checkout_the_build_is_the_package_version(monkeypatch, tmp_path):
    monkeypatch.delenv("BALLAST_BUILD", raising=False)
    monkeypatch.setattr(build_module, "_ROOT", tmp_path)  # an installed tree: no .git beside it
    assert git_revision(tmp_path) == ""
    assert build() == version("ballast")


@needs_git
def test_a_checkouts_revision_and_its_dirty_mark(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git(tmp_path, "add", "a.txt")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "one")
    head = git(tmp_path, "rev-parse", "HEAD")
    assert git_revision(tmp_path) == head[:12]
    (tmp_path / "untracked.txt").write_text("not counted\n")
    assert git_revision(tmp_path) == head[:12]
    (tmp_path / "a.txt").write_text("two\n")
    assert git_revision(tmp_path) == head[:12] + ".dirty"
