"""Smoke run of the web-under-load benchmark (bench/webload.py) at a tiny size, so it cannot
rot: ``python -m bench web`` seeds its runs, serves them from daphne, loads each page with
locust from a process of its own, opens WebSockets that must each get their run's backlog,
stay open and be told of a commit, checks its own results and emits its figures."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.bench_run import bench_database, run_bench
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.process


def test_web_case_loads_every_page_and_keeps_its_sockets_open(tmp_path: Path, private_redis: RedisServer) -> None:
    with bench_database(tmp_path) as (db, env):
        env["BENCH_WEB_REDIS_URL"] = private_redis.url(7)
        figures = run_bench(["web", "--db", db, "--n", "30", "--users", "1,2", "--seconds", "3", "--sockets", "8"], env)
    for page in ("run_list", "inbox", "run_page"):
        for users in (1, 2):
            line = figures[f"web.{page}.{users}_users"]
            assert line["failures"] == 0 and line["requests"] > 0 and line["rps"] > 0, line
            assert line["p95"] >= line["median"] > 0 and line["users"] == users and line["database"] == db
    assert set(figures["web.run_page.1_users"]["endpoints"]) >= {"/api/v1/runs/<id>/", "/api/v1/runs/<id>/graph/", "/api/v1/node-kinds/"}
    sockets = figures["web.sockets"]
    assert sockets["sockets_open_after_hold"] == 8 and sockets["sockets_told"] >= 1 and sockets["n"] >= 1
    assert sockets["rss_after_mib"] > 0 and sockets["median"] > 0
