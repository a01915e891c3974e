"""The chaos suite's driver: cycles of runs on real worker hosts, one fault at a random moment in each, and the figures per fault kind.

``python -m tests.chaos`` (``make chaos``) runs it; tests/chaos/test_chaos_short.py runs a
short one. One *cycle*: start ``CHAOS_RUNS_PER_FAULT`` runs of a graph of four counted
side effects (two safe to repeat, two not), wait a random moment, inject one fault, wait
until every run of the cycle has ended or is parked for a person (or
``CHAOS_SETTLE_SECONDS`` passed), then undo what the fault left (restart a killed host,
unskew a clock) and count. Fault kinds take turns until ``CHAOS_RUNS`` runs started.

Fault kinds:

- ``sigkill``: one host's whole process tree SIGKILLed; it stays down until the cycle
  settles (the other host must take over: cross-host takeover).
- ``sigterm``: rolling restart, SIGTERM to each host's qcluster main pid in turn, the next
  once the restarted one is ready.
- ``db_blip``: every backend of the suite's own database terminated (pg_terminate_backend
  on the private cluster).
- ``redis``: the private redis-server SIGKILLed, down ``CHAOS_REDIS_DOWN`` seconds, restarted.
- ``clock``: one host's qcluster restarted under libfaketime ``CHAOS_SKEW`` (``+60s``)
  before the cycle's runs start, and restarted unskewed after the cycle.
- ``netcut``: one host's link set down inside its namespace for ``CHAOS_NETCUT`` seconds.
- ``sigstop``: one host's whole qcluster process tree SIGSTOPped for ``CHAOS_SIGSTOP``
  seconds (longer than BALLAST_HOST_SILENT_SECONDS), then SIGCONT: the other host takes
  its steps over while it is stopped, and the fence refuses its late commits once it runs
  again (a stopped host is not dead: it comes back believing it still holds its leases).

Figures per kind (see :func:`summarize`): runs lost (failed, or ended neither succeeded nor
parked), stuck (neither ended nor parked after the settle time), committed steps re-run
(an attempt of a step after its committed one), side effects repeated after a commit
(a call the effect server received after the step's commit, by PostgreSQL's commit
timestamp of the succeeded attempt), side effects repeated and steps parked in cycles with
no process death, API answers (5xx and none) from fault start to the cycle's end, and
recovery time: from the fault's end (a killed host: the kill; a restarted host: its old
tree gone; the database: the terminate returned; Redis and the network: restored) to the
interrupted step's commit or the effect call of its next attempt, whichever is first
(and the same from the fault's start: for a cut network, what a takeover target means).
An interrupted step is one running at the fault's start on a host the fault hit (the
killed, cut or stopped host is one with steps in flight, when there is one); a step that
ends parked has no recovery time and counts as parked. Takeover time: from the fault's
start to the commit of the take-back that marked the interrupted attempt lost
(PostgreSQL's commit timestamp), whether it re-queued the step or parked it (a step not
safe to repeat): the moment another host acted, counted for parked steps too. Late
commits refused: commits the fence refused on a host the fault hit (its log's "lease
lost, result discarded"), e.g. a stopped host's steps finishing after it resumed.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.chaos import infra
from tests.chaos.infra import ChaosSetupError, Layout, Stack

REPO_ROOT = Path(__file__).resolve().parents[2]
FAULT_KINDS = ("sigkill", "sigterm", "db_blip", "redis", "clock", "netcut", "sigstop")
PROCESS_DEATH_KINDS = {"sigkill", "sigterm"}
LEASE_LOST = "lease lost, result discarded"  # runs.engine.store.commit logs it when the fence refuses a commit


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def _env_range(name: str, default: str) -> tuple[float, float]:
    low, _, high = os.environ.get(name, default).partition("-")
    return float(low), float(high or low)


@dataclass
class Config:
    """The run's knobs, from the environment (names in brackets)."""

    runs: int = 1000  # [CHAOS_RUNS] runs in all
    runs_per_fault: int = 5  # [CHAOS_RUNS_PER_FAULT] runs started per cycle
    faults: tuple[str, ...] = FAULT_KINDS  # [CHAOS_FAULTS] comma separated
    seed: int = 0  # [CHAOS_SEED] 0: random
    workers: int = 2  # [CHAOS_WORKERS] worker processes per host
    hosts: int = 2  # [CHAOS_HOSTS]
    step_seconds: float = 0.5  # [CHAOS_STEP_SECONDS] each effect step's run time after its call
    settle_seconds: float = 240.0  # [CHAOS_SETTLE_SECONDS] a run not ended or parked by then is stuck
    lease_seconds: str | None = None  # [CHAOS_LEASE_SECONDS] unset: the product default
    live_owner_grace_seconds: str | None = None  # [CHAOS_LIVE_OWNER_GRACE_SECONDS]
    redis_down: tuple[float, float] = (2.0, 6.0)  # [CHAOS_REDIS_DOWN] "2-6" seconds
    netcut: tuple[float, float] = (5.0, 10.0)  # [CHAOS_NETCUT] "5-10" seconds
    sigstop: tuple[float, float] = (8.0, 12.0)  # [CHAOS_SIGSTOP] "8-12" seconds stopped
    skew: str = "+60s"  # [CHAOS_SKEW] libfaketime offset of the skewed host
    report: str | None = None  # [CHAOS_REPORT] JSON path; default var/chaos/report-<time>.json
    enforce: tuple[str, ...] = ()  # [CHAOS_ENFORCE] targets to enforce besides the default ones ("all")
    layout: Layout = field(default_factory=Layout)

    @classmethod
    def from_env(cls) -> Config:
        faults = tuple(f.strip() for f in os.environ.get("CHAOS_FAULTS", ",".join(FAULT_KINDS)).split(",") if f.strip())
        unknown = set(faults) - set(FAULT_KINDS)
        if unknown:
            raise ChaosSetupError(f"CHAOS_FAULTS: unknown fault kinds {sorted(unknown)} (known: {', '.join(FAULT_KINDS)})")
        hosts = int(os.environ.get("CHAOS_HOSTS", 2))
        if hosts < 2:
            raise ChaosSetupError("CHAOS_HOSTS: two hosts at least (a fault on one, the other takes over)")
        return cls(
            runs=int(os.environ.get("CHAOS_RUNS", 1000)),
            runs_per_fault=int(os.environ.get("CHAOS_RUNS_PER_FAULT", 5)),
            faults=faults,
            seed=int(os.environ.get("CHAOS_SEED", 0)) or random.SystemRandom().randrange(1, 2**31),
            workers=int(os.environ.get("CHAOS_WORKERS", 2)),
            hosts=hosts,
            step_seconds=_env_float("CHAOS_STEP_SECONDS", 0.5),
            settle_seconds=_env_float("CHAOS_SETTLE_SECONDS", 240),
            lease_seconds=os.environ.get("CHAOS_LEASE_SECONDS") or None,
            live_owner_grace_seconds=os.environ.get("CHAOS_LIVE_OWNER_GRACE_SECONDS") or None,
            redis_down=_env_range("CHAOS_REDIS_DOWN", "2-6"),
            netcut=_env_range("CHAOS_NETCUT", "5-10"),
            sigstop=_env_range("CHAOS_SIGSTOP", "8-12"),
            skew=os.environ.get("CHAOS_SKEW", "+60s"),
            report=os.environ.get("CHAOS_REPORT") or None,
            enforce=tuple(t.strip() for t in os.environ.get("CHAOS_ENFORCE", "").split(",") if t.strip()),
            layout=Layout(
                prefix=os.environ.get("CHAOS_PREFIX", "chaos"),
                subnet=os.environ.get("CHAOS_SUBNET", "10.231.77"),
                port_base=int(os.environ.get("CHAOS_PORT_BASE", 25430)),
                hosts=hosts,
            ),
        )


# ------------------------------------------------------------------------------ targets


@dataclass
class Target:
    """One promise of issue 23, checked on the summed figures of ``kinds``.

    ``metric`` is a key of a kind's summary; the target holds when its value is at most
    ``limit`` in every kind listed (a kind that did not run is not checked). ``enforced``:
    a miss fails the run (exit 1, the pytest test); otherwise it is only reported. Fixers
    turn theirs on here when their work lands (or with CHAOS_ENFORCE=name,...).
    """

    metric: str
    limit: float
    kinds: tuple[str, ...]
    enforced: bool
    what: str


TARGETS: dict[str, Target] = {
    # What holds today (the durability contract): enforced.
    "no_runs_lost": Target("runs_lost", 0, FAULT_KINDS, True, "0 runs lost"),
    "no_runs_stuck": Target("runs_stuck", 0, FAULT_KINDS, True, "0 runs stuck"),
    "no_committed_rerun": Target("committed_steps_rerun", 0, FAULT_KINDS, True, "0 committed steps re-run"),
    "no_repeat_after_commit": Target("effects_repeated_after_commit", 0, FAULT_KINDS, True, "0 side effects repeated after a commit"),
    # Issue 23's count targets: enforced since three short runs in a row met them (a
    # database or Redis blip alone repeats or parks nothing, no 5xx, a skewed clock steals
    # no lease). Its timing targets are reported only: two samples on a loaded 2-core CI
    # machine are not a p95 (the long run, make chaos, measures them).
    "db_blip_no_repeat": Target("effects_repeated_no_death", 0, ("db_blip",), True, "0 side effects repeated because of a database blip alone"),
    "db_blip_no_park": Target("steps_parked_no_death", 0, ("db_blip",), True, "0 steps parked because of a database blip alone"),
    "db_blip_recovery_p95": Target("recovery_p95", 2.0, ("db_blip",), False, "a step interrupted by a database blip committed or re-run within 2 s (p95)"),
    "redis_no_repeat": Target("effects_repeated_no_death", 0, ("redis",), True, "0 side effects repeated because of a Redis outage alone"),
    "redis_no_park": Target("steps_parked_no_death", 0, ("redis",), True, "0 steps parked because of a Redis outage alone"),
    "redis_no_5xx": Target("api_5xx", 0, ("redis",), True, "0 5xx from the API during a Redis outage"),
    # From the fault's start: a cut or stopped host's step must be taken over (or finished)
    # within 5 s of the cut or the stop, not only once the link is back or the host resumed.
    "takeover_p95": Target("from_start_p95", 5.0, ("sigkill", "netcut", "sigstop"), False, "cross-host takeover within 5 s (p95) of the kill, the cut or the stop"),
    "clock_no_stolen_lease": Target("effects_repeated_no_death", 0, ("clock",), True, "0 takeovers of a live host whose clock is skewed by 60 s"),
}


# ------------------------------------------------------------------------------ one cycle


@dataclass
class Cycle:
    """What one cycle did and saw (times are time.time(), the real clock)."""

    kind: str
    run_ids: list[int] = field(default_factory=list)
    fault_start: float = 0.0
    fault_end: float = 0.0
    host_ends: dict[str, float] = field(default_factory=dict)  # per-host end of the fault, when it differs
    affected_hosts: tuple[str, ...] = ()  # whose in-flight steps count as interrupted
    interrupted: list[dict] = field(default_factory=list)  # running steps at fault start
    settled_at: float = 0.0
    process_deaths: int = 0  # by the fault
    unexpected_exits: list[str] = field(default_factory=list)  # hosts that died by themselves
    late_commits_refused: int = 0  # the fence refused a commit on a host the fault hit (its log says so)
    detail: str = ""


class Suite:
    """Owns the infrastructure, the hosts and the web app of one suite run."""

    def __init__(self, config: Config, workdir: Path, stack: Stack):
        self.config = config
        self.layout = config.layout
        self.workdir = workdir
        self.stack = stack
        self.rng = random.Random(config.seed)
        self.pg = infra.PrivatePostgres(self.layout, workdir)
        self.redis = infra.PrivateRedis(self.layout, workdir)
        self.effects = infra.EffectLog(workdir / "effects.jsonl")
        self.hosts: list[Any] = []
        self.web: Any = None
        self.poller: Any = None
        self.version: Any = None
        self.cycles: list[Cycle] = []

    # -------------------------------------------------------------- setup

    def django_env(self) -> dict[str, str]:
        """The environment of every Ballast process of the suite (this one included)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BALLAST_", "PYTEST_", "DATABASE_URL", "CHAOS_"))}
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "ballast.settings",
                "DATABASE_URL": self.pg.url,
                "BALLAST_REDIS_URL": self.redis.url,
                "BALLAST_CACHE_REDIS_URL": self.redis.url,
                "BALLAST_CHANNELS_REDIS_URL": self.redis.url,
                "BALLAST_Q_BROKER": "redis",
                "BALLAST_EXTRA_TOOL_MODULES": "tests.support.chaos_tools",
                "BALLAST_CHAOS_EFFECT_URL": f"http://{self.layout.bridge_ip}:{self.layout.effect_port}/effect",
                "BALLAST_LOG_LEVEL": "INFO",
                "BALLAST_Q_LOG_LEVEL": "WARNING",
                "PYTHONUNBUFFERED": "1",
                "BALLAST_API_RATE_TOKEN": "100000/minute",
            }
        )
        if self.config.lease_seconds:
            env["BALLAST_LEASE_SECONDS"] = self.config.lease_seconds
        if self.config.live_owner_grace_seconds:
            env["BALLAST_LIVE_OWNER_GRACE_SECONDS"] = self.config.live_owner_grace_seconds
        return env

    def setup(self) -> None:
        infra.network_up(self.layout, self.stack)
        self.pg.start(self.stack)
        self.stack.push("redis", self.redis.kill)
        self.redis.start()
        infra.start_effect_server(self.layout, self.effects, self.stack)
        env = self.django_env()
        self.migrate(env)
        for k in [k for k in os.environ if k.startswith("BALLAST_") or k == "DATABASE_URL"]:
            del os.environ[k]
        os.environ.update(env)
        import django

        django.setup()
        from tests.chaos.hosts import ApiPoller, Host, WebApp

        token = self._api_token()
        self.version = self._publish()
        for i in range(1, self.config.hosts + 1):
            host = Host(self.layout, i, env=env, workdir=self.workdir, workers=self.config.workers)
            self.hosts.append(host)
            self.stack.push(f"host {host.name}", host.kill)
            host.start()
        self.web = WebApp(self.layout, env=env, workdir=self.workdir)
        self.stack.push("web app", self.web.stop)
        self.web.start()
        for host in self.hosts:
            host.wait_ready()
        self.poller = ApiPoller(self.web.base_url, token)
        self.stack.push("api poller", self.poller.stop)
        self.poller.start()

    def migrate(self, env: dict[str, str]) -> None:
        """Migrate the private database, or load the schema a previous run migrated with
        the same migration files (var/chaos/cache/): migrate takes most of a minute on a
        loaded 2-core machine, a load a second or two."""
        digest = hashlib.sha256()
        for path in sorted(REPO_ROOT.glob("*/migrations/*.py")):
            digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes())
        cache = REPO_ROOT / "var" / "chaos" / "cache" / f"schema-{digest.hexdigest()[:16]}.sql"
        if cache.exists():
            log(f"loading the migrated schema from {cache}")
            self.pg.restore(cache)
            return
        log(f"migrating the private database {self.pg.url}")
        infra.run([sys.executable, "manage.py", "migrate", "--noinput", "--skip-checks", "-v0"], cwd=REPO_ROOT, env=env)
        cache.parent.mkdir(parents=True, exist_ok=True)
        self.pg.dump(cache)

    def _api_token(self) -> str:
        from django.contrib.auth import get_user_model

        from accounts.tokens import token_create

        user = get_user_model().objects.create_superuser("chaos", "chaos@example.invalid", "chaos-password")
        return token_create(user=user, name="chaos")[1]

    def _publish(self) -> Any:
        from builder.services import graph_import

        def effect(node_id: str, unsafe: bool) -> dict:
            return {
                "id": node_id, "kind": "tool",
                "config": {"tool": "chaos_effect_unsafe" if unsafe else "chaos_effect",
                           "args": {"label": node_id, "sleep": self.config.step_seconds}},
                "retry": {"max_attempts": 5, "backoff_seconds": 0.5},
            }

        ids = ["start", "a", "b", "c", "d", "end"]
        nodes = [{"id": "start", "kind": "start", "config": {}}, effect("a", False), effect("b", True),
                 effect("c", False), effect("d", True), {"id": "end", "kind": "end", "config": {}}]
        edges = [{"source": s, "target": t, "source_handle": None} for s, t in zip(ids, ids[1:], strict=False)]
        return graph_import(spec={"name": "chaos", "nodes": nodes, "edges": edges}).version

    # -------------------------------------------------------------- cycles

    def run(self) -> None:
        started = 0
        turn = 0
        while started < self.config.runs:
            kind = self.config.faults[turn % len(self.config.faults)]
            turn += 1
            n = min(self.config.runs_per_fault, self.config.runs - started)
            cycle = self.cycle(kind, n)
            started += n
            self.cycles.append(cycle)
            s = summarize_cycle(cycle, self)
            log(f"cycle {turn} {kind}: {n} runs, {started}/{self.config.runs}; lost {s['runs_lost']} stuck {s['runs_stuck']} "
                f"parked {s['steps_parked']} repeats {s['effects_repeated']} committed re-run {s['committed_steps_rerun']} "
                f"after-commit {s['effects_repeated_after_commit']} 5xx {s['api_5xx']} recovery "
                f"{[round(r, 2) for r in s['recovery']]} from start {[round(r, 2) for r in s['recovery_from_start']]} "
                f"taken over {[round(r, 2) for r in s['takeover']]} "
                f"(fault at {datetime.fromtimestamp(cycle.fault_start, UTC).strftime('%H:%M:%S.%f')[:-3]}; "
                f"interrupted {sorted(st['id'] for st in cycle.interrupted)}) {cycle.detail}")

    def ensure_hosts(self, cycle: Cycle | None = None) -> None:
        """Restart any host whose qcluster exited by itself (noted on ``cycle``)."""
        for host in self.hosts:
            if not host.alive and not host.expected_exit:
                if cycle is not None:
                    cycle.unexpected_exits.append(host.name)
                log(f"host {host.name} exited by itself (rc={host.proc.returncode}); restarting it")
                host.start()
                host.wait_ready()

    def cycle(self, kind: str, n: int) -> Cycle:
        from runs.services import run_start

        cycle = Cycle(kind)
        self.ensure_hosts()
        victim = self.rng.choice(self.hosts)
        if kind == "clock":
            victim.terminate()
            victim.start(skew=self.config.skew)
            victim.wait_ready()
            cycle.detail = f"{victim.name} at {self.config.skew}"
        for _ in range(n):
            cycle.run_ids.append(run_start(version=self.version, run_input={}).pk)
            time.sleep(self.rng.uniform(0.05, 0.3))
        time.sleep(self.rng.uniform(0.2, 3 * self.config.step_seconds + 0.5))
        cycle.interrupted = self.running_steps(cycle.run_ids)
        if kind in ("sigkill", "netcut", "sigstop"):
            # A host with steps in flight, when one has any: a fault on an idle host measures no takeover.
            busy = [h for h in self.hosts if any(s["lease_owner"].startswith(h.name + ":") for s in cycle.interrupted)]
            victim = self.rng.choice(busy) if busy else victim
        log_sizes = {h.name: h.log_size() for h in self.hosts}
        cycle.fault_start = time.time()
        self.inject(kind, victim, cycle)
        self.settle(cycle)
        cycle.late_commits_refused = sum(
            h.log_since(log_sizes[h.name]).count(LEASE_LOST) for h in self.hosts if h.name in cycle.affected_hosts
        )
        # Undo what the fault left, outside the measured window.
        if kind == "sigkill":
            victim.start()
            victim.wait_ready()
        if kind == "clock":
            victim.terminate()
            victim.start()
            victim.wait_ready()
        return cycle

    def inject(self, kind: str, victim: Any, cycle: Cycle) -> None:
        if kind == "sigkill":
            victim.kill()
            cycle.process_deaths, cycle.affected_hosts = 1, (victim.name,)
            cycle.fault_end = time.time()
            cycle.detail = f"killed {victim.name}"
        elif kind == "sigterm":
            cycle.affected_hosts = tuple(h.name for h in self.hosts)
            for host in self.hosts:
                host.terminate()
                cycle.host_ends[host.name] = time.time()
                cycle.process_deaths += 1
                host.start()
                host.wait_ready()
            cycle.fault_end = time.time()
        elif kind == "db_blip":
            from django.db import connection

            count = self.pg.terminate_backends()
            connection.close()  # this process's own backend was one of them
            cycle.affected_hosts = tuple(h.name for h in self.hosts)
            cycle.fault_end = time.time()
            cycle.detail = f"{count} backends terminated"
        elif kind == "redis":
            down = self.rng.uniform(*self.config.redis_down)
            self.redis.kill()
            time.sleep(down)
            self.redis.start()
            cycle.affected_hosts = tuple(h.name for h in self.hosts)
            cycle.fault_end = time.time()
            cycle.detail = f"redis down {down:.1f} s"
        elif kind == "clock":
            cycle.fault_end = cycle.fault_start  # the skew lasts the whole cycle; nothing is "interrupted"
        elif kind == "netcut":
            down = self.rng.uniform(*self.config.netcut)
            infra.set_host_link(self.layout, victim.i, up=False)
            try:
                time.sleep(down)
            finally:
                infra.set_host_link(self.layout, victim.i, up=True)
            cycle.affected_hosts = (victim.name,)
            cycle.fault_end = time.time()
            cycle.detail = f"{victim.name} cut {down:.1f} s"
        elif kind == "sigstop":
            down = self.rng.uniform(*self.config.sigstop)
            victim.stop_tree()
            try:
                time.sleep(down)
            finally:
                victim.continue_tree()
            cycle.affected_hosts = (victim.name,)
            cycle.fault_end = time.time()
            cycle.detail = f"{victim.name} stopped {down:.1f} s"
        else:  # pragma: no cover - Config.from_env checks the names
            raise ValueError(kind)

    def running_steps(self, run_ids: list[int]) -> list[dict]:
        from runs.models import Step

        return list(Step.objects.filter(run_id__in=run_ids, status="running").values("id", "run_id", "node_id", "attempt", "lease_owner", "idempotency_key"))

    def settle(self, cycle: Cycle) -> None:
        """Wait until every run of the cycle ended or waits for a person with nothing
        running or due; restart hosts that died by themselves meanwhile."""
        from django.db.models import Q

        from runs.models import Run, Step

        deadline = time.monotonic() + self.config.settle_seconds
        while time.monotonic() < deadline:
            self.ensure_hosts(cycle)
            open_runs = Run.objects.filter(pk__in=cycle.run_ids).exclude(status__in=("succeeded", "failed", "cancelled"))
            busy = Step.objects.filter(run__in=open_runs).filter(Q(status__in=("pending", "running", "suspended")))
            parked_runs = set(Step.objects.filter(run__in=open_runs, status="parked").values_list("run_id", flat=True))
            if not busy.exists() and set(open_runs.values_list("pk", flat=True)) <= parked_runs:
                break
            time.sleep(0.2)
        cycle.settled_at = time.time()

    # -------------------------------------------------------------- reading back

    def cycle_rows(self, cycle: Cycle) -> tuple[dict[int, str], list[dict], dict[int, list[tuple[int, str, float | None]]]]:
        """(run status by id, steps, attempts by step id as (number, status, commit time))."""
        from django.db import connection

        from runs.models import Run, Step, StepAttempt

        runs = dict(Run.objects.filter(pk__in=cycle.run_ids).values_list("pk", "status"))
        steps = list(Step.objects.filter(run_id__in=cycle.run_ids).values("id", "run_id", "node_id", "status", "attempt", "idempotency_key"))
        attempts: dict[int, list] = defaultdict(list)
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT a.step_id, a.number, a.status, extract(epoch FROM pg_xact_commit_timestamp(a.xmin)) "
                f"FROM {StepAttempt._meta.db_table} a JOIN {Step._meta.db_table} s ON s.id = a.step_id "
                "WHERE s.run_id = ANY(%s) ORDER BY a.step_id, a.number",
                [cycle.run_ids],
            )
            for step_id, number, status, committed in cur.fetchall():
                attempts[step_id].append((number, status, float(committed) if committed is not None else None))
        return runs, steps, attempts


# ------------------------------------------------------------------------------ figures


def summarize_cycle(cycle: Cycle, suite: Suite) -> dict[str, Any]:
    """The cycle's figures (the keys :data:`TARGETS` name, per cycle)."""
    runs, steps, attempts = suite.cycle_rows(cycle)
    calls_by_key: dict[str, list[dict]] = defaultdict(list)
    for call in suite.effects.for_runs(set(cycle.run_ids)):
        calls_by_key[call["key"]].append(call)
    steps_by_run: dict[int, list[dict]] = defaultdict(list)
    for s in steps:
        steps_by_run[s["run_id"]].append(s)

    lost = stuck = 0
    for run_id in cycle.run_ids:
        status = runs.get(run_id)
        statuses = {s["status"] for s in steps_by_run[run_id]}
        if status == "succeeded":
            continue
        if status in ("failed", "cancelled"):
            lost += 1
        elif statuses & {"pending", "running", "suspended"}:
            stuck += 1
        elif "parked" not in statuses:
            lost += 1  # open, yet nothing will ever move it

    committed_rerun = after_commit = repeated = parked = 0
    for s in steps:
        if s["status"] == "parked":
            parked += 1
        calls = calls_by_key.get(s["idempotency_key"], [])
        repeated += max(0, len(calls) - 1)
        done = [(n, t) for n, st, t in attempts.get(s["id"], []) if st == "succeeded"]
        if not done:
            continue
        number, committed_at = done[0]
        later = [n for n, _, _ in attempts[s["id"]] if n > number] + [c["attempt"] for c in calls if c["attempt"] > number]
        if later or len(done) > 1:
            committed_rerun += 1
        if committed_at is not None:
            after_commit += sum(1 for c in calls if c["t"] > committed_at)

    recovery: list[float] = []
    from_start: list[float] = []
    takeover: list[float] = []
    unrecovered = 0
    by_id = {s["id"]: s for s in steps}
    for s in cycle.interrupted:
        host = s["lease_owner"].split(":", 1)[0]
        if host not in cycle.affected_hosts:
            continue
        end = cycle.host_ends.get(host, cycle.fault_end)
        events = [t for n, st, t in attempts.get(s["id"], []) if st == "succeeded" and n >= s["attempt"] and t is not None]
        events += [c["t"] for c in calls_by_key.get(s["idempotency_key"], []) if c["attempt"] > s["attempt"]]
        if events:
            recovery.append(max(0.0, min(events) - end))
            from_start.append(max(0.0, min(events) - cycle.fault_start))
        elif by_id.get(s["id"], {}).get("status") != "parked":
            unrecovered += 1
        # Taken over: the commit of the take-back that marked the interrupted attempt lost
        # (re-queued or parked alike; a step its host finished itself has none).
        lost_at = [t for n, st, t in attempts.get(s["id"], []) if n == s["attempt"] and st == "lost" and t is not None]
        if lost_at:
            takeover.append(max(0.0, lost_at[0] - cycle.fault_start))

    death = cycle.kind in PROCESS_DEATH_KINDS or bool(cycle.unexpected_exits)
    answers = suite.poller.between(cycle.fault_start, cycle.settled_at) if suite.poller else []
    return {
        "runs": len(cycle.run_ids),
        "runs_lost": lost,
        "runs_stuck": stuck,
        "committed_steps_rerun": committed_rerun,
        "effects_repeated_after_commit": after_commit,
        "effects_repeated": repeated,
        "steps_parked": parked,
        "effects_repeated_no_death": 0 if death else repeated,
        "steps_parked_no_death": 0 if death else parked,
        "api_requests": len(answers),
        "api_5xx": sum(1 for a in answers if a >= 500),
        "api_no_answer": sum(1 for a in answers if a == 0),
        "recovery": recovery,
        "recovery_from_start": from_start,
        "takeover": takeover,
        "interrupted": len([s for s in cycle.interrupted if s["lease_owner"].split(":", 1)[0] in cycle.affected_hosts]),
        "unrecovered": unrecovered,
        "unexpected_exits": len(cycle.unexpected_exits),
        "late_commits_refused": cycle.late_commits_refused,
    }


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by nearest rank, None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def summarize(per_cycle: list[tuple[str, dict]]) -> dict[str, dict[str, Any]]:
    """Sum the cycles' figures per fault kind; recovery as count, p50, p95, max (seconds)."""
    kinds: dict[str, dict[str, Any]] = {}
    for kind, figures in per_cycle:
        agg = kinds.setdefault(kind, {"cycles": 0, "recovery": [], "recovery_from_start": [], "takeover": []})
        agg["cycles"] += 1
        for key, value in figures.items():
            if key in ("recovery", "recovery_from_start", "takeover"):
                agg.setdefault(key, []).extend(value)
            else:
                agg[key] = agg.get(key, 0) + value
    for agg in kinds.values():
        rec = agg.pop("recovery")
        agg["recovery_count"] = len(rec)
        agg["recovery_p50"] = percentile(rec, 0.50)
        agg["recovery_p95"] = percentile(rec, 0.95)
        agg["recovery_max"] = max(rec) if rec else None
        agg["recovery_all"] = [round(r, 3) for r in sorted(rec)]
        rec = agg.pop("recovery_from_start")
        agg["from_start_p50"] = percentile(rec, 0.50)
        agg["from_start_p95"] = percentile(rec, 0.95)
        agg["from_start_max"] = max(rec) if rec else None
        rec = agg.pop("takeover")
        agg["takeover_count"] = len(rec)
        agg["takeover_p50"] = percentile(rec, 0.50)
        agg["takeover_p95"] = percentile(rec, 0.95)
        agg["takeover_max"] = max(rec) if rec else None
    return kinds


def check_targets(kinds: dict[str, dict[str, Any]], enforce: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Each target's verdict: ``{name, what, enforced, met, values: {kind: value}}``; a
    kind that did not run or has no value (no recovery measured) is not judged."""
    out = []
    for name, target in TARGETS.items():
        values = {k: kinds[k].get(target.metric) for k in target.kinds if k in kinds and kinds[k].get(target.metric) is not None}
        met = all(v <= target.limit for v in values.values()) if values else None
        out.append({"name": name, "what": target.what, "enforced": target.enforced or name in enforce or "all" in enforce,
                    "met": met, "values": values})
    return out


COLUMNS = [
    ("runs", "runs"), ("runs_lost", "lost"), ("runs_stuck", "stuck"), ("committed_steps_rerun", "committed re-run"),
    ("effects_repeated_after_commit", "repeat after commit"), ("effects_repeated", "effects repeated"),
    ("steps_parked", "parked"), ("effects_repeated_no_death", "repeated, no death"),
    ("steps_parked_no_death", "parked, no death"), ("api_5xx", "API 5xx"), ("api_no_answer", "API no answer"),
    ("api_requests", "API requests"), ("recovery_count", "recovered"), ("recovery_p50", "rec p50 s"),
    ("recovery_p95", "rec p95 s"), ("recovery_max", "rec max s"), ("from_start_p50", "from start p50"),
    ("from_start_p95", "from start p95"), ("from_start_max", "from start max"), ("takeover_count", "taken over"),
    ("takeover_p50", "takeover p50"), ("takeover_p95", "takeover p95"), ("takeover_max", "takeover max"), ("unrecovered", "unrecovered"),
    ("late_commits_refused", "late commits refused"),
    ("unexpected_exits", "host self-exits"),
]


def render(kinds: dict[str, dict[str, Any]], verdicts: list[dict[str, Any]]) -> str:
    """The per-kind table (one row per figure, one column per fault kind) and the targets."""
    names = [k for k in FAULT_KINDS if k in kinds]
    width = max(len(label) for _, label in COLUMNS) + 2

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    lines = ["".ljust(width) + "".join(n.rjust(10) for n in names)]
    for key, label in COLUMNS:
        lines.append(label.ljust(width) + "".join(cell(kinds[n].get(key)).rjust(10) for n in names))
    lines.append("")
    for v in verdicts:
        state = {True: "met", False: "NOT MET", None: "not measured"}[v["met"]]
        shown = ", ".join(f"{k}={cell(x)}" for k, x in v["values"].items())
        lines.append(f"{'[enforced] ' if v['enforced'] else '[reported] '}{v['name']}: {v['what']}: {state} ({shown})")
    return "\n".join(lines)


def log(message: str) -> None:
    print(f"chaos {datetime.now(UTC).strftime('%H:%M:%S')} {message}", flush=True)


# ------------------------------------------------------------------------------ entry point


def main(argv: list[str]) -> int:
    """Run the suite from the environment (see :class:`Config`). Exit status: 0 when every
    enforced target is met, 1 when one is not, 2 when the suite cannot start here."""
    if "--cleanup" in argv:
        layout = Config.from_env().layout
        log(f"removed {infra.cleanup_leftovers(layout) or 'nothing'}")
        return 0
    try:
        config = Config.from_env()
        infra.check_can_start(config.layout)
    except ChaosSetupError as exc:
        print(exc, file=sys.stderr)
        return 2
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    workdir = REPO_ROOT / "var" / "chaos" / stamp
    workdir.mkdir(parents=True)
    report_path = Path(config.report) if config.report else REPO_ROOT / "var" / "chaos" / f"report-{stamp}.json"
    stack = Stack()

    def stop(signum, frame):  # a SIGTERM ends the run through the finally below
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    suite = Suite(config, workdir, stack)
    began = time.time()
    log(f"seed {config.seed}; {config.runs} runs, {config.runs_per_fault} per fault; faults {','.join(config.faults)}; "
        f"{config.hosts} hosts x {config.workers} workers; logs in {workdir}")
    interrupted = False
    try:
        suite.setup()
        log(f"set up in {time.time() - began:.1f} s")
        suite.run()
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: reporting what ran")
    finally:
        per_cycle = []
        try:
            per_cycle = [(c.kind, summarize_cycle(c, suite)) for c in suite.cycles]
        except Exception as exc:  # the database may be gone already
            log(f"could not read the last figures back: {exc}")
        stack.close()
        for error in stack.errors:
            log(f"cleanup: {error}")
    kinds = summarize(per_cycle)
    verdicts = check_targets(kinds, config.enforce)
    report = {
        "started": datetime.fromtimestamp(began, UTC).isoformat(), "seconds": round(time.time() - began, 1),
        "seed": config.seed, "runs": sum(f["runs"] for _, f in per_cycle), "interrupted": interrupted,
        "config": {k: v for k, v in vars(config).items() if k != "layout"} | {"layout": vars(config.layout)},
        "load": os.getloadavg(), "kinds": kinds, "targets": verdicts, "workdir": str(workdir),
    }
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=2, default=str))
    print(render(kinds, verdicts), flush=True)
    log(f"figures in {report_path}; {report['runs']} runs in {report['seconds']} s")
    failed = [v["name"] for v in verdicts if v["enforced"] and v["met"] is False]
    if failed:
        log(f"enforced targets not met: {', '.join(failed)}")
    return 1 if failed or interrupted or not per_cycle else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))

