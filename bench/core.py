"""Shared machinery of the benchmarks: environment, databases, statistics, result lines.

Every benchmark process works on ONE database, chosen before Django starts (settings read
DATABASE_URL at import): PostgreSQL ``ballast_bench`` on the local server, or the SQLite
file ``var/bench/ballast_bench.sqlite3``. :func:`setup` creates and migrates it.

Each process measures the floor (a single-row INSERT + COMMIT through the same driver on
the same database) once before its case, so every figure carries ``ratio_to_floor``
computed against a floor measured in the same process run: absolute times drift by 20%
within minutes on these machines, ratios hold (TRAPS.md, "What a node commit costs").
"""
from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bench.stats import describe, percentile

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "bench" / "results"
WORK_DIR = REPO / "var" / "bench"

PG_SERVER_URL = os.environ.get("BENCH_PG_URL", "postgres://root@127.0.0.1:5432/postgres")
PG_DB_NAME = os.environ.get("BENCH_PG_DB", "ballast_bench")
SQLITE_FILE = Path(os.environ.get("BENCH_SQLITE_FILE") or WORK_DIR / "ballast_bench.sqlite3")
DATABASES = ("postgres", "sqlite")

# The Django settings of this process and its subprocesses: ballast.settings, or with
# ``--settings tuned`` bench.settings_tuned (the configuration changes proposed in
# docs/performance.md, measured as a what-if).
SETTINGS = {"default": "ballast.settings", "tuned": "bench.settings_tuned"}
_settings_variant = "default"


def use_settings(variant: str) -> None:
    """Choose the settings variant (before :func:`setup`)."""
    global _settings_variant
    if variant not in SETTINGS:
        raise ValueError(f"unknown settings variant {variant!r}")
    _settings_variant = variant


def settings_variant() -> str:
    return _settings_variant


# The queue name the benchmark process enqueues to; clusters that should pick the tasks
# up use the same name (a stand-by cluster uses another one, see cases.recovery).
Q_NAME = "bench"


class CheckFailed(AssertionError):
    """A benchmark's result was wrong: no figure is reported for it."""


def check(condition: Any, message: str) -> None:
    """Raise CheckFailed(message) unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)


# --------------------------------------------------------------------------- environment


def pg_url(dbname: str = PG_DB_NAME) -> str:
    """The PostgreSQL URL of ``dbname`` on the benchmark server."""
    parsed = urlparse(PG_SERVER_URL)
    return parsed._replace(path="/" + dbname).geturl()


def database_url(db: str) -> str:
    """DATABASE_URL for the benchmark database ``db`` (postgres or sqlite)."""
    if db == "postgres":
        return pg_url()
    if db == "sqlite":
        return "sqlite:///" + str(SQLITE_FILE)  # absolute: sqlite:////work/...
    raise ValueError(f"unknown database {db!r} (use postgres or sqlite)")


def child_env(db: str, **extra: str) -> dict[str, str]:
    """Environment for a benchmark subprocess (qcluster, comparator) on database ``db``.

    DEBUG is off (a production setting: DEBUG=True makes Django keep every query in
    memory) and logging is quiet; no fault point is armed unless ``extra`` arms one.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("BALLAST_FAULT")}
    env.update(
        {
            "DATABASE_URL": database_url(db),
            "DJANGO_SETTINGS_MODULE": SETTINGS[_settings_variant],
            "BALLAST_DEBUG": "0",
            "BALLAST_LOG_LEVEL": "WARNING",
            "BALLAST_Q_LOG_LEVEL": "WARNING",
            "BALLAST_Q_NAME": Q_NAME,
            "BALLAST_Q_BROKER": "orm",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def ensure_postgres_database() -> None:
    """Create the benchmark database on the local server if it does not exist."""
    import psycopg

    with psycopg.connect(PG_SERVER_URL, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (PG_DB_NAME,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{PG_DB_NAME}"')


def setup(db: str, *, migrate: bool = True) -> None:
    """Point this process at the benchmark database ``db``, start Django, migrate.

    Must run before anything imports Django settings.
    """
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    if db == "postgres":
        ensure_postgres_database()
    os.environ.update({k: v for k, v in child_env(db).items() if k.startswith(("DATABASE_URL", "DJANGO_", "BALLAST_"))})
    import django

    django.setup()
    import logging

    logging.getLogger("django-q").setLevel(logging.WARNING)  # "Enqueued [bench] 1" per task
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


def reset_tables() -> None:
    """Empty the engine's tables (runs, steps, events, audit, approvals, queue, workers) so
    every case starts from the same table sizes. Published graphs are kept."""
    from django.apps import apps
    from django.db import connection

    models = [m for label in ("approvals", "runs", "audit", "django_q") for m in apps.get_app_config(label).get_models()]
    tables = sorted({m._meta.db_table for m in models})
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE")
            cur.execute("ANALYZE")
    else:
        with connection.constraint_checks_disabled(), connection.cursor() as cur:
            for table in tables:
                cur.execute(f'DELETE FROM "{table}"')
        with connection.cursor() as cur:
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def vendor() -> str:
    from django.db import connection

    return "postgres" if connection.vendor == "postgresql" else connection.vendor


# --------------------------------------------------------------------------- statistics


def summary(samples: list[float]) -> tuple[float, float]:
    """(median, p95) of ``samples``."""
    return statistics.median(samples), percentile(samples, 95)


# --------------------------------------------------------------------------- floor


def measure_floor(*, ops: int = 300, runs: int = 5, warmup: int = 100) -> list[float]:
    """Latency samples (ms) of one single-row INSERT + COMMIT on the benchmark database,
    through the driver Django uses (psycopg 3 / sqlite3), on a connection of its own.

    PostgreSQL: autocommit off, so psycopg sends BEGIN, the INSERT and COMMIT, as Django
    does for a transaction. SQLite: WAL, synchronous=NORMAL, BEGIN IMMEDIATE, as settings
    configure Django's connections.
    """
    from django.db import connection

    sd = connection.settings_dict
    samples: list[float] = []
    if connection.vendor == "postgresql":
        import psycopg

        conn = psycopg.connect(
            host=sd["HOST"] or None, port=sd["PORT"] or None, dbname=sd["NAME"], user=sd["USER"] or None,
            password=sd["PASSWORD"] or None, autocommit=False,
        )
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, v text NOT NULL, at timestamptz NOT NULL DEFAULT now())")
            conn.execute("TRUNCATE bench_floor")
            conn.commit()
            sql = "INSERT INTO bench_floor (v) VALUES (%s)"
            for i in range(warmup + ops * runs):
                t0 = time.perf_counter()
                conn.execute(sql, ("x",))
                conn.commit()
                if i >= warmup:
                    samples.append((time.perf_counter() - t0) * 1000)
        finally:
            conn.close()
    else:
        import sqlite3

        conn = sqlite3.connect(sd["NAME"], isolation_level=None, timeout=20)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT NOT NULL, at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)")
            conn.execute("DELETE FROM bench_floor")
            for i in range(warmup + ops * runs):
                t0 = time.perf_counter()
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO bench_floor (v) VALUES (?)", ("x",))
                conn.execute("COMMIT")
                if i >= warmup:
                    samples.append((time.perf_counter() - t0) * 1000)
        finally:
            conn.close()
    return samples


class FloorProbe:
    """The floor on a connection kept open, sampled on demand (the headline's rounds):
    the same statements as :func:`measure_floor`, in its own table ``bench_floor_probe``.
    :meth:`sample` returns the mean ms per commit of ``ops`` commits (wall time / ops, as
    Ballast's samples are wall time / nodes)."""

    def __init__(self) -> None:
        from django.db import connection

        sd = connection.settings_dict
        self.vendor = connection.vendor
        if self.vendor == "postgresql":
            import psycopg

            self.conn: Any = psycopg.connect(
                host=sd["HOST"] or None, port=sd["PORT"] or None, dbname=sd["NAME"], user=sd["USER"] or None,
                password=sd["PASSWORD"] or None, autocommit=False,
            )
            self.conn.execute("CREATE TABLE IF NOT EXISTS bench_floor_probe (id bigserial PRIMARY KEY, v text NOT NULL, at timestamptz NOT NULL DEFAULT now())")
            self.conn.execute("TRUNCATE bench_floor_probe")
            self.conn.commit()
        else:
            import sqlite3

            self.conn = sqlite3.connect(sd["NAME"], isolation_level=None, timeout=20)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("CREATE TABLE IF NOT EXISTS bench_floor_probe (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT NOT NULL, at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)")
            self.conn.execute("DELETE FROM bench_floor_probe")

    def sample(self, ops: int) -> float:
        t0 = time.perf_counter()
        if self.vendor == "postgresql":
            for _ in range(ops):
                self.conn.execute("INSERT INTO bench_floor_probe (v) VALUES (%s)", ("x",))
                self.conn.commit()
        else:
            for _ in range(ops):
                self.conn.execute("BEGIN IMMEDIATE")
                self.conn.execute("INSERT INTO bench_floor_probe (v) VALUES (?)", ("x",))
                self.conn.execute("COMMIT")
        return (time.perf_counter() - t0) * 1000 / ops

    def close(self) -> None:
        self.conn.close()


# --------------------------------------------------------------------------- reporting


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


class Reporter:
    """Prints one JSON line per figure and appends it to the results file.

    The results file is ``$BENCH_RESULTS_FILE`` when set (``make bench`` puts every
    process's lines in one file), else ``bench/results/<timestamp>.jsonl``.
    """

    def __init__(self, db: str):
        self.db = db
        self.floor_ms: float | None = None
        self.emitted: list[dict[str, Any]] = []  # every line this process wrote
        path = os.environ.get("BENCH_RESULTS_FILE")
        if not path:
            RESULTS_DIR.mkdir(parents=True, exist_ok=True)
            path = str(RESULTS_DIR / f"{_timestamp()}.jsonl")
            os.environ["BENCH_RESULTS_FILE"] = path
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def floor(self, *, emit: bool = False, **kwargs: Any) -> float:
        """Measure the floor now (median ms); emit it as the ``floor`` figure if asked."""
        samples = measure_floor(**kwargs)
        self.floor_ms = statistics.median(samples)
        if emit:
            runs = kwargs.get("runs", 5)
            self.emit("floor", n=len(samples) // runs, runs=runs, samples=samples, unit="ms/commit", per_commit=1,
                      note="single-row INSERT + COMMIT, same driver and database; median/p95 over every commit")
        return self.floor_ms

    def _bracket_floor(self) -> tuple[float | None, float | None]:
        """Re-measure the floor (500 commits) after a timed section; the section's figure is
        compared with the mean of the floors measured just before and just after it, so a
        machine that got busier or quieter in between skews the ratio less."""
        before = self.floor_ms
        if before is None:
            return None, None
        after = statistics.median(measure_floor(ops=100, runs=5, warmup=20))
        self.floor_ms = after
        return before, after

    def emit(
        self,
        case: str,
        *,
        n: int,
        runs: int,
        samples: list[float] | None = None,
        unit: str,
        median: float | None = None,
        p95: float | None = None,
        per_commit: float | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Report one figure. ``per_commit``: how many node commits one sample unit covers
        (1 for ms/node); the ratio to the floor is (median / per_commit) / floor. Figures
        that are not commit times (seconds of recovery, nodes/s) pass None (ratio null) or
        compute their own ratio in ``extra``."""
        spread: dict[str, Any] = {}
        if samples is not None:
            stats = describe(samples)
            median, p95 = stats["median"], stats["p95"]
            spread = {"q1": _round(float(stats["q1"])), "q3": _round(float(stats["q3"])), "iqr": _round(float(stats["iqr"]))}
        floor, bracket = self.floor_ms, None
        if per_commit and case != "floor":
            before, after = self._bracket_floor()
            if before is not None and after is not None:
                floor, bracket = (before + after) / 2, [_round(before), _round(after)]
        ratio = None
        if per_commit and floor and median is not None:
            ratio = (median / per_commit) / floor
        if _settings_variant != "default" and case != "floor":
            case = f"{case}.{_settings_variant}"
            extra = {"settings": SETTINGS[_settings_variant], **extra}
        line: dict[str, Any] = {
            "case": case,
            "database": self.db,
            "n": n,
            "runs": runs,
            "median": _round(median),
            "p95": _round(p95),
            **spread,
            "unit": unit,
            "ratio_to_floor": _round(ratio, 2),
            "floor_ms": _round(floor),
        }
        if bracket:
            line["floor_before_after_ms"] = bracket
        line.update({k: _round(v) if isinstance(v, float) else v for k, v in extra.items()})
        line["load1"] = round(os.getloadavg()[0], 2)  # other work on the machine skews figures
        line["at"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.write(line)
        return line

    def skip(self, case: str, reason: str, **extra: Any) -> dict[str, Any]:
        """Report a case that could not run here (and why), as a line with ``skipped``."""
        line = {"case": case, "database": self.db, "skipped": reason, **extra}
        line["at"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.write(line)
        return line

    def write(self, line: dict[str, Any]) -> None:
        self.emitted.append(line)
        text = json.dumps(line, default=str)
        print(text, flush=True)
        with open(self.path, "a") as fh:
            fh.write(text + "\n")


def _round(value: Any, digits: int = 4) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return round(value, digits)
    return value


def log(message: str) -> None:
    """Progress to stderr (stdout carries only JSON lines)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    try:
        with open("/proc/meminfo") as fh:
            info["mem_total_gib"] = round(int(fh.readline().split()[1]) / 1024 / 1024, 1)
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info
