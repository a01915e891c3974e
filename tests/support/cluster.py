"""Real django-q2 clusters (``manage.py qcluster``) in subprocesses, for crash tests.

Each :class:`Cluster` is started in its own session (so its own process group): the
qcluster main process, its sentinel, monitor, pusher and forked workers all share one
process group id, and :meth:`Cluster.kill` SIGKILLs the whole group at once (killing only
the top process would leave its workers running as orphans, TRAPS.md). The
``cluster_factory`` fixture kills every group it started at teardown, whatever happened
in the test, so no qcluster ever outlives its test.

The subprocess points at the test database the test process uses (derived from
``django.db.connection.settings_dict``), so tests that use it must be
``@pytest.mark.django_db(transaction=True)``: rows commit and are visible across processes.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection

from tests.support import bounded
from tests.support.engine import process_group_members

REPO_ROOT = Path(__file__).resolve().parents[2]

# How long a wait for a cluster (to start, to reach a fault point, to run recovery passes)
# may take before it fails: a ceiling for a loaded 2-core CI machine, not an expected time.
# Every wait polls its condition and returns as soon as it holds.
WAIT_CEILING = 90.0

# Every group started by this process, so even an interpreter exit kills them.
_LIVE_GROUPS: set[int] = set()


_group_members = process_group_members


def _kill_group(pgid: int, *, timeout: float = 30.0) -> None:
    """SIGKILL every process of the group and wait until none is left alive."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while _group_members(pgid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"process group {pgid} still alive after SIGKILL: {_group_members(pgid)}")
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        time.sleep(0.02)
    _LIVE_GROUPS.discard(pgid)


@atexit.register
def _kill_leftovers() -> None:  # pragma: no cover - last line of defence
    for pgid in list(_LIVE_GROUPS):
        try:
            _kill_group(pgid, timeout=5)
        except Exception:
            pass


def test_database_url() -> str:
    """A DATABASE_URL naming the database this test process is connected to (the test DB)."""
    sd = connection.settings_dict
    engine = sd["ENGINE"]
    if engine.endswith("sqlite3"):
        name = str(sd["NAME"])
        if not name or name == ":memory:" or name.startswith("file:"):
            raise RuntimeError("crash tests need a file SQLite test database (TEST.NAME), not :memory:")
        return "sqlite:///" + str(Path(name).resolve())  # sqlite:////abs/path
    if "postgresql" in engine:
        auth = quote(sd.get("USER") or "", safe="")
        if sd.get("PASSWORD"):
            auth += ":" + quote(sd["PASSWORD"], safe="")
        host = sd.get("HOST") or "127.0.0.1"
        port = f":{sd['PORT']}" if sd.get("PORT") else ""
        return f"postgres://{auth + '@' if auth else ''}{host}{port}/{quote(sd['NAME'], safe='')}"
    raise RuntimeError(f"crash tests do not support database engine {engine}")


test_database_url.__test__ = False  # not a test, despite the name


class Cluster:
    """One ``manage.py qcluster`` in its own process group.

    ``start(fault="before_commit:x")`` arms a crash point (runs.engine.faults) for one
    node: the worker that reaches it reports to :attr:`fault_file` and hangs until killed.
    """

    def __init__(
        self,
        name: str,
        *,
        workdir: Path,
        effects_file: Path,
        database_url: str,
        lease_seconds: float = 5,
        recovery_interval: float = 0.2,
        workers: int = 2,
        extra_env: dict[str, str] | None = None,
        hostname: str | None = None,
    ) -> None:
        self.name = name
        # A host name of its own (a UTS namespace, ``unshare --uts``; needs root): the
        # cluster is another worker host to the engine (worker ids, host heartbeats),
        # though it shares this machine's network and database.
        self.hostname = hostname
        self.workdir = Path(workdir)
        self.effects_file = Path(effects_file)
        self.database_url = database_url
        self.lease_seconds = lease_seconds
        self.recovery_interval = recovery_interval
        self.workers = workers
        self.extra_env = dict(extra_env or {})
        self.proc: subprocess.Popen | None = None
        self.pgid: int | None = None
        self.starts = 0
        self.log_path = self.workdir / f"cluster-{name}.log"
        self.fault_file = self.workdir / f"cluster-{name}-fault.jsonl"
        self.fault: str | None = None
        self.killed_at: float | None = None  # time.time() of the last kill()

    # ------------------------------------------------------------------ lifecycle

    def env(self, fault: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BALLAST_FAULT", "PYTEST_"))}
        env.update(
            {
                "DATABASE_URL": self.database_url,
                "DJANGO_SETTINGS_MODULE": "ballast.settings",
                "BALLAST_EXTRA_TOOL_MODULES": "tests.support.tools",
                "BALLAST_EFFECTS_FILE": str(self.effects_file),
                "BALLAST_LEASE_SECONDS": str(self.lease_seconds),
                "BALLAST_RECOVERY_INTERVAL": str(self.recovery_interval),
                "BALLAST_WORKERS": str(self.workers),
                "BALLAST_Q_NAME": "ballast",
                "BALLAST_Q_BROKER": "orm",
                "BALLAST_LOG_LEVEL": "INFO",
                "BALLAST_Q_LOG_LEVEL": "INFO",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if fault:
            env["BALLAST_FAULT"] = fault
            env["BALLAST_FAULT_FILE"] = str(self.fault_file)
        env.update(self.extra_env)
        return env

    def start(self, fault: str | None = None) -> Cluster:
        """Start the qcluster (optionally with a fault armed); returns at once."""
        if self.alive:
            raise RuntimeError(f"cluster {self.name} is already running")
        self.fault = fault
        self.starts += 1
        if self.fault_file.exists():
            self.fault_file.unlink()
        log = open(self.log_path, "ab")
        log.write(f"\n===== start #{self.starts} fault={fault} at {time.strftime('%H:%M:%S')} =====\n".encode())
        log.flush()
        command = [sys.executable, "manage.py", "qcluster"]
        if self.hostname:
            # unshare and sh exec into the qcluster: the Popen pid stays its main pid.
            command = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', self.hostname, *command]
        try:
            self.proc = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=self.env(fault),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        self.pgid = self.proc.pid  # session leader: its pid is the group id
        _LIVE_GROUPS.add(self.pgid)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def kill(self) -> None:
        """SIGKILL the whole process group (main process, sentinel, workers) and wait."""
        if self.pgid is None:
            return
        self.killed_at = time.time()
        _kill_group(self.pgid)
        if self.proc is not None:
            self.proc.wait(timeout=30)
        self.pgid = None

    def stop(self, grace: float = 10.0, *, whole_group: bool = False) -> float:
        """Graceful stop: SIGTERM, then SIGKILL to the whole group after ``grace`` seconds.

        By default SIGTERM goes to the qcluster main process only; ``whole_group=True``
        sends it to every process (what ``kill -TERM -PGID`` or systemd does). Ballast's
        qcluster stops within BALLAST_STOP_GRACE_SECONDS either way (runs/engine/cluster.py).
        Returns the seconds until the group was gone.
        """
        if self.pgid is None:
            return 0.0
        began = time.monotonic()
        try:
            if whole_group:
                os.killpg(self.pgid, signal.SIGTERM)
            else:
                os.kill(self.pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while _group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        _kill_group(self.pgid)
        if self.proc is not None:
            self.proc.wait(timeout=30)
        self.pgid = None
        return time.monotonic() - began

    # ------------------------------------------------------------------ waiting

    def wait_ready(self, timeout: float = WAIT_CEILING, *, busy_pids: Iterable[int] = ()) -> None:
        """Wait until this cluster's supervisor registered its Worker row (it is up and
        has run its start-up recovery pass) and each worker process finished its claim at
        start. ``busy_pids``: worker processes known to hold a step (a held tool) that
        their claim at start may have taken; they are not waited for."""
        from runs.models import Worker

        def ready() -> bool:
            return Worker.objects.filter(pid=self.pid).exists()

        wait_until(ready, timeout, f"cluster {self.name} to register its worker row", clusters=[self])
        # Its workers claim the due steps as they start (runs.engine.cluster._claim_at_start),
        # which under load can be after the row exists: wait for each one's line, so that
        # from here on the cluster runs only what its queue's doorbells bring.
        from runs.engine.cluster import WORKER_READY

        busy = set(busy_pids)

        def workers_started() -> bool:
            if self.fault_file.exists() and self.fault_file.read_text().strip():
                return True  # a worker hangs at the armed fault, maybe in its claim at start
            text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
            ready = {int(m) for m in re.findall(rf"{WORKER_READY}: worker [^:\s]+:(\d+):", text.rsplit("===== start #", 1)[-1])}
            return len(ready - busy) >= self.workers - len(busy)

        wait_until(workers_started, timeout, f"cluster {self.name}'s {self.workers} worker(s) to start", clusters=[self])

    def wait_recovery_passes(self, passes: int = 3, timeout: float = WAIT_CEILING) -> None:
        """Wait until this cluster's supervisor completed ``passes`` more recovery passes.

        Each pass refreshes the Worker row's heartbeat and then recovers, so a heartbeat
        that moved ``passes + 1`` times since the call began means ``passes`` whole passes
        ran in between: the condition a test needs before asserting recovery left
        something alone (no sleep that guesses how long that takes)."""
        from runs.models import Worker

        def beat() -> Any:
            return Worker.objects.filter(pid=self.pid).values_list("heartbeat_at", flat=True).first()

        seen = {"last": beat(), "moves": 0}

        def moved_enough() -> bool:
            now = beat()
            if now is not None and now != seen["last"]:
                seen["last"], seen["moves"] = now, seen["moves"] + 1
            return seen["moves"] > passes

        wait_until(moved_enough, timeout, f"cluster {self.name} to run {passes} recovery passes", clusters=[self], poll=0.02)

    def wait_for_fault(self, timeout: float = WAIT_CEILING) -> dict[str, Any]:
        """Wait until a worker of this cluster reported hitting the armed fault point."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.fault_file.exists():
                lines = [line for line in self.fault_file.read_text().splitlines() if line.strip()]
                if lines:
                    return json.loads(lines[0])
            if not self.alive:
                raise AssertionError(f"cluster {self.name} exited (rc={self.proc.returncode}) before the fault\n{self.log_tail()}")
            time.sleep(0.02)
        raise AssertionError(f"cluster {self.name}: fault {self.fault!r} not reached in {timeout}s\n{self.log_tail()}\n{describe_db()}")

    def log_tail(self, chars: int = 6000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return f"--- cluster {self.name}: no log ---"
        return f"--- cluster {self.name} log ({self.log_path}) ---\n{text[-chars:]}"


def describe_db(run_id: int | None = None) -> str:
    """Steps, attempts and queue entries, for failure messages."""
    from django_q.models import OrmQ

    from runs.models import Run, Step, StepAttempt, Worker

    runs = Run.objects.all() if run_id is None else Run.objects.filter(pk=run_id)
    lines = []
    for run in runs.order_by("id"):
        lines.append(f"run {run.pk}: {run.status} error={run.error}")
        for step in Step.objects.filter(run=run).order_by("id"):
            attempts = list(StepAttempt.objects.filter(step=step).order_by("number").values_list("number", "status", "worker"))
            lines.append(
                f"  step {step.pk} {step.node_id}#{step.iteration} {step.status} attempt={step.attempt} "
                f"owner={step.lease_owner!r} expires={step.lease_expires_at} dispatched={step.dispatched_at} attempts={attempts}"
            )
    lines.append(f"workers: {list(Worker.objects.values_list('name', 'heartbeat_at'))}")
    lines.append(f"queue: {list(OrmQ.objects.values_list('id', 'lock'))}")
    return "\n".join(lines)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, *, clusters: list[Cluster] = (), run_id: int | None = None, poll: float = 0.05) -> None:
    """Poll ``predicate`` until true; on timeout fail with the clusters' logs and the DB (bounded.wait_until)."""
    bounded.wait_until(predicate, timeout, what, poll=poll, describe=lambda: describe_db(run_id) + "\n" + "\n".join(c.log_tail() for c in clusters))


def wait_for_status(run: Any, statuses: str | tuple[str, ...], *, timeout: float = 30.0, clusters: list[Cluster] = ()) -> Any:
    """Poll the run until its status is one of ``statuses``; returns the refreshed run.

    On timeout, fails with the run's steps and the clusters' logs for diagnosis.
    """
    from runs.models import Run

    wanted = (statuses,) if isinstance(statuses, str) else tuple(statuses)
    pk = run.pk if hasattr(run, "pk") else int(run)
    wait_until(
        lambda: Run.objects.filter(pk=pk, status__in=wanted).exists(),
        timeout,
        f"run {pk} to be {'/'.join(wanted)}",
        clusters=clusters,
        run_id=pk,
    )
    return Run.objects.get(pk=pk)


@pytest.fixture
def cluster_factory(tmp_path, effects_file) -> Iterator[Callable[..., Cluster]]:
    """Make :class:`Cluster` objects on the current test database; kills them all at teardown.

    Needs ``@pytest.mark.django_db(transaction=True)`` on the test.
    """
    made: list[Cluster] = []
    url = test_database_url()

    def make(name: str = "a", **kwargs: Any) -> Cluster:
        cluster = Cluster(name, workdir=tmp_path, effects_file=effects_file, database_url=url, **kwargs)
        made.append(cluster)
        return cluster

    try:
        yield make
    finally:
        errors = []
        for cluster in made:
            try:
                cluster.kill()
            except Exception as exc:  # keep killing the others
                errors.append(exc)
        if errors:
            raise errors[0]
