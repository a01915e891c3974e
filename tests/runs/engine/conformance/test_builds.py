"""Store conformance for builds: every attempt records the build of the process that opened it, on every path.

An attempt is opened by a claim (portable, or PostgreSQL's one-statement claim), by a
sequential commit that keeps its successor, and by a fan-out's commit that keeps one
branch or picks a due sibling: each of those writes ``runs_stepattempt.build``
(core.build), and the paths must agree.
"""
from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import version

import pytest

from core.build import build
from runs.models import RunStatus, StepAttempt
from tests.support import engine
from tests.support.conformance import started
from tests.support.specs import chain, edge, graph, node, transform

pytestmark = pytest.mark.django_db(transaction=True)

RELEASE = "release-2026.12.06-obs"


@pytest.fixture
def release(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """BALLAST_BUILD set for this process (the cached build read again), then forgotten."""
    monkeypatch.setenv("BALLAST_BUILD", RELEASE)
    build.cache_clear()
    yield RELEASE
    build.cache_clear()


def drive(spec: dict) -> int:
    run, start_id = started(spec)
    with engine.local_mode() as queue:
        queue.append(start_id)
        assert engine.drive_local(run.pk, queue=queue, timeout=30) == RunStatus.SUCCEEDED
    return run.pk


def test_a_sequential_runs_attempts_record_the_build(store_path, release):
    spec = graph(
        [node("start", "start"), transform("a", i="i + 1"), transform("b", i="i + 1"), node("end", "end", config={"output": ["i"]})],
        chain("start", "a", "b", "end"),
        state={"i": {"default": 0}},
    )
    run_id = drive(spec)
    rows = list(StepAttempt.objects.filter(step__run_id=run_id).values_list("step__node_id", "build"))
    assert sorted(n for n, _ in rows) == ["a", "b", "end", "start"]
    assert {b for _, b in rows} == {release}


def test_a_fan_outs_attempts_record_the_build(store_path, release):
    ids = ["b1", "b2", "b3"]
    spec = graph(
        [node("start", "start"), *[transform(i, hits="1") for i in ids], node("join", "join"), node("end", "end", config={"output": ["hits"]})],
        [edge("start", i) for i in ids] + [edge(i, "join") for i in ids] + [edge("join", "end")],
        state={"hits": {"reducer": "add", "default": 0}},
    )
    run_id = drive(spec)
    rows = list(StepAttempt.objects.filter(step__run_id=run_id).values_list("step__node_id", "build"))
    assert sorted(n for n, _ in rows) == ["b1", "b2", "b3", "end", "join", "start"]
    assert {b for _, b in rows} == {release}


def test_without_ballast_build_the_build_is_the_package_version_and_revision(store_path, monkeypatch):
    monkeypatch.delenv("BALLAST_BUILD", raising=False)
    build.cache_clear()
    try:
        expected = build()
        run_id = drive(graph([node("start", "start"), node("end", "end")], chain("start", "end")))
    finally:
        build.cache_clear()
    assert expected.startswith(version("ballast"))
    assert set(StepAttempt.objects.filter(step__run_id=run_id).values_list("build", flat=True)) == {expected}
