"""Ballast's benchmark cases. Each one warms up, repeats, CHECKS every run's result
(status, state, committed steps) before it keeps its time, and reports medians.

Two execution paths:
- in-process: ``engine.local_mode()`` + ``drive_local`` (the engine's own loop in the
  benchmark process; ``run_graph`` uses it when no qcluster is up);
- qcluster: ``run_start`` hands the start step to the django-q2 ORM broker and a real
  ``manage.py qcluster`` subprocess executes it (times from the database: run created_at
  to finished_at, both written by ``timezone.now()`` on this machine).
"""
from __future__ import annotations

import time
import uuid
from typing import Any

from bench import graphs
from bench.cluster import Cluster, wait_until
from bench.core import CheckFailed, Reporter, check, reset_tables, summary

RUN_TIMEOUT = 300.0


# --------------------------------------------------------------------------- helpers


def start_inprocess(version, run_input: dict | None = None, timeout: float = RUN_TIMEOUT) -> tuple[int, float]:
    """Start a run and drive it in this process; (run id, wall seconds)."""
    from runs.engine import api as engine
    from runs.services import run_start

    with engine.local_mode() as queue:
        t0 = time.perf_counter()
        run = run_start(version=version, run_input=run_input or {})
        engine.drive_local(run.pk, queue=queue, timeout=timeout)
        elapsed = time.perf_counter() - t0
    return run.pk, elapsed


def start_queued(version, run_input: dict | None = None) -> int:
    """Start a run whose start step goes to the django-q2 queue (a qcluster runs it)."""
    from runs.engine import dispatch
    from runs.services import run_start

    assert not dispatch.in_local_mode()
    return run_start(version=version, run_input=run_input or {}).pk


def create_held(version, count: int, run_input: dict | None = None) -> tuple[list[int], list[int]]:
    """Create ``count`` runs whose start steps are NOT handed to the queue yet;
    (run ids, start step ids). ``dispatch.enqueue(step ids)`` releases them."""
    from runs.engine import api as engine
    from runs.services import run_start

    run_ids: list[int] = []
    with engine.local_mode() as queue:
        for _ in range(count):
            run_ids.append(run_start(version=version, run_input=run_input or {}).pk)
        step_ids = list(queue)
    return run_ids, step_ids


TERMINAL = ("succeeded", "failed", "cancelled")


def wait_terminal(run_ids: list[int], *, cluster: Cluster | None = None, timeout: float = RUN_TIMEOUT, poll: float = 0.02) -> None:
    from runs.models import Run

    wanted = len(run_ids)
    wait_until(
        lambda: Run.objects.filter(pk__in=run_ids, status__in=TERMINAL).count() == wanted,
        timeout,
        f"{wanted} run(s) to finish",
        cluster=cluster,
        poll=poll,
    )


def db_seconds(run_id: int) -> tuple[float, float]:
    """(created -> finished, start step started -> finished) of a run, from its rows."""
    from runs.models import Run, Step

    created, finished = Run.objects.values_list("created_at", "finished_at").get(pk=run_id)
    first = Step.objects.filter(run_id=run_id, node_id="start").values_list("started_at", flat=True).get()
    return (finished - created).total_seconds(), (finished - first).total_seconds()


def check_linear(run_id: int, n: int) -> None:
    """The linear run succeeded, ``i == n``, n + 2 steps each committed once."""
    from runs.models import Run, Step, StepAttempt

    run = Run.objects.get(pk=run_id)
    status, state, error = run.status, run.state, run.error
    check(status == "succeeded", f"run {run_id}: {status} {error}")
    check(state.get("i") == n, f"run {run_id}: state i={state.get('i')!r}, expected {n}")
    steps = list(Step.objects.filter(run_id=run_id).values_list("status", "attempt"))
    check(len(steps) == n + 2, f"run {run_id}: {len(steps)} steps, expected {n + 2}")
    check(all(s == ("succeeded", 1) for s in steps), f"run {run_id}: steps not all succeeded at attempt 1")
    attempts = StepAttempt.objects.filter(step__run_id=run_id).count()
    check(attempts == n + 2, f"run {run_id}: {attempts} attempts, expected {n + 2}")


def check_fanout(run_id: int, n: int) -> None:
    """The fan-out run succeeded, every branch merged once (``hits == n``), one join."""
    from runs.models import Run, Step

    run = Run.objects.get(pk=run_id)
    status, state, error = run.status, run.state, run.error
    check(status == "succeeded", f"run {run_id}: {status} {error}")
    check(state.get("hits") == n, f"run {run_id}: hits={state.get('hits')!r}, expected {n}")
    steps = list(Step.objects.filter(run_id=run_id).values_list("node_id", "status", "attempt"))
    check(len(steps) == n + 3, f"run {run_id}: {len(steps)} steps, expected {n + 3}")
    check(all(s[1:] == ("succeeded", 1) for s in steps), f"run {run_id}: steps not all succeeded once")
    check(sum(1 for s in steps if s[0] == "join") == 1, f"run {run_id}: join ran more than once")


# --------------------------------------------------------------------------- floor


def case_floor(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """Emit the floor itself (each process measures it anyway for its ratios)."""
    rep.floor(emit=True, ops=n or 300, runs=runs)


# --------------------------------------------------------------------------- linear


def case_linear(rep: Reporter, db: str, n: int | None, runs: int, paths: tuple[str, ...] = ("inprocess", "qcluster")) -> dict[str, float]:
    n = n or 100
    version = graphs.publish(graphs.linear(n))
    medians: dict[str, float] = {}
    if "inprocess" in paths:
        reset_tables()
        for _ in range(2):  # warm-up: imports, compiled graph cache, connections
            rid, _ = start_inprocess(version)
            check_linear(rid, n)
        samples = []
        for _ in range(runs):
            rid, seconds = start_inprocess(version)
            check_linear(rid, n)
            samples.append(seconds * 1000 / n)
        line = rep.emit("linear.inprocess", n=n, runs=runs, samples=samples, unit="ms/node", per_commit=1,
                        note="wall time of a whole run (run_start to drive_local return) / n transform nodes")
        medians["inprocess"] = line["median"]
    if "qcluster" in paths:
        reset_tables()
        with Cluster("linear", db, workers=2) as cluster:
            cluster.wait_ready()
            for _ in range(3):  # warm-up both forked workers
                rid = start_queued(version)
                wait_terminal([rid], cluster=cluster)
                check_linear(rid, n)
            samples, pickup, after = [], [], []
            for _ in range(runs):
                rid = start_queued(version)
                wait_terminal([rid], cluster=cluster)
                check_linear(rid, n)
                total, from_start = db_seconds(rid)
                samples.append(total * 1000 / n)
                after.append(from_start * 1000 / n)
                pickup.append((total - from_start) * 1000)
        line = rep.emit("linear.qcluster", n=n, runs=runs, samples=samples, unit="ms/node", per_commit=1,
                        queue_pickup_ms=summary(pickup)[0], ms_per_node_after_pickup=summary(after)[0],
                        workers=2, note="run created_at to finished_at / n, through django-q2 (ORM broker, poll 0.05 s)")
        medians["qcluster"] = line["median"]
    return medians


# --------------------------------------------------------------------------- fan-out


def case_fanout(rep: Reporter, db: str, n: int | None, runs: int, paths: tuple[str, ...] = ("inprocess", "qcluster")) -> None:
    sizes = [n] if n else [10, 100]
    versions = {size: graphs.publish(graphs.fanout(size)) for size in sizes}
    if "inprocess" in paths:
        reset_tables()
        for size in sizes:
            for _ in range(2):
                rid, _ = start_inprocess(versions[size])
                check_fanout(rid, size)
            samples = []
            for _ in range(runs):
                rid, seconds = start_inprocess(versions[size])
                check_fanout(rid, size)
                samples.append(seconds * 1000)
            median = summary(samples)[0]
            rep.emit("fanout.inprocess", n=size, runs=runs, samples=samples, unit="ms/run", per_commit=size + 3,
                     ms_per_node=median / (size + 3), note=f"{size} branches + start, join, end = {size + 3} node commits per run")
    if "qcluster" in paths:
        reset_tables()
        with Cluster("fanout", db, workers=2) as cluster:
            cluster.wait_ready()
            for size in sizes:
                for _ in range(1):  # the cluster is already warm from the previous size
                    rid = start_queued(versions[size])
                    wait_terminal([rid], cluster=cluster)
                    check_fanout(rid, size)
                samples = []
                for _ in range(runs):
                    rid = start_queued(versions[size])
                    wait_terminal([rid], cluster=cluster)
                    check_fanout(rid, size)
                    samples.append(db_seconds(rid)[0] * 1000)
                median = summary(samples)[0]
                rep.emit("fanout.qcluster", n=size, runs=runs, samples=samples, unit="ms/run", per_commit=size + 3,
                         ms_per_node=median / (size + 3), workers=2,
                         note="run created_at to finished_at; branches go through the queue, 2 worker processes")


# --------------------------------------------------------------------------- recovery


RECOVERY_NODE = "t2"


def _attempt(run_id: int, node_id: str, number: int):
    from runs.models import StepAttempt

    return StepAttempt.objects.filter(step__run_id=run_id, step__node_id=node_id, number=number).first()


def _recovered_at(run_id: int) -> float | None:
    """When recovery committed the re-queue of the dead owner's step (its event row)."""
    from runs.models import RunEvent

    at = RunEvent.objects.filter(run_id=run_id, kind="step_recovered").values_list("created_at", flat=True).first()
    return at.timestamp() if at else None


def _crash_at_fault(db: str, version, **cluster_kwargs: Any) -> tuple[int, Cluster]:
    """Start a run, let a fault-armed cluster reach ``during_execute`` of t2 (lease held),
    and return (run id, the still-running cluster) for the caller to kill."""
    from runs.models import Step

    rid = start_queued(version)
    crashed = Cluster("crashed", db, workers=1, fault=f"during_execute:{RECOVERY_NODE}", **cluster_kwargs).start()
    try:
        report = crashed.wait_for_fault()
        step = Step.objects.get(run_id=rid, node_id=RECOVERY_NODE)
        check(step.status == "running" and step.attempt == 1, f"t2 is {step.status} attempt {step.attempt} at the fault")
        check(report["step_id"] == step.pk, "the fault was hit by another step")
    except BaseException:
        crashed.kill()
        raise
    return rid, crashed


def _check_recovered(run_id: int) -> None:
    """Only the in-flight step ran again: t2 has a lost attempt and a succeeded one."""
    from runs.models import StepAttempt

    check_linear_recovered(run_id)
    rows = list(StepAttempt.objects.filter(step__run_id=run_id, step__node_id=RECOVERY_NODE).order_by("number").values_list("number", "status"))
    check(rows == [(1, "lost"), (2, "succeeded")], f"t2 attempts: {rows}")


def check_linear_recovered(run_id: int, n: int = 3) -> None:
    """The crashed run finished correctly: i == n; only t2 ran twice (lost + succeeded)."""
    from runs.models import Run, Step

    run = Run.objects.get(pk=run_id)
    status, state, error = run.status, run.state, run.error
    check(status == "succeeded", f"run {run_id}: {status} {error}")
    check(state.get("i") == n, f"run {run_id}: i={state.get('i')!r}, expected {n}")
    for node_id, attempt in Step.objects.filter(run_id=run_id).values_list("node_id", "attempt"):
        expected = 2 if node_id == RECOVERY_NODE else 1
        check(attempt == expected, f"run {run_id}: step {node_id} attempt {attempt}, expected {expected}")


def case_recovery(rep: Reporter, db: str, n: int | None, runs: int, lease_seconds: float = 3.0) -> None:
    """SIGKILL a qcluster while it holds t2's lease (fault point during_execute:t2), then:

    - restart: time from spawning a fresh qcluster to t2's second attempt started_at;
    - takeover.same_host: a stand-by qcluster already running; time from the SIGKILL to
      its re-run of t2 (it sees the owner pid is dead: bounded by the recovery interval);
    - takeover.other_host: the stand-by claims another host name, so it cannot check the
      pid and waits for the lease to lapse (bounded by BALLAST_LEASE_SECONDS).
    """
    from django.conf import settings

    from runs.models import Step, Worker

    version = graphs.publish(graphs.linear(3))
    interval = settings.BALLAST_RECOVERY_INTERVAL
    default_lease = settings.BALLAST_LEASE_SECONDS
    reset_tables()

    # restart ------------------------------------------------------------------
    rerun, boot, pickup = [], [], []
    for i in range(runs + 1):  # the first is a warm-up (page cache, bytecode)
        rid, crashed = _crash_at_fault(db, version)
        crashed.kill()
        fresh = Cluster("restarted", db, workers=2)
        try:
            t0 = fresh.start().started_at
            wait_until(lambda rid=rid: _attempt(rid, RECOVERY_NODE, 2) is not None, 60, "t2 re-run", cluster=fresh, poll=0.01)
            started = _attempt(rid, RECOVERY_NODE, 2).started_at.timestamp()
            registered = Worker.objects.filter(pid=fresh.proc.pid).values_list("started_at", flat=True).first()
            wait_terminal([rid], cluster=fresh)
        finally:
            fresh.kill()
        _check_recovered(rid)
        if i:
            rerun.append(started - t0)
            if registered is not None:
                boot.append(registered.timestamp() - t0)
            pickup.append(started - _recovered_at(rid))
    rep.emit("recovery.restart", n=1, runs=runs, samples=rerun, unit="s", target_s=1.0,
             boot_to_supervisor_s=summary(boot)[0] if boot else None,
             supervisor_to_recovered_s=(summary([r - p for r, p in zip(rerun, pickup, strict=False)])[0] - summary(boot)[0]) if boot else None,
             recovered_to_rerun_s=summary(pickup)[0],
             lease_seconds=default_lease, recovery_interval=interval,
             note="spawn of a fresh `manage.py qcluster` to the re-run step's StepAttempt.started_at; "
                  "the dead owner's pid is checked on this host, so no lease wait")

    # takeover by a live stand-by, same host and "other host" ---------------------
    for variant, other_host in (("same_host", False), ("other_host", True)):
        lease = lease_seconds if other_host else default_lease
        takeover, detect, pickup, after_expiry = [], [], [], []
        for _ in range(runs):
            # The stand-by starts once the crashing cluster holds t2's lease: a stand-by
            # already up could take the run's start step itself (recovery re-dispatches
            # pending steps when it sees a cluster die), and then nothing would crash.
            rid, crashed = _crash_at_fault(db, version, lease_seconds=lease)
            standby = Cluster(f"standby-{variant}", db, workers=2, q_name="bench-standby", lease_seconds=lease, other_host=other_host)
            with standby:
                try:
                    standby.wait_ready()
                    # A live worker's lease is never stolen: give the stand-by a recovery pass.
                    time.sleep(interval + 0.3)
                    check(_attempt(rid, RECOVERY_NODE, 2) is None, "the stand-by stole a live lease")
                    t_kill = time.time()
                    expires = Step.objects.get(run_id=rid, node_id=RECOVERY_NODE).lease_expires_at.timestamp()
                finally:
                    crashed.kill()
                wait_until(lambda rid=rid: _attempt(rid, RECOVERY_NODE, 2) is not None, lease + 60, "takeover", cluster=standby, poll=0.01)
                started = _attempt(rid, RECOVERY_NODE, 2).started_at.timestamp()
                wait_terminal([rid], cluster=standby)
            _check_recovered(rid)
            recovered = _recovered_at(rid)
            takeover.append(started - t_kill)
            detect.append(recovered - t_kill)
            pickup.append(started - recovered)
            after_expiry.append(started - expires)
        bound = f"lease {lease:g} s + recovery interval {interval:g} s" if other_host else f"recovery interval {interval:g} s (owner pid checked)"
        rep.emit(f"recovery.takeover.{variant}", n=1, runs=runs, samples=takeover, unit="s",
                 lease_seconds=lease, recovery_interval=interval, bound=bound,
                 kill_to_recovered_s=summary(detect)[0], recovered_to_rerun_s=summary(pickup)[0],
                 lease_expiry_to_rerun_s=summary(after_expiry)[0] if other_host else None,
                 note="SIGKILL of the lease holder to the stand-by qcluster's re-run StepAttempt.started_at")


def restart_busy_once(db: str, version, busy_version, count: int, chain: int, fresh: Cluster) -> tuple[float, float]:
    """One restart under load, as recovery_busy and startup time it: a qcluster SIGKILLed
    while it holds t2's lease, ``count`` runs of the ``chain``-node ``busy_version`` started
    meanwhile, then ``fresh`` (not yet started) spawned; waits until every run finished and
    checks them. Returns (the spawn's epoch seconds, t2's second attempt's started_at).

    Raises CheckFailed when a run did not finish as its graph says.
    """
    rid, crashed = _crash_at_fault(db, version)
    try:
        busy = [start_queued(busy_version) for _ in range(count)]
    finally:
        crashed.kill()
    try:
        t0 = fresh.start().started_at
        wait_until(lambda: _attempt(rid, RECOVERY_NODE, 2) is not None, 120, "t2 re-run", cluster=fresh, poll=0.01)
        started = _attempt(rid, RECOVERY_NODE, 2).started_at.timestamp()
        wait_terminal([rid, *busy], cluster=fresh)
    finally:
        fresh.kill()
    _check_recovered(rid)
    for other in busy:
        check_linear(other, chain)
    return t0, started


def case_recovery_busy(rep: Reporter, db: str, n: int | None, runs: int, others: int | None = None, chain: int = 10) -> None:
    """Recovery with other runs in flight (``others``, default 30, each a ``chain``-node
    chain started after the crash, so their steps are due after the interrupted one):

    - restart_busy: SIGKILL the lease holder, start the other runs (their doorbells wait
      in the queue, some in the dead cluster's prefetch), spawn a fresh qcluster; time
      from the spawn to t2's second attempt started_at;
    - takeover.same_host_busy: a stand-by qcluster on the same queue, busy with the other
      runs; time from the SIGKILL of the lease holder to the stand-by's re-run of t2.
    Every run, the interrupted one and the others, is checked to finish correctly.
    """
    from django.conf import settings

    from runs.models import Step

    count = others if others is not None else (n or 30)
    version = graphs.publish(graphs.linear(3))
    busy_version = graphs.publish(graphs.linear(chain))
    interval = settings.BALLAST_RECOVERY_INTERVAL

    def check_others(run_ids: list[int]) -> None:
        for other in run_ids:
            check_linear(other, chain)

    reset_tables()
    rerun = []
    for i in range(runs + 1):  # the first is a warm-up
        t0, started = restart_busy_once(db, version, busy_version, count, chain, Cluster("restarted-busy", db, workers=2))
        if i:
            rerun.append(started - t0)
    rep.emit("recovery.restart_busy", n=count, runs=runs, samples=rerun, unit="s", target_s=1.0, others=count, other_chain=chain,
             recovery_interval=interval,
             note=f"spawn of a fresh qcluster to t2's re-run, {count} other {chain}-node runs started after the crash in flight")

    takeover = []
    for _ in range(runs):
        rid, crashed = _crash_at_fault(db, version)
        standby = Cluster("standby-busy", db, workers=2)
        with standby:
            try:
                standby.wait_ready()
                busy = [start_queued(busy_version) for _ in range(count)]
                time.sleep(interval + 0.3)  # the stand-by is busy; a live lease is never stolen
                check(_attempt(rid, RECOVERY_NODE, 2) is None, "the stand-by stole a live lease")
                t_kill = time.time()
            finally:
                crashed.kill()
            wait_until(lambda rid=rid: _attempt(rid, RECOVERY_NODE, 2) is not None, 120, "takeover", cluster=standby, poll=0.01)
            started = _attempt(rid, RECOVERY_NODE, 2).started_at.timestamp()
            wait_terminal([rid, *busy], cluster=standby)
        _check_recovered(rid)
        check_others(busy)
        check(Step.objects.filter(run_id=rid, node_id=RECOVERY_NODE, status="succeeded").exists(), "t2 did not finish")
        takeover.append(started - t_kill)
    rep.emit("recovery.takeover.same_host_busy", n=count, runs=runs, samples=takeover, unit="s", target_s=1.0, others=count,
             other_chain=chain, recovery_interval=interval,
             note=f"SIGKILL of the lease holder to the busy stand-by's re-run of t2, {count} other {chain}-node runs in flight")


# --------------------------------------------------------------------------- throughput


def case_throughput(rep: Reporter, db: str, n: int | None, runs: int, nodes: int = 5, workers_list: tuple[int, ...] = (1, 2)) -> None:
    """``n`` runs (default 200) of a ``nodes``-transform chain released to the queue at once;
    committed steps per second from the release to the last run's finished_at."""
    from django.db.models import Max

    from bench.core import settings_variant
    from runs.engine import dispatch
    from runs.models import Run, Step

    count = n or 200
    version = graphs.publish(graphs.linear(nodes))
    if settings_variant() != "default":
        workers_list = (1,)  # the what-if: per-task overhead shows with one worker; keeps make bench short
    for workers in workers_list:
        reset_tables()
        samples: list[float] = []
        runs_per_s: list[float] = []
        with Cluster(f"throughput-{workers}", db, workers=workers) as cluster:
            cluster.wait_ready()
            for rep_i in range(runs + 1):  # the first is a warm-up (a smaller batch)
                batch = max(4, count // 20) if rep_i == 0 else count
                run_ids, step_ids = create_held(version, batch)
                t0 = time.time()
                dispatch.enqueue(step_ids)
                wait_terminal(run_ids, cluster=cluster, poll=0.05)
                for rid, state, status in ((r.pk, r.state, r.status) for r in Run.objects.filter(pk__in=run_ids)):
                    check(status == "succeeded" and state.get("i") == nodes, f"run {rid}: {status} i={state.get('i')}")
                committed = Step.objects.filter(run_id__in=run_ids, status="succeeded").count()
                check(committed == batch * (nodes + 2), f"{committed} steps committed, expected {batch * (nodes + 2)}")
                last = Run.objects.filter(pk__in=run_ids).aggregate(m=Max("finished_at"))["m"].timestamp()
                if rep_i:
                    samples.append(committed / (last - t0))
                    runs_per_s.append(batch / (last - t0))
        median = summary(samples)[0]
        rep.emit(f"throughput.workers{workers}", n=count, runs=runs, samples=samples, unit="nodes/s",
                 ratio_to_floor_per_node=(1000 / median) / rep.floor_ms if rep.floor_ms else None,
                 ms_per_node=1000 / median, nodes_per_run=nodes + 2, workers=workers,
                 runs_per_s=summary(runs_per_s)[0], runs_per_s_samples=[round(v, 2) for v in runs_per_s],
                 note=f"{count} runs of {nodes} transforms (+start, end) released to the queue at once; committed steps/s")


# --------------------------------------------------------------------------- approvals at rest


def _clone_waiting_runs(template_id: int, count: int, batch: int = 1000) -> None:
    """Copy the waiting template run ``count`` times, row for row (run, steps, attempts,
    events, approval request), in bulk: the same rows the engine committed, without
    paying 4 node commits per run. Audit entries are not copied: they are hash-chained
    per run (a copy would not verify) and play no part in waiting. A template with no
    approval request (a finished run: bench.webload's history) is copied without one."""
    from django.db import transaction

    from approvals.models import ApprovalRequest
    from runs.models import Run, RunEvent, RunEventCounter, RunStateKey, Step, StepAttempt

    def fields(obj, skip=("id",)):
        return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields if f.attname not in skip}

    run = Run.objects.get(pk=template_id)
    steps = list(Step.objects.filter(run_id=template_id).order_by("id"))
    attempts = list(StepAttempt.objects.filter(step__run_id=template_id).order_by("id"))
    events = list(RunEvent.objects.filter(run_id=template_id).order_by("id"))
    template_seq = run.read_event_seq()
    state_keys = list(RunStateKey.objects.filter(run_id=template_id).order_by("id"))
    approval = ApprovalRequest.objects.filter(run_id=template_id).first()
    done = 0
    while done < count:
        size = min(batch, count - done)
        with transaction.atomic():
            new_runs = []
            for _ in range(size):
                data = fields(run, ("id", "uuid", "idempotency_key"))
                new_runs.append(Run(**data, uuid=uuid.uuid4()))
            Run.objects.bulk_create(new_runs)
            if new_runs[0].pk is None:
                raise CheckFailed("bulk_create returned no primary keys on this database")
            RunStateKey.objects.bulk_create([RunStateKey(**fields(k, ("id", "run_id")), run_id=r.pk) for r in new_runs for k in state_keys])
            new_steps: list[Step] = []
            step_map: list[dict[int, Step]] = []
            for r in new_runs:
                mapping = {}
                for s in steps:
                    data = fields(s, ("id", "run_id", "idempotency_key"))
                    clone = Step(**data, run_id=r.pk, idempotency_key=f"{r.uuid}:{s.node_id}:{s.iteration}")
                    mapping[s.pk] = clone
                    new_steps.append(clone)
                step_map.append(mapping)
            Step.objects.bulk_create(new_steps)
            new_attempts, new_events, new_approvals = [], [], []
            for r, mapping in zip(new_runs, step_map, strict=False):
                for a in attempts:
                    new_attempts.append(StepAttempt(**fields(a, ("id", "step_id")), step_id=mapping[a.step_id].pk))
                for e in events:
                    new_events.append(RunEvent(**fields(e, ("id", "run_id", "step_id")), run_id=r.pk,
                                               step_id=mapping[e.step_id].pk if e.step_id else None))
                if approval is not None:
                    new_approvals.append(ApprovalRequest(**fields(approval, ("id", "run_id", "step_id")), run_id=r.pk,
                                                         step_id=mapping[approval.step_id].pk))
            StepAttempt.objects.bulk_create(new_attempts)
            RunEvent.objects.bulk_create(new_events)
            RunEventCounter.objects.bulk_create([RunEventCounter(run_id=r.pk, last=template_seq) for r in new_runs])
            ApprovalRequest.objects.bulk_create(new_approvals)
        done += size


def _inbox_variants() -> list[tuple[str, str, Any]]:
    """(name, how it is measured, callable returning (total, rows of the first page of 50)).

    Through the REST API when ``/api/v1/approvals/`` exists (Django test client in this
    process: middleware, session auth, DRF, serializer), as a superuser and as a plain
    member of the ``approvers`` group (the inbox most people see), plus the admin view
    ``/api/v1/approvals/all/``; and always the bare ORM query an inbox page needs (count +
    first 50 pending, newest first, with run and graph) as the reference.
    """
    from django.urls import Resolver404, resolve

    from approvals.models import ApprovalRequest

    def orm_page():
        qs = ApprovalRequest.objects.filter(status="pending")
        total = qs.count()
        rows = list(qs.select_related("run__graph_version__graph").order_by("-id")[:50])
        return total, rows

    variants: list[tuple[str, str, Any]] = [
        ("orm", "ORM: count() + first 50 pending by -id with run, version, graph (select_related)", orm_page)
    ]
    try:
        resolve("/api/v1/approvals/")
    except Resolver404:
        variants[0] = ("orm", variants[0][1] + "; /api/v1/approvals/ does not exist yet", orm_page)
        return variants

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    User = get_user_model()
    admin = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser("bench-admin", "admin@localhost", None)
    approver = User.objects.filter(username="bench-approver").first() or User.objects.create_user("bench-approver", "approver@localhost", None)
    approver.groups.add(Group.objects.get_or_create(name="approvers")[0])

    def client_for(user):
        client = Client()
        client.force_login(user)
        return client

    def api_page(client, url):
        def page():
            response = client.get(url, {"status": "pending", "page_size": 50}, HTTP_HOST="127.0.0.1")
            check(response.status_code == 200, f"GET {url}: {response.status_code} {response.content[:200]!r}")
            body = response.json()
            return body["count"], body["results"]

        return page

    variants += [
        ("api.mine.superuser", "GET /api/v1/approvals/ as a superuser (test client, in process)", api_page(client_for(admin), "/api/v1/approvals/")),
        ("api.mine.approver", "GET /api/v1/approvals/ as a member of the approvers group", api_page(client_for(approver), "/api/v1/approvals/")),
    ]
    try:
        resolve("/api/v1/approvals/all/")
        variants.append(("api.all.superuser", "GET /api/v1/approvals/all/ as a superuser (admin view)", api_page(client_for(admin), "/api/v1/approvals/all/")))
    except Resolver404:
        pass
    return variants


def _storage_bytes() -> int | None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT pg_database_size(current_database())")
            return cur.fetchone()[0]
    path = connection.settings_dict["NAME"]
    import os

    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def case_approvals(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """``n`` runs (default 10,000) waiting at approval gates: what they hold at rest
    (leases, running steps, queue entries, worker processes and memory) and the inbox
    page latency; then one is approved and driven to the end (the clones are real)."""
    from approvals.models import ApprovalRequest
    from approvals.services import approval_decide
    from runs.engine import api as engine
    from runs.engine import recovery
    from runs.models import Run, Step

    count = n or 10_000
    version = graphs.publish(graphs.gate())
    reset_tables()
    template, _ = start_inprocess(version, {"name": "Ada"})
    check(Run.objects.get(pk=template).status == "waiting", "the template run is not waiting at its gate")

    # A qcluster's footprint with one waiting run, as the baseline.
    with Cluster("rest-baseline", db, workers=2) as cluster:
        cluster.wait_ready()
        time.sleep(2.0)
        base_procs, base_rss = cluster.rss_kib()
    storage_before = _storage_bytes()

    t0 = time.perf_counter()
    _clone_waiting_runs(template, count - 1)
    created_s = time.perf_counter() - t0
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE")  # as autovacuum would soon: plans for 10,000 rows, not for empty tables
    check(Run.objects.filter(status="waiting").count() == count, "not every run is waiting")
    check(ApprovalRequest.objects.filter(status="pending").count() == count, "not every run has a pending approval")
    storage_after = _storage_bytes()

    with Cluster("rest", db, workers=2) as cluster:
        cluster.wait_ready()
        time.sleep(2.0)  # start-up recovery pass plus a few periodic ones over 10,000 waiting runs
        procs, rss = cluster.rss_kib()
        running = Step.objects.filter(status="running").count()
        leases = Step.objects.exclude(lease_owner="").count()
        from django_q.models import OrmQ

        queued = OrmQ.objects.count()
    check(running == 0 and leases == 0, f"{running} running steps and {leases} leases held by waiting runs")
    check(queued == 0, f"{queued} queue entries for waiting runs")
    rep.emit("approvals.rest", n=count, runs=1, median=float(leases), p95=float(leases), unit="leases",
             running_steps=running, queue_entries=queued, worker_processes=procs, worker_processes_baseline=base_procs,
             worker_rss_mib=rss / 1024, worker_rss_mib_baseline=base_rss / 1024,
             db_bytes_per_waiting_run=((storage_after - storage_before) / (count - 1)) if storage_before and storage_after else None,
             created_in_s=created_s,
             note=f"{count} runs waiting at a gate: rows only; a qcluster (2 workers) over them vs over 1 waiting run")

    # The recovery pass every worker runs periodically must not scan waiting runs.
    samples = []
    for _ in range(runs * 4):
        t = time.perf_counter()
        handed = recovery.recover_once()
        samples.append((time.perf_counter() - t) * 1000)
        check(handed == [], f"recovery handed waiting steps to the queue: {handed[:5]}")
    rep.emit("approvals.recovery_pass", n=count, runs=len(samples), samples=samples, unit="ms",
             note="one recovery pass (expired leases + due pending steps) with the waiting runs in the tables")

    import tracemalloc

    from django.db import connection

    for name, how, page in _inbox_variants():
        queries: list[str] = []  # counted by a wrapper: the request cycle resets connection.queries_log

        def counter(execute, sql, params, many, context, queries=queries):
            queries.append(sql)
            return execute(sql, params, many, context)

        t = time.perf_counter()
        with connection.execute_wrapper(counter):
            page()  # warm-up, counting the statements a page costs
        first = time.perf_counter() - t
        reps = runs * 4 if first < 0.5 else runs  # slow variants: the minimum repetitions
        samples = []
        for _ in range(reps):
            t = time.perf_counter()
            total, rows = page()
            samples.append((time.perf_counter() - t) * 1000)
            check(total == count and len(rows) == 50, f"inbox {name}: total {total}, {len(rows)} rows")
        peak = None
        if first < 8:  # tracemalloc slows a page several times: skip it for the slowest
            tracemalloc.start()
            page()
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        rep.emit(f"approvals.inbox.{name}", n=count, runs=reps, samples=samples, unit="ms/page", measured=how,
                 queries=len(queries), python_peak_mib=peak,
                 note="first page of 50 with the total count, 10,000 pending requests")

    # One clone resumes like a real run.
    request = ApprovalRequest.objects.filter(status="pending").exclude(run_id=template).order_by("id").first()
    with engine.local_mode() as queue:
        approval_decide(approval_id=request.pk, decision="approve", actor="bench")
        engine.drive_local(request.run_id, queue=queue, timeout=60)
    run = Run.objects.get(pk=request.run_id)
    check(run.status == "succeeded" and run.state.get("sent") is True, f"an approved clone ended {run.status} {run.error}")


# --------------------------------------------------------------------------- live latency


def case_live(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """Step commit to WebSocket client: a daphne server (ballast.asgi) and a qcluster in
    subprocesses; the client subscribes to ``ws/runs/<id>/`` with an API token before the
    run is released to the queue, then every event's latency is its receipt time minus its
    row's created_at (the commit, written by the worker). Checks the client got every event
    of the run exactly once, in id order."""
    from ballast.asgi import application

    routes = getattr(application, "application_mapping", {})
    if "websocket" not in routes:
        rep.skip("live", "no WebSocket consumer yet (ballast.asgi routes only http)")
        return
    try:
        from websockets.sync.client import connect
    except ImportError:
        rep.skip("live", "the websockets client is not installed; install the bench extra: .venv/bin/pip install -e '.[bench]'")
        return
    import json as _json
    from datetime import datetime

    from django.contrib.auth import get_user_model

    from accounts.tokens import token_create
    from bench.cluster import WebServer, free_port
    from runs.engine import dispatch
    from runs.models import RunEvent

    size = n or 50
    version = graphs.publish(graphs.linear(size))
    reset_tables()
    User = get_user_model()
    user = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser("bench-admin", "admin@localhost", None)
    _, key = token_create(user=user, name="bench live", by="bench")
    port = free_port()
    latencies: list[float] = []
    per_run_p50: list[float] = []
    with WebServer("live-web", db, port) as web, Cluster("live", db, workers=2) as cluster:
        web.wait_ready()
        cluster.wait_ready()
        for i in range(runs + 1):  # the first is a warm-up
            run_ids, step_ids = create_held(version, 1)
            rid = run_ids[0]
            got: list[tuple[float, dict]] = []
            with connect(f"ws://127.0.0.1:{port}/ws/runs/{rid}/?token={key}", open_timeout=10) as ws:
                first = _json.loads(ws.recv(timeout=10))  # run_created, already committed
                got.append((time.time(), first["event"]))
                released = time.time()
                dispatch.enqueue(step_ids)
                while got[-1][1]["kind"] not in ("run_succeeded", "run_failed", "run_cancelled"):
                    message = _json.loads(ws.recv(timeout=60))
                    got.append((time.time(), message["event"]))
            check_linear(rid, size)
            ids = [e["id"] for _, e in got]
            expected = list(RunEvent.objects.filter(run_id=rid).order_by("id").values_list("id", flat=True))
            check(ids == expected, f"run {rid}: client got {len(ids)} events, the table has {len(expected)} (or out of order)")
            if i:
                lat = [(t - datetime.fromisoformat(e["created_at"]).timestamp()) * 1000 for t, e in got[1:]
                       if datetime.fromisoformat(e["created_at"]).timestamp() >= released]
                latencies += lat
                per_run_p50.append(summary(lat)[0])
    rep.emit("live.ws", n=len(latencies), runs=runs, samples=latencies, unit="ms", nodes_per_run=size + 2,
             per_run_p50_ms=[round(v, 1) for v in per_run_p50], server="daphne ballast.asgi", consumer_poll_s=0.2,
             note="RunEvent created_at (commit, in the worker) to receipt by a WebSocket client; all events of the runs")


# --------------------------------------------------------------------------- state size


def _wal_lsn() -> str | None:
    """PostgreSQL's current WAL position (None on SQLite). Server-wide: other sessions'
    writes count too, so the case keeps the smallest difference of its repetitions."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cur:
        cur.execute("SELECT pg_current_wal_lsn()::text")
        return cur.fetchone()[0]


def _wal_since(lsn: str | None) -> int | None:
    from django.db import connection

    if lsn is None:
        return None
    with connection.cursor() as cur:
        cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint", [lsn])
        return int(cur.fetchone()[0])


def check_state_chain(run_id: int, n: int, blob_items: int) -> None:
    """The chain succeeded with ``i == n`` and the untouched ``blob`` intact."""
    from runs.models import Run

    run = Run.objects.get(pk=run_id)
    check(run.status == "succeeded", f"run {run_id}: {run.status} {run.error}")
    check(run.state.get("i") == n, f"run {run_id}: i={run.state.get('i')!r}, expected {n}")
    blob = run.state.get("blob")
    check(isinstance(blob, list) and len(blob) == blob_items, f"run {run_id}: blob changed")


def case_state_size(rep: Reporter, db: str, n: int | None, runs: int, sizes: tuple[int, ...] = (1024, 1024 * 1024)) -> dict[str, float]:
    """Per-node cost of a chain whose state holds a key no node writes, 1 KB against 1 MB.

    Per node = the slope between a short and a long chain (median wall time of each),
    so the once-per-run costs (creating the run with its initial state, the end step)
    do not count as per-node costs. Every round runs all four chains (two lengths, two
    state sizes) in a rotated order, so a load spike on the machine falls on all of
    them alike. WAL bytes per node (PostgreSQL) are the same slope over
    pg_current_wal_lsn() differences, taking the smallest of each chain's repetitions
    (the WAL position is server-wide: other sessions' writes only add)."""
    long_n = n or 60
    short_n = max(2, long_n // 6)
    reset_tables()
    chains = [(size, length) for size in sizes for length in (short_n, long_n)]
    versions = {c: graphs.publish(graphs.state_chain(c[1], c[0])) for c in chains}
    items = {c: len(v.spec["state"]["blob"]["default"]) for c, v in versions.items()}
    for c, version in versions.items():  # warm-up: compiled graphs, connections
        rid, _ = start_inprocess(version)
        check_state_chain(rid, c[1], items[c])
    seconds: dict[tuple[int, int], list[float]] = {c: [] for c in chains}
    wal: dict[tuple[int, int], list[int]] = {c: [] for c in chains}
    for round_ in range(runs):
        for c in chains[round_ % len(chains):] + chains[: round_ % len(chains)]:
            lsn = _wal_lsn()
            rid, elapsed = start_inprocess(versions[c])
            written = _wal_since(lsn)
            check_state_chain(rid, c[1], items[c])
            seconds[c].append(elapsed)
            if written is not None:
                wal[c].append(written)
    figures: dict[str, float] = {}
    for size in sizes:
        short, long_ = seconds[(size, short_n)], seconds[(size, long_n)]
        per_node = [(b - a) * 1000 / (long_n - short_n) for a, b in zip(sorted(short), sorted(long_), strict=True)]
        extra: dict[str, Any] = {"state_bytes": size, "chains": [short_n, long_n], "ms_per_node_wall": summary([x * 1000 / long_n for x in long_])[0]}
        if wal[(size, long_n)]:
            extra["wal_bytes_per_node"] = round((min(wal[(size, long_n)]) - min(wal[(size, short_n)])) / (long_n - short_n))
        label = "1kb" if size < 1024 * 1024 else "1mb"
        line = rep.emit(f"statesize.{label}", n=long_n, runs=runs, samples=per_node, unit="ms/node", per_commit=1,
                        note="slope of run wall time between a short and a long in-process chain; one small key written per node", **extra)
        figures[label] = line["median"]
    if len(figures) == 2 and figures["1kb"]:
        rep.emit("statesize.ratio", n=long_n, runs=runs, median=figures["1mb"] / figures["1kb"], unit="x", target=1.3,
                 note="per-node cost with a 1 MB state / with a 1 KB state (target at most 1.3)")
    return figures
