"""A benchmark case (``python -m bench CASE``) run in a fresh interpreter on a database of its
own, for the smoke tests of tests/bench/: beside the configured test database's vendor, a
SQLite file in a temporary directory or a PostgreSQL database ``<test database>_bench_<xdist worker>``
dropped afterwards; its result lines go to that directory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from django.conf import settings

REPO = Path(__file__).resolve().parents[2]
# A hang guard, not a bound on a figure: a case at a smoke size takes seconds to a minute.
HANG_GUARD_SECONDS = 600


@contextmanager
def bench_database(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """(database, environment) of a benchmark process on a database of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_SETTINGS", "BALLAST_FAULT"))}
    env["BENCH_RESULTS_FILE"] = str(tmp_path / "results.jsonl")
    if "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        env["BENCH_SQLITE_FILE"] = str(tmp_path / "bench.sqlite3")
        yield "sqlite", env
        return
    server = urlparse(os.environ["DATABASE_URL"])
    # One per xdist worker: two bench smoke tests on two workers at once shared one name,
    # and the first to finish dropped the other's database under it (stop 38's CI).
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    name = os.environ.get("BALLAST_PG_TEST_NAME", "test_ballast") + "_bench" + (f"_{worker}" if worker else "")
    env["BENCH_PG_URL"] = server._replace(path="/postgres").geturl()
    env["BENCH_PG_DB"] = name
    try:
        yield "postgres", env
    finally:
        import psycopg

        with psycopg.connect(env["BENCH_PG_URL"], autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_bench(args: list[str], env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Run ``python -m bench ARGS``; it must exit 0 with no failed line. Its figure lines by case name."""
    done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(t) for t in done.stdout.splitlines() if t.startswith("{")]
    assert not [d for d in lines if "failed" in d], lines
    return {d["case"]: d for d in lines}
