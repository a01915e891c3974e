"""The qcluster's main process: signals, a graceful stop bounded by a grace period, and the hand-back of in-flight leases.

django-q2 stops cleanly only when SIGTERM reaches its main process alone: sent to the
whole process group (systemd's default KillMode, ``kill -TERM -PGID``, a container
runtime) it kills the sentinel in the middle of the stop and the main process hangs
(TRAPS.md), and it kills the workers in the middle of their steps. So here:

- the sentinel blocks SIGTERM, and its children (workers, monitor, pusher) catch it with
  a handler that only notes it: a signal to the group stops the cluster exactly as one
  to the main process does. The handler is a Python one on purpose: exec() resets it,
  so a program a tool starts still dies of SIGTERM as usual;
- the main process turns SIGTERM or SIGINT into django-q2's orderly stop (no more pulls;
  workers claim nothing more, finish every step in hand, on each of their step threads,
  and hand back the successors their commits kept for them, see loop.execute_due) and
  gives it ``BALLAST_STOP_GRACE_SECONDS``;
- past the grace period it SIGKILLs its descendants and runs a recovery pass at once:
  their leases are taken back now (the owners are dead processes on this host), each
  interrupted step re-queued with the same idempotency key, or parked for a person when
  it is not safe to repeat, rather than waiting for the leases to expire.

Database connections and the fork. django-q2 forks (never spawns) its sentinel from
the main process, and the workers, monitor and pusher from the sentinel. A connection
open in the forking thread would be shared by parent and child, one socket (or one
SQLite file handle) used by two processes, and a child that closed it would end the
parent's session (psycopg sends Terminate). So no connection crosses a fork: right
before each fork in the main process and the sentinel, the forking thread closes its
connections (runs.engine.store.connections.close_before_fork; django-q2's sentinel also does so before it
spawns, the main process did not). Connections of other threads are never reachable
from the child (Django's are thread-local, and the forked child has only the forking
thread); their sockets are inherited as descriptors that the child never reads or
writes, and psycopg does not close a connection that another process opened when it is
garbage-collected. The supervisor thread opens its first connection only after the
sentinel exists (recovery.Supervisor).

Then the sentinel, workers, monitor and pusher keep their connections
(:func:`_keep_connections`): django-q2 calls ``close_old_connections()`` before every
task and on every ORM broker call, which with the project's ``CONN_MAX_AGE=0`` (right
for the web processes under ASGI) meant a new database connection per task, per queue
poll and per sentinel status save, and a new prepared commit statement per task. In
those processes only, ``CONN_MAX_AGE`` becomes
``BALLAST_WORKER_CONN_MAX_AGE`` (default 600 s) with health checks on, so a connection
the server dropped is replaced before a task uses it. A process a worker forks itself
(the expression sandbox) inherits the worker's open connection as a descriptor it never
uses, as it did before.
"""
from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import time
from types import FrameType

import psutil
from django.conf import settings

from core import log_context, metrics
from runs import nodes, tools
from runs.engine import dispatch, loop, recovery, threads, workers
from runs.engine.store import connections, events, recovery_queries

log = logging.getLogger("ballast.worker")

# The log line each worker process writes once its claim at start is over
# (_claim_at_start).
WORKER_READY = "worker ready"

# Of the grace period, the part kept for killing the workers, the hand-back pass and the
# exit (about 1-2 s on a loaded 2-core machine); in-flight steps get the rest, and at
# least half of it.
STOP_RESERVE_SECONDS = 2.0


def _note_stop(signum: int, frame: FrameType | None) -> None:
    workers.note_stop()


def _keep_connections() -> None:
    """In the sentinel, a worker, the monitor or the pusher (this process only), let
    database connections live for ``BALLAST_WORKER_CONN_MAX_AGE`` seconds (None: for the
    process's lifetime) with health checks (see the module docstring)."""
    connections.keep_for(settings.BALLAST_WORKER_CONN_MAX_AGE)


def _after_fork_in_child(main_pid: int) -> None:
    """Set a forked process's SIGTERM disposition by its distance from the main process;
    the sentinel, workers, monitor and pusher keep their database connections
    (:func:`_keep_connections`)."""
    parent = os.getppid()
    if parent == main_pid:
        # The sentinel: it resets SIGTERM to the default action itself (django-q2), and
        # dying of it mid-stop is what hangs the main process. A blocked signal stays
        # blocked whatever handler is set, and a fork drops the pending ones.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        _keep_connections()  # its forks close them first (connections.close_before_fork)
        return
    try:
        grandparent = psutil.Process(parent).ppid()
    except psutil.Error:
        grandparent = -1
    if grandparent == main_pid:  # a worker, the monitor or the pusher
        signal.signal(signal.SIGTERM, _note_stop)
        _keep_connections()
        # Its log lines name it, in steps and between them (core.log_context).
        log_context.bind_process(worker=workers.current_worker())
        events.warm_push()  # the push path is ready before this process's first commit
    else:  # anything a worker forks is not ours to shield
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _tell_workers() -> None:
    """SIGTERM the sentinel's children (workers, monitor, pusher): their handler notes it,
    so a worker hands back the successors it would otherwise run before it stops."""
    for sentinel in psutil.Process().children():
        try:
            for proc in sentinel.children():
                proc.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            continue


def _kill(proc: psutil.Process) -> None:
    try:
        proc.kill()
    except psutil.NoSuchProcess:
        pass


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _take_back_at_start() -> list[int]:
    """In the main process, before the sentinel is forked: hand back the steps of dead
    lease owners on this host (and expired leases) now, so that the first worker to
    start finds them due (:func:`_claim_at_start`) instead of waiting for the supervisor's
    first pass, which starts only once the sentinel exists. Closes its connections (none
    may cross the fork). Never raises: the supervisor's passes retry."""
    try:
        taken = recovery.take_back()
        if taken:
            log.info("cluster start: step(s) %s of dead workers handed back", taken[:20])
        return taken
    except Exception:
        log.exception("start-up take-back failed; the supervisor's pass will retry")
        return []
    finally:
        connections.close_all()


def _claim_at_start() -> None:
    """In each django-q2 worker process as it starts (dispatch.on_worker_start): answer
    one doorbell of our own, claiming the steps due longest (loop.execute_due), before
    the worker reads its first queue message. A restarted cluster's first step runs
    without waiting for the pusher's first pull and the broker's hand-off; the queue's
    doorbells for those steps find nothing due later and do nothing. Never raises (a
    failure here must not kill the worker: the queue's doorbells still come)."""
    try:
        loop.execute_due(0)
    except Exception:
        log.exception("claim at worker start failed; the queue's doorbells will retry")
        connections.close_all()
    else:
        _warm_up()
        # One line per worker process start (tests wait for it: from here on the worker
        # takes work only from its queue's doorbells).
        log.info("%s: worker %s took the due steps at its start", WORKER_READY, workers.current_worker())


def _warm_up() -> None:
    """Import every node kind and tool module now, after the claim at start (which must
    not wait for it) and before the worker reads its first doorbell. Why: the first step
    a worker process ran paid those imports (about 0.7 s idle, 2-3 s on a loaded
    machine), and that first step is often a takeover: in the chaos suite a host idle
    since its start took over a cut host's step 2-2.5 s later than a warm one. Never
    raises: a module that fails to import fails its step later, as before."""
    try:
        nodes.all_kinds()
        tools.all_tools()
    except Exception:
        log.warning("warm-up at worker start: a node kind or tool module failed to import", exc_info=True)


def hand_back(me: psutil.Process | None = None) -> list[int]:
    """SIGKILL every descendant of this process, wait for them, and take their leases back
    at once through a recovery pass (the supervisor thread's own pass may get there
    first). Returns the ids of the steps the killed processes held."""
    me = me or psutil.Process()
    children = me.children(recursive=True)
    owners = [workers.worker_id(child.pid) for child in children]
    held = recovery_queries.steps_leased_to(owners)
    # The sentinel first, so it cannot start a new worker for one killed before it; then
    # everything below it, looked up again for the same reason.
    for child in me.children():
        _kill(child)
    for child in children + me.children(recursive=True):
        _kill(child)
    # Gone, or a zombie (it holds nothing; owner_is_dead counts it as dead): a killed
    # worker is the sentinel's child, and nobody may reap it soon.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(_running(child) for child in children):
        time.sleep(0.01)
    try:
        recovery.recover_once()
    finally:
        connections.close_all()
    return held


def serve(*, grace_seconds: float | None = None, run_once: bool = False) -> int:
    """Run a django-q2 cluster in this process until SIGTERM or SIGINT; return an exit code.

    On the signal, the cluster stops in order and in-flight steps may finish for
    ``grace_seconds`` (default ``BALLAST_STOP_GRACE_SECONDS``) less STOP_RESERVE_SECONDS;
    after that the workers are killed and their steps handed back (:func:`hand_back`),
    so that the process is gone within the grace period. Exit code 0 for a stop
    on request, 1 when the sentinel died on its own. ``run_once``: start, then stop at
    once (django-q2's ``--run-once``).
    """
    grace = settings.BALLAST_STOP_GRACE_SECONDS if grace_seconds is None else grace_seconds
    main_pid = os.getpid()
    # Only appended to by the handler: a handler that took a lock the interrupted main
    # thread holds (an Event's) would deadlock it.
    signals: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals.append(signal.Signals(signum).name)

    metrics_dir = metrics.multiprocess_dir()
    if metrics_dir:
        # This host's metrics from an earlier start are not added to this one's.
        metrics.clean_dead_processes(metrics_dir)
    os.register_at_fork(before=functools.partial(connections.close_before_fork, main_pid), after_in_child=functools.partial(_after_fork_in_child, main_pid))
    dispatch.on_worker_start(_claim_at_start)
    # A stopped or cut-off host's half-done commit must not hold the rows its takeover
    # needs for longer than it takes to find the host silent (connections.bound_idle_transactions).
    connections.bound_idle_transactions(settings.BALLAST_HOST_SILENT_SECONDS)
    _take_back_at_start()
    cluster = dispatch.QueueCluster()
    # Installed after django-q2's own handlers (set in QueueCluster()), to replace them.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cluster.start()
    # A slot is a step thread: each worker process runs up to that many steps at once.
    metrics.WORKER_SLOTS.set(int(str(settings.Q_CLUSTER.get("workers") or 0)) * threads.step_threads())
    # The host's endpoint, started after the sentinel's fork so no child holds its socket.
    metrics_server = metrics.serve_host(settings.BALLAST_METRICS_ADDRESS, settings.BALLAST_METRICS_PORT) if settings.BALLAST_METRICS_PORT else None
    if run_once:
        signals.append("run-once")
    while not signals:
        time.sleep(0.2)
        if not signals and not cluster.alive:
            log.error("the cluster's sentinel exited on its own; stopping")
            recovery.stop_supervisor()
            _stop_metrics(metrics_server)
            return 1
    window = max(grace - STOP_RESERVE_SECONDS, grace / 2)
    log.info("%s: stopping; in-flight steps have %.1fs to finish (grace period %gs)", signals[0], window, grace)
    began = time.monotonic()
    stopped = threading.Event()
    _tell_workers()  # a SIGTERM to the main pid alone: the workers learn it from us

    def enforce_grace() -> None:
        if stopped.wait(window):
            return
        handed = hand_back()
        log.warning("grace period of %gs over: workers killed, their step(s) %s handed back", grace, handed[:20])

    watchdog = threading.Thread(target=enforce_grace, name="ballast-stop-grace", daemon=True)
    watchdog.start()
    cluster.stop()
    stopped.set()
    watchdog.join()
    recovery.stop_supervisor()  # deregisters this cluster (its Worker row) now, not at exit
    _stop_metrics(metrics_server)
    log.info("cluster stopped in %.1fs", time.monotonic() - began)
    return 0


def _stop_metrics(server: object) -> None:
    """This cluster's slots are gone; its metrics endpoint (if any) stops."""
    metrics.WORKER_SLOTS.set(0)
    if server is not None:
        server.shutdown()  # type: ignore[attr-defined]  # prometheus-client's ThreadingWSGIServer
