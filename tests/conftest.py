"""Shared fixtures: test tools registered, a side-effect log per test."""
from __future__ import annotations

import pytest

import tests.support.tools  # noqa: F401  (registers the test tools in this process)


@pytest.fixture
def effects_file(tmp_path, monkeypatch):
    """A fresh side-effect log for tools that record what they executed."""
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv("BALLAST_EFFECTS_FILE", str(path))
    return path
