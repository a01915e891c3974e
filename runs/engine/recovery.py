"""Recovery: expired leases and orphaned pending steps go back to the queue.

Runs on worker start and then every BALLAST_RECOVERY_INTERVAL seconds in a supervisor
thread of the qcluster's main process. A lease is taken back when it expired, or at once
when its owner was a process on this host that no longer exists; a live worker's lease
is never stolen. Recovery rings doorbells (runs.engine.dispatch); it never executes in
place (DBOS does the same). A step taken back keeps its place in the due order, so the
next doorbell any worker answers runs it first, ahead of work that became due later.
"""
from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import select
import threading
import time
from collections.abc import Callable
from datetime import datetime

from django.conf import settings

from runs.engine import dispatch, sources
from runs.engine.store import clock, connections, recovery_queries
from runs.engine.workers import HOST, current_worker, owner_is_alive_here, owner_is_dead

log = logging.getLogger("ballast.recovery")

# A dispatched step still pending after this long lost its queue entry (Redis broker
# drops a task whose worker was killed); re-dispatching a live one is harmless.
STALE_DISPATCH_SECONDS = 30.0


def take_back(*, ring: bool = False) -> list[int]:
    """Hand back, once each, the running steps whose lease expired or whose owner process
    on this host is dead (compare-and-set; a live lease is never taken). Returns the ids
    now pending again, each in the due place it had. ``ring``: ring each one's doorbell
    the moment its take-back commits; otherwise none (the caller does, or a worker claims
    them by due order; the qcluster's start-up take-back must touch no broker before
    django-q2's fork)."""
    me = current_worker()
    dead = owner_dead_predicate()
    alive = owner_alive_predicate()
    ids: list[int] = []
    for step_id in recovery_queries.expired_step_ids(dead, owner_is_alive=alive):
        taken = recovery_queries.step_recover(step_id, recovered_by=me, owner_is_dead=dead, owner_is_alive=alive)
        if ring:
            # At once, not at the end of the pass: the rest of the pass (other take-backs,
            # the re-dispatch scan's row updates) can wait on row locks a cut host's
            # backend still holds, and a taken-over step should not wait behind them.
            dispatch.enqueue(taken)
        ids += taken
    return ids


def owner_dead_predicate() -> Callable[[str], bool]:
    """``(lease owner) -> bool``: certainly dead. A process on this host that no longer
    exists (workers.owner_is_dead), or any process of a host whose heartbeat is silent
    (recovery_queries.silent_hosts, on the database's clock: a host SIGKILLed, cut off
    or stopped is found in seconds, not when its leases expire). One query."""
    silent = recovery_queries.silent_hosts(HOST, silent_seconds=settings.BALLAST_HOST_SILENT_SECONDS)
    if not silent:
        return owner_is_dead
    return lambda owner: owner_is_dead(owner) or owner.rsplit(":", 2)[0] in silent


def owner_alive_predicate() -> Callable[[str], bool]:
    """``(lease owner) -> bool``: certainly alive, so its lapsed lease gets the live-owner
    grace (recovery_queries.lease_lapsed). A process on this host that runs now
    (workers.owner_is_alive_here), or a process of another host whose heartbeat is fresh
    on the database's clock (recovery_queries.beating_hosts): its main process beats, so
    a lease it let lapse is late (a step holding its worker's GIL), not lost. Only a fresh
    beat earns the grace: a host whose network is cut stops beating, and its steps are
    taken over once it is silent, not a grace period later. One query."""
    beating = recovery_queries.beating_hosts(silent_seconds=settings.BALLAST_HOST_SILENT_SECONDS) - {HOST}
    if not beating:
        return owner_is_alive_here
    return lambda owner: owner_is_alive_here(owner) or owner.rsplit(":", 2)[0] in beating


class BrokerWatch:
    """What the supervisor knows of the broker between passes: the incarnation that
    answered last (dispatch.broker_incarnation) and whether it stopped answering since."""

    def __init__(self) -> None:
        self.last: str | None = None
        self.lost = False

    def back(self) -> bool:
        """Whether the broker answers now after not answering, or answers as a new
        incarnation (a restarted Redis: its queue is gone), since the last call: the
        doorbells it held or refused may be lost. One broker round trip."""
        now = dispatch.broker_incarnation()
        if now is None:
            self.lost = True
            return False
        back = self.lost or (self.last is not None and now != self.last)
        self.last, self.lost = now, False
        return back


_broker_watch = BrokerWatch()


class SourceBell:
    """Rings a doorbell when a registered due source has a row due (runs.engine.sources),
    so an idle cluster wakes for a schedule's tick as it does for an approval's deadline.

    Once per due time and source in this process, again after STALE_DISPATCH_SECONDS
    if that row is still due then (its doorbell was lost, or every worker was busy): a
    second doorbell for one tick is harmless (the claim finds nothing due) but a doorbell
    per pass per cluster would fill the queue while workers are busy."""

    def __init__(self) -> None:
        self._rung: dict[str, tuple[datetime, float]] = {}  # source -> (due time rung for, monotonic when)

    def ring(self, now: datetime) -> bool:
        """Ring one doorbell if any source has a row due at ``now`` not rung for; True when rung."""
        owed = False
        for source in sources.registered():
            due = source.earliest_due(now)
            if due is None:
                self._rung.pop(source.name, None)
                continue
            last = self._rung.get(source.name)
            if last is None or last[0] != due or time.monotonic() - last[1] >= STALE_DISPATCH_SECONDS:
                self._rung[source.name] = (due, time.monotonic())
                owed = True
        if owed:
            dispatch.enqueue([sources.DOORBELL_HINT])
        return owed


_source_bell = SourceBell()


def recover_once(*, on_start: bool = False) -> list[int]:
    """One recovery pass. Returns the step ids whose doorbells it rang (each once).

    Each running step whose lease expired or whose owner process on this host is dead is
    handed back once (a compare-and-set: a second pass, or a second supervisor, finds it
    pending and does nothing), its doorbell rung as soon as that commits (take_back), and
    keeps its place in the due order. Pending steps whose
    backoff ended or whose hand-off went stale are released. ``on_start``, when a
    cluster died, or when the broker answers again after an outage or a restart
    (:class:`BrokerWatch`): the doorbells the queue may have lost (a dead cluster's
    prefetched entries, a restarted broker's queue, doorbells it refused) are made up by count, one per due step no waiting
    doorbell accounts for, never one per pending step: any doorbell claims the oldest due
    step, so which entries were lost does not matter, and the dead cluster's entries, when
    the broker delivers them again, find nothing due and do nothing.
    """
    ids = take_back(ring=True)
    rung = set(ids)
    dead = recovery_queries.workers_forget_dead(owner_is_dead, silent_seconds=max(STALE_DISPATCH_SECONDS, 10 * settings.BALLAST_RECOVERY_INTERVAL))
    if dead:
        log.warning("cluster(s) %s died: making up the doorbells their queue entries held", dead)
    taken_back = len(ids)
    ids += recovery_queries.due_pending_steps(stale_seconds=STALE_DISPATCH_SECONDS)
    ids = list(dict.fromkeys(ids))  # a step just taken back is pending too: ring for it once
    broker_back = _broker_watch.back()
    if broker_back and not on_start:
        log.warning("the queue broker answers again (or restarted): making up the doorbells it may have lost")
    if on_start or dead or broker_back:
        missing = recovery_queries.due_count() - dispatch.queued() - len(ids)
        if missing > 0:
            ids += recovery_queries.due_step_ids(limit=missing, exclude=ids)
    dispatch.enqueue([step_id for step_id in ids if step_id not in rung])
    _source_bell.ring(clock.now())
    # Each step taken back was logged once by step_recover; a re-dispatch repeats every
    # STALE_DISPATCH_SECONDS for a step nobody claims, so it is a count (INFO only on a
    # cluster start or death), never the ids again.
    redispatched = len(ids) - taken_back
    if redispatched:
        level = logging.INFO if on_start or dead or broker_back else logging.DEBUG
        why = " (cluster start)" if on_start else (" (a cluster died)" if dead else (" (broker back)" if broker_back else ""))
        log.log(level, "recovery rang %d doorbell(s) for pending step(s)%s", redispatched, why)
    return ids


class DeathWatch:
    """Wakes the supervisor the moment a watched process on this host exits, without
    polling: one pidfd per process (Linux ``pidfd_open``; a pidfd becomes readable when
    its process terminates), waited on with ``select`` together with a wake-up pipe.

    Where ``os.pidfd_open`` is missing (not Linux, a kernel before 5.3) or fails, the
    wait is a plain sleep of the recovery interval, as before: detection then takes up
    to that interval. A pid that exits is remembered as dead and not watched again
    until it drops out of the watched set (so a zombie's readable pidfd cannot spin the
    loop).
    """

    def __init__(self) -> None:
        self._fds: dict[int, int] = {}
        self._dead: set[int] = set()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)

    @staticmethod
    def supported() -> bool:
        """Whether this platform has pidfds."""
        return hasattr(os, "pidfd_open")

    def watch(self, pids: set[int]) -> None:
        """Watch exactly ``pids`` from now on (this process is never watched)."""
        pids = pids - {os.getpid()}
        self._dead &= pids
        for pid in list(self._fds):
            if pid not in pids:
                os.close(self._fds.pop(pid))
        if not self.supported():
            return
        for pid in pids - set(self._fds) - self._dead:
            try:
                self._fds[pid] = os.pidfd_open(pid)
            except OSError:  # already gone (the next pass sees it), or no permission
                continue

    def wait(self, timeout: float) -> list[int]:
        """Block until a watched process exits, :meth:`wake` is called, or ``timeout``
        seconds pass; returns the pids that exited (their pidfds are closed)."""
        try:
            ready, _, _ = select.select([self._wake_r, *self._fds.values()], [], [], timeout)
        except (OSError, ValueError):  # a closed descriptor: sleep instead of spinning
            time.sleep(timeout)
            return []
        if self._wake_r in ready:
            try:
                while os.read(self._wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        exited = [pid for pid, fd in self._fds.items() if fd in ready]
        for pid in exited:
            os.close(self._fds.pop(pid))
            self._dead.add(pid)
        return exited

    def wake(self) -> None:
        """Make a pending or the next :meth:`wait` return at once (any thread)."""
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


# After a watched process exits, how long the supervisor waits before its pass, so that
# the rest of a process group killed at once (a cluster's sentinel and workers) is gone
# too and one pass takes all their steps back.
DEATH_SETTLE_SECONDS = 0.01


class Supervisor(threading.Thread):
    """The qcluster's recovery and liveness thread (heartbeat row + recovery passes).

    Passes run every BALLAST_RECOVERY_INTERVAL seconds, and at once when a process on
    this host that holds a lease, or another cluster's main process on this host, exits
    (:class:`DeathWatch`): a dead same-host worker's step is taken back within
    milliseconds of its death, not up to an interval later. Lease owners on other hosts
    cannot be watched: their leases expire (BALLAST_LEASE_SECONDS).
    """

    def __init__(self, *, wait_for_children: bool = True):
        super().__init__(name="ballast-supervisor", daemon=True)
        self.wait_for_children = wait_for_children
        self.stop_event = threading.Event()
        self.deaths = DeathWatch()

    def stop(self) -> None:
        """Ask the thread to stop (it deletes its Worker row on the way out)."""
        self.stop_event.set()
        self.deaths.wake()

    def run(self) -> None:
        if self.wait_for_children:
            # django-q2 forks its sentinel from this process: touch no database
            # connection before that fork, or the child would share our socket.
            # A process stopped before it forked (an import probe, a refused start) ends
            # this wait at once rather than keeping its exit waiting for the join.
            # Relative sleeps, not stop_event.wait(0.02): under libfaketime (the chaos
            # suite's skewed host) a timed Event.wait lasts the skew longer (HostBeat.run).
            deadline = time.monotonic() + 30
            while not multiprocessing.active_children() and time.monotonic() < deadline and not self.stop_event.is_set():
                time.sleep(0.02)
            if self.stop_event.is_set():
                self.deaths.close()
                return
        name = current_worker()
        started = clock.now()
        first = True
        interval = settings.BALLAST_RECOVERY_INTERVAL
        next_beat = 0.0
        failing = False
        while not self.stop_event.is_set():
            try:
                now = time.monotonic()
                if now >= next_beat:  # a pass woken by a death does not beat again
                    # The next pass is an interval away even when this beat fails: set
                    # after the beat, a failing beat (database unreachable, its network
                    # cut) left next_beat in the past, so the wait below returned at once
                    # and the thread retried and logged a traceback as fast as
                    # connections failed.
                    next_beat = now + interval
                    recovery_queries.worker_heartbeat(name, HOST, os.getpid(), started)
                recover_once(on_start=first)
                first = False
                self.deaths.watch(recovery_queries.pids_to_watch(HOST))
                if failing:
                    log.warning("recovery passes succeed again")
                failing = False
            except Exception:
                # One traceback per outage, not one per interval.
                if not failing:
                    log.exception("recovery pass failed (retried every %.1fs)", interval)
                failing = True
                connections.close_all()
            if self.stop_event.is_set():
                break
            if self.deaths.wait(max(0.0, next_beat - time.monotonic())):
                self.stop_event.wait(DEATH_SETTLE_SECONDS)
        self.deaths.close()
        try:
            recovery_queries.worker_remove(name)
        finally:
            connections.close_all()


class HostBeat(threading.Thread):
    """The host heartbeat (runs.models.HostHeartbeat), a thread of the qcluster's main
    process: that process runs no node code, so a worker whose step holds the GIL for a
    minute, or a machine at load 8, does not silence it; a host whose process tree was
    killed, whose network is cut or that is stopped does.

    Every BALLAST_HOST_SILENT_SECONDS / 6 seconds (0.5 s by default) it upserts this
    host's row, stamped with the database's clock, then asks which other hosts fell
    silent; when one of them holds a lease it wakes ``supervisor`` for a recovery pass at
    once (recovery.take_back takes those leases back). On PostgreSQL only: SQLite is one
    host, where the process watch (:class:`DeathWatch`) finds a dead worker sooner.
    """

    def __init__(self, supervisor: Supervisor | None, *, wait_for_children: bool = True):
        super().__init__(name="ballast-host-beat", daemon=True)
        self.supervisor = supervisor
        self.wait_for_children = wait_for_children
        self.stop_event = threading.Event()

    def stop(self) -> None:
        """Ask the thread to stop (it deletes this host's row on the way out)."""
        self.stop_event.set()

    def beat_once(self) -> bool:
        """One beat and one look at the other hosts; returns whether a silent host holds
        a lease (the supervisor was woken)."""
        silent_seconds = settings.BALLAST_HOST_SILENT_SECONDS
        recovery_queries.host_beat(HOST, silent_seconds=silent_seconds)
        silent = recovery_queries.silent_hosts(HOST, silent_seconds=silent_seconds)
        if recovery_queries.hosts_hold_leases(silent):
            if self.supervisor is not None:
                self.supervisor.deaths.wake()
            return True
        return False

    def run(self) -> None:
        if self.wait_for_children:  # no connection before django-q2's fork (Supervisor.run)
            deadline = time.monotonic() + 30
            while not multiprocessing.active_children() and time.monotonic() < deadline and not self.stop_event.is_set():
                time.sleep(0.02)  # relative sleeps (faketime: see below)
            if self.stop_event.is_set():
                return
        interval = max(0.1, settings.BALLAST_HOST_SILENT_SECONDS / 6)
        failing = False
        while not self.stop_event.is_set():
            began = time.monotonic()
            try:
                self.beat_once()
                if failing:
                    log.warning("host heartbeat written again")
                failing = False
            except Exception:
                if not failing:
                    log.exception("host heartbeat failed (retried every %.1fs)", interval)
                failing = True
                connections.close_all()  # this thread's: the next beat reconnects
            # A relative sleep, not stop_event.wait: under libfaketime (the chaos suite's
            # skewed host) an absolute-deadline wait lasts the skew longer, which silenced
            # the beat of a live host for a minute.
            time.sleep(max(0.0, interval - (time.monotonic() - began)))
        try:
            recovery_queries.host_forget(HOST)
        except Exception:
            log.warning("host heartbeat row not deleted at stop: it falls silent instead", exc_info=True)
        finally:
            connections.close_all()


_supervisor: Supervisor | None = None
_host_beat: HostBeat | None = None


def start_supervisor() -> Supervisor:
    """Start the supervisor thread once per process, and on PostgreSQL the host
    heartbeat thread (:class:`HostBeat`) beside it."""
    global _supervisor, _host_beat
    if _supervisor is None or not _supervisor.is_alive():
        _supervisor = Supervisor()
        _supervisor.start()
        if connections.is_postgresql() and (_host_beat is None or not _host_beat.is_alive()):
            _host_beat = HostBeat(_supervisor)
            _host_beat.start()
        atexit.register(_stop_supervisor_at_exit)
    return _supervisor


def _stop_supervisor_at_exit() -> None:
    """Deregister a cluster that stops cleanly: join the cluster's children, then stop the
    supervisor (it deletes the Worker row)."""
    for child in multiprocessing.active_children():
        child.join()
    stop_supervisor()


def stop_supervisor() -> None:
    """Stop this process's supervisor thread, which deletes its Worker row; idempotent."""
    supervisor, beat = _supervisor, _host_beat
    if beat is not None and beat.is_alive():
        beat.stop()
    if supervisor is not None and supervisor.is_alive():
        supervisor.stop()
        supervisor.join(timeout=10)
    if beat is not None:
        beat.join(timeout=10)


def is_cluster_main_process(argv: list[str]) -> bool:
    """Whether this process is ``manage.py qcluster``'s main process (not a forked child)."""
    return len(argv) > 1 and argv[1] == "qcluster" and multiprocessing.parent_process() is None

