"""The chaos suite's driver: cycles of runs on real worker hosts, one fault at a random moment in each, and the figures per fault kind.

``python -m tests.chaos`` (``make chaos``) runs it; tests/chaos/test_chaos_short.py runs a
short one. One *cycle*: start ``CHAOS_RUNS_PER_FAULT`` runs of a graph of four counted
side effects (two safe to repeat, two not), wait a random moment, inject one fault, wait
until every run of the cycle has ended or is parked for a person (or
``CHAOS_SETTLE_SECONDS`` passed), then undo what the fault left (restart a killed host,
unskew a clock) and count. Fault kinds take turns until ``CHAOS_RUNS`` runs started.

Issue 26's two properties ride on every cycle. Every ``CHAOS_SUBGRAPH_EVERY``-th run of a
cycle (default every second) is of a graph that calls a child graph (``subgraph`` node:
an effect, then the call; the child: two effects, one not safe to repeat, then
``doubled = n * 2``), so faults hit parents waiting for children and children mid-step.
``CHAOS_SCHEDULES`` schedules (default 3, a one-effect graph, a yearly cron, overlap
``allow``, missed ``catch_up``) are made due on the database clock twice per cycle: as
the runs start and just before the fault, so ticks are fired during it, by the host it
hits, or after it. The cycle settles only when every tick it made due has fired and the
runs of ticks and children ended too; their steps count in every figure above.

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
Schedules (:func:`schedule_figures`): ticks due, fired twice (two tick rows, or a run
under the tick's key that is not the row's), lost (no tick row once settled), not started
(a row that skipped or failed), stray schedule runs (no tick row names them); fire lag
(``fired_at - tick_at``, database clock). Children (:func:`child_figures`): subgraph
steps, extra child runs (more than one with that ``parent_step``), missing ones (a step
that succeeded with none), parents that succeeded without their child's output, and
committed steps re-run inside children.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.chaos import infra
from tests.chaos.infra import ChaosSetupError, Layout, Stack

REPO_ROOT = Path(__file__).resolve().parents[2]
FAULT_KINDS = ("sigkill", "sigterm", "db_blip", "redis", "clock", "netcut", "sigstop")
PROCESS_DEATH_KINDS = {"sigkill", "sigterm"}
LEASE_LOST = "lease lost, result discarded"
YEARLY = "0 0 1 1 *"  # the schedules' cron: its own next tick is months away; the cycles make ticks due by hand  # runs.engine.store.commit logs it when the fence refuses a commit


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
    schedules: int = 3  # [CHAOS_SCHEDULES] schedules made due twice per cycle (at the runs' start and at the fault)
    subgraph_every: int = 2  # [CHAOS_SUBGRAPH_EVERY] every n-th run of a cycle calls a child graph (0: none)
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
            schedules=int(os.environ.get("CHAOS_SCHEDULES", 3)),
            subgraph_every=int(os.environ.get("CHAOS_SUBGRAPH_EVERY", 2)),
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
    # Issue 26's two properties under every fault: a schedule's tick fires once across
    # both hosts (one tick row, one run; none lost), a subgraph step has one child run
    # and its parent ends with that child's output.
    "schedule_once": Target("ticks_not_once", 0, FAULT_KINDS, True, "0 ticks fired twice or lost"),
    "child_once": Target("child_not_once", 0, FAULT_KINDS, True,
                         "0 subgraph steps with more than one child run (or none, or a parent without its child's output)"),
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
    ticks: list[tuple[int, datetime]] = field(default_factory=list)  # (schedule id, tick time) made due in the cycle
    parents_waiting: int = 0  # workload runs waiting for their child run at the fault's start


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
        self.parent_version: Any = None  # the workload graph that calls a child graph (subgraph node)
        self.schedule_ids: list[int] = []
        self.stray_schedule_runs: set[int] = set()  # schedule runs no tick row names, counted once
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
        self.parent_version = self._publish_parent()
        self.schedule_ids = self._create_schedules()
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

        self.user = get_user_model().objects.create_superuser("chaos", "chaos@example.invalid", "chaos-password")
        return token_create(user=self.user, name="chaos")[1]

    def _effect(self, node_id: str, unsafe: bool, sleep: float | None = None) -> dict:
        return {
            "id": node_id, "kind": "tool",
            "config": {"tool": "chaos_effect_unsafe" if unsafe else "chaos_effect",
                       "args": {"label": node_id, "sleep": self.config.step_seconds if sleep is None else sleep}},
            "retry": {"max_attempts": 5, "backoff_seconds": 0.5},
        }

    def _import(self, name: str, nodes: list[dict], **extra: Any) -> Any:
        """Publish a chain of ``nodes`` (in order) as graph ``name``; returns its version."""
        from builder.services import graph_import

        ids = [n["id"] for n in nodes]
        edges = [{"source": s, "target": t, "source_handle": None} for s, t in zip(ids, ids[1:], strict=False)]
        return graph_import(spec={"name": name, "nodes": nodes, "edges": edges, **extra}, user=self.user).version

    def _publish(self) -> Any:
        start, end = {"id": "start", "kind": "start", "config": {}}, {"id": "end", "kind": "end", "config": {}}
        return self._import("chaos", [start, self._effect("a", False), self._effect("b", True),
                                      self._effect("c", False), self._effect("d", True), end])

    def _publish_parent(self) -> Any:
        """A child graph (two side effects, one not safe to repeat, then ``doubled = n * 2``)
        and the workload graph that calls it: a -> call (subgraph) -> end, returning the
        child's output as ``result`` (three side effects in all, as long as the plain
        workload graph's four: the short run's time stays what it was)."""
        start = {"id": "start", "kind": "start", "config": {}}
        child = self._import(
            "chaos-child",
            [start, self._effect("b", True), self._effect("c", False),
             {"id": "double", "kind": "transform", "config": {"set": {"doubled": "n * 2"}}},
             {"id": "end", "kind": "end", "config": {"output": ["doubled"]}}],
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        )
        call = {"id": "call", "kind": "subgraph",
                "config": {"graph": child.graph_id, "version": "latest", "input": {"n": "{{ input.n }}"}, "output_key": "result"}}
        return self._import(
            "chaos-parent",
            [start, self._effect("a", False), call,
             {"id": "end", "kind": "end", "config": {"output": ["result"]}}],
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        )

    def _create_schedules(self) -> list[int]:
        """``CHAOS_SCHEDULES`` schedules of a one-effect graph with a yearly cron (no tick
        of their own falls during the run): the cycles set their due rows by hand. Overlap
        ``allow`` and missed ``catch_up``: every tick the suite makes due must start a run."""
        from triggers.schedules import schedule_create

        start, end = {"id": "start", "kind": "start", "config": {}}, {"id": "end", "kind": "end", "config": {}}
        version = self._import("chaos-tick", [start, self._effect("t", False, sleep=0.1), end])
        return [
            schedule_create(graph=version.graph, name=f"chaos-{i}", user=self.user, cron_expression=YEARLY,
                            overlap_policy="allow", missed_policy="catch_up").pk
            for i in range(1, self.config.schedules + 1)
        ]

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
                f"taken over {[round(r, 2) for r in s['takeover']]} ticks {s['ticks_due']} (twice {s['ticks_fired_twice']} "
                f"lost {s['ticks_lost']} not started {s['ticks_not_started']} stray {s['ticks_stray_runs']}) "
                f"children {s['subgraph_steps']} (extra {s['child_runs_extra']} missing {s['child_runs_missing']} "
                f"wrong output {s['parent_output_wrong']}) "
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
        self.make_ticks_due(cycle)
        for i in range(n):
            every = self.config.subgraph_every
            if every and i % every == every - 1:
                cycle.run_ids.append(run_start(version=self.parent_version, run_input={"n": len(self.cycles) * 100 + i}).pk)
            else:
                cycle.run_ids.append(run_start(version=self.version, run_input={}).pk)
            time.sleep(self.rng.uniform(0.05, 0.3))
        time.sleep(self.rng.uniform(0.2, 3 * self.config.step_seconds + 0.5))
        self.make_ticks_due(cycle)  # due as the fault strikes: some fire during it, some on the host it hits
        cycle.interrupted = self.running_steps(self.cycle_run_ids(cycle))
        cycle.parents_waiting = self.parents_waiting(cycle.run_ids)
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

    def make_ticks_due(self, cycle: Cycle) -> None:
        """Make every schedule whose last tick fired due now (database clock, whole
        seconds, later than any tick this suite made due before), in one UPDATE that skips
        a schedule still due (its earlier tick has not fired: overwriting it would lose
        it by the suite's doing). Records the ticks on ``cycle``."""
        from django.db import connection

        from runs.engine import api as engine
        from triggers.models import Schedule

        if not self.schedule_ids:
            return
        at = engine.db_now().replace(microsecond=0)
        last = max((t for c in [*self.cycles, cycle] for _, t in c.ticks), default=None)
        if last is not None and at <= last:
            at = last + timedelta(seconds=1)
        with connection.cursor() as cur:
            cur.execute(
                f"UPDATE {Schedule._meta.db_table} SET next_fire_at = %s WHERE id = ANY(%s) AND next_fire_at > now() RETURNING id",
                [at, self.schedule_ids],
            )
            cycle.ticks.extend((row[0], at) for row in cur.fetchall())

    def cycle_run_ids(self, cycle: Cycle) -> list[int]:
        """The cycle's workload runs, their child runs and the runs its ticks started."""
        from runs.models import Run

        ids = list(cycle.run_ids)
        ids += Run.objects.filter(parent_step__run_id__in=cycle.run_ids).values_list("pk", flat=True)
        ids += tick_rows(cycle.ticks).exclude(run_id=None).values_list("run_id", flat=True)
        return ids

    def parents_waiting(self, run_ids: list[int]) -> int:
        """How many of ``run_ids`` have a subgraph step waiting for its child run now."""
        from runs.models import Step

        return Step.objects.filter(run_id__in=run_ids, node_id="call", status="waiting").count()

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
            open_runs = set(Run.objects.filter(pk__in=self.cycle_run_ids(cycle)).exclude(status__in=("succeeded", "failed", "cancelled"))
                            .values_list("pk", flat=True))
            blocked = parked_for_person(open_runs)
            busy = Step.objects.filter(run_id__in=open_runs - blocked).filter(Q(status__in=("pending", "running", "suspended")))
            all_fired = tick_rows(cycle.ticks).count() >= len(cycle.ticks)
            if all_fired and not busy.exists() and open_runs <= blocked:
                break
            time.sleep(0.2)
        cycle.settled_at = time.time()

    # -------------------------------------------------------------- reading back

    def cycle_rows(self, run_ids: list[int]) -> tuple[dict[int, str], list[dict], dict[int, list[tuple[int, str, float | None]]]]:
        """(run status by id, steps, attempts by step id as (number, status, commit time)) of ``run_ids``."""
        from django.db import connection

        from runs.models import Run, Step, StepAttempt

        runs = dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "status"))
        steps = list(Step.objects.filter(run_id__in=run_ids).values("id", "run_id", "node_id", "status", "attempt", "idempotency_key"))
        attempts: dict[int, list] = defaultdict(list)
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT a.step_id, a.number, a.status, extract(epoch FROM pg_xact_commit_timestamp(a.xmin)) "
                f"FROM {StepAttempt._meta.db_table} a JOIN {Step._meta.db_table} s ON s.id = a.step_id "
                "WHERE s.run_id = ANY(%s) ORDER BY a.step_id, a.number",
                [run_ids],
            )
            for step_id, number, status, committed in cur.fetchall():
                attempts[step_id].append((number, status, float(committed) if committed is not None else None))
        return runs, steps, attempts


# ------------------------------------------------------------------------------ figures


def summarize_cycle(cycle: Cycle, suite: Suite) -> dict[str, Any]:
    """The cycle's figures (the keys :data:`TARGETS` name, per cycle)."""
    all_ids = suite.cycle_run_ids(cycle)
    runs, steps, attempts = suite.cycle_rows(all_ids)
    calls_by_key: dict[str, list[dict]] = defaultdict(list)
    for call in suite.effects.for_runs(set(all_ids)):
        calls_by_key[call["key"]].append(call)
    steps_by_run: dict[int, list[dict]] = defaultdict(list)
    for s in steps:
        steps_by_run[s["run_id"]].append(s)

    # Every run of the cycle: the workload's, their children, the ticks' runs.
    blocked = parked_for_person({r for r, st in runs.items() if st not in ("succeeded", "failed", "cancelled")})
    lost = stuck = 0
    for run_id in all_ids:
        status = runs.get(run_id)
        statuses = {s["status"] for s in steps_by_run[run_id]}
        if status == "succeeded":
            continue
        if status in ("failed", "cancelled"):
            lost += 1
        elif run_id in blocked and "parked" not in statuses:
            continue  # a parent waiting for a child parked for a person: parked, as its child
        elif statuses & {"pending", "running", "suspended"}:
            stuck += 1
        elif "parked" not in statuses:
            lost += 1  # open, yet nothing will ever move it

    child_ids = set(all_ids) - set(cycle.run_ids)  # children and tick runs alike (a tick run has no parent)
    child_ids &= set(parent_of(child_ids))
    committed_rerun = after_commit = repeated = parked = child_rerun = 0
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
            if s["run_id"] in child_ids:
                child_rerun += 1
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

    ticks = schedule_figures(cycle, suite)
    children = child_figures(cycle, steps, runs)
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
        "child_steps_interrupted": sum(1 for s in cycle.interrupted if s["run_id"] in child_ids),
        "parents_waiting_at_fault": cycle.parents_waiting,
        **ticks,
        **children,
        "child_committed_rerun": child_rerun,
    }


def tick_rows(ticks: list[tuple[int, datetime]]) -> Any:
    """The tick rows (not Run now) of ``ticks``, (schedule id, tick time) pairs: a queryset."""
    from django.db.models import Q

    from triggers.models import ScheduleTick

    match = Q(pk__in=[])
    for schedule_id, at in ticks:
        match |= Q(schedule_id=schedule_id, tick_at=at)
    return ScheduleTick.objects.filter(match, manual=False)


def parent_of(run_ids: set[int]) -> dict[int, int]:
    """Child run id -> its parent run id, for the runs of ``run_ids`` that are children."""
    from runs.models import Run

    return dict(Run.objects.filter(pk__in=run_ids, parent_step__isnull=False).values_list("pk", "parent_step__run_id"))


def parked_for_person(open_runs: set[int]) -> set[int]:
    """Of ``open_runs`` (not ended), those only a person can move: a step parked, or
    waiting at a subgraph step for a child run that is so (to any depth; the child must
    be among ``open_runs``)."""
    from runs.models import Step

    blocked = set(Step.objects.filter(run_id__in=open_runs, status="parked").values_list("run_id", flat=True))
    parents = parent_of(open_runs)
    grew = True
    while grew:
        grew = False
        for child, parent in parents.items():
            if child in blocked and parent in open_runs and parent not in blocked:
                blocked.add(parent)
                grew = True
    return blocked


def schedule_figures(cycle: Cycle, suite: Any) -> dict[str, Any]:
    """Issue 26's schedule-fires-once, on the ticks ``cycle`` made due: each has exactly one
    tick row (unique per schedule and tick time), that row started a run, exactly one run
    carries the tick's idempotency key and it is the row's run; none left unfired after
    the cycle settled. Stray runs: runs of the schedules that no tick row names (a second
    start of a tick under another key), counted once over the suite's life. ``suite``: a
    :class:`Suite`, or anything with its ``schedule_ids`` and ``stray_schedule_runs``."""
    from runs.models import Run
    from triggers.models import ScheduleTick

    rows: dict[tuple[int, datetime], list[dict]] = defaultdict(list)
    for row in tick_rows(cycle.ticks).values("schedule_id", "tick_at", "outcome", "run_id", "fired_at"):
        rows[(row["schedule_id"], row["tick_at"])].append(row)
    twice = lost = not_started = during = 0
    lags: list[float] = []
    for schedule_id, at in cycle.ticks:
        mine = rows.get((schedule_id, at), [])
        if not mine:
            lost += 1
            continue
        twice += len(mine) - 1
        row = mine[0]
        lags.append((row["fired_at"] - row["tick_at"]).total_seconds())
        if cycle.fault_start <= row["fired_at"].timestamp() <= max(cycle.fault_end, cycle.fault_start):
            during += 1
        key = f"schedule:{schedule_id}:{at.strftime('%Y%m%dT%H%M%SZ')}"
        keyed = list(Run.objects.filter(idempotency_key=key).values_list("pk", flat=True))
        if row["outcome"] != "started" or row["run_id"] is None:
            not_started += 1
        elif keyed != [row["run_id"]]:
            twice += max(1, len(keyed) - 1)
    named = set(ScheduleTick.objects.filter(schedule_id__in=suite.schedule_ids).exclude(run_id=None).values_list("run_id", flat=True))
    schedule_runs = set(Run.objects.filter(source__startswith="schedule chaos-").values_list("pk", flat=True))
    stray = schedule_runs - named - suite.stray_schedule_runs
    suite.stray_schedule_runs |= stray
    return {
        "ticks_due": len(cycle.ticks),
        "ticks_fired_in_fault": during,
        "ticks_fired_twice": twice,
        "ticks_lost": lost,
        "ticks_not_started": not_started,
        "ticks_stray_runs": len(stray),
        "ticks_not_once": twice + lost + not_started + len(stray),
        "tick_lag": lags,
    }


def child_figures(cycle: Cycle, steps: list[dict], runs: dict[int, str]) -> dict[str, Any]:
    """Issue 26's child-runs-once, on the cycle's subgraph steps: each has at most one child
    run (Run.parent_step), one once it succeeded, and a parent that succeeded ended with its
    child's output (``result``) from a child that succeeded."""
    from runs.models import Run

    call_steps = {s["id"]: s for s in steps if s["node_id"] == "call" and s["run_id"] in set(cycle.run_ids)}
    children: dict[int, list[dict]] = defaultdict(list)
    for child in Run.objects.filter(parent_step_id__in=list(call_steps)).values("pk", "parent_step_id", "status", "output"):
        children[child["parent_step_id"]].append(child)
    outputs = dict(Run.objects.filter(pk__in={s["run_id"] for s in call_steps.values()}).values_list("pk", "output"))
    extra = missing = wrong_output = 0
    for step_id, step in call_steps.items():
        kids = children.get(step_id, [])
        extra += max(0, len(kids) - 1)
        if not kids and step["status"] == "succeeded":
            missing += 1
        if runs.get(step["run_id"]) == "succeeded":
            output = (outputs.get(step["run_id"]) or {}).get("result")
            if len(kids) != 1 or kids[0]["status"] != "succeeded" or output != kids[0]["output"]:
                wrong_output += 1
    return {
        "subgraph_steps": len(call_steps),
        "child_runs_extra": extra,
        "child_runs_missing": missing,
        "parent_output_wrong": wrong_output,
        "child_not_once": extra + missing + wrong_output,
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
        agg = kinds.setdefault(kind, {"cycles": 0, "recovery": [], "recovery_from_start": [], "takeover": [], "tick_lag": []})
        agg["cycles"] += 1
        for key, value in figures.items():
            if key in ("recovery", "recovery_from_start", "takeover", "tick_lag"):
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
        rec = agg.pop("tick_lag")
        agg["tick_lag_p50"] = percentile(rec, 0.50)
        agg["tick_lag_max"] = max(rec) if rec else None
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
    ("ticks_due", "ticks due"), ("ticks_fired_in_fault", "ticks fired in fault"), ("ticks_fired_twice", "ticks fired twice"), ("ticks_lost", "ticks lost"),
    ("ticks_not_started", "ticks not started"), ("ticks_stray_runs", "stray schedule runs"),
    ("tick_lag_p50", "tick lag p50 s"), ("tick_lag_max", "tick lag max s"),
    ("subgraph_steps", "subgraph steps"), ("parents_waiting_at_fault", "parents waiting at fault"),
    ("child_steps_interrupted", "child steps interrupted"), ("child_runs_extra", "extra child runs"), ("child_runs_missing", "missing child runs"),
    ("parent_output_wrong", "parent w/o child output"), ("child_committed_rerun", "child committed re-run"),
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

