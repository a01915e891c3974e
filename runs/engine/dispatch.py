"""Queue hand-off: the only django_q import. The queue is a doorbell; the database is the truth.

Each queue entry is a doorbell: one is rung per step that became due, and the worker
that takes it claims the step that has been due longest (loop.step_claim_due), not the
step the entry names (the id is a hint for logs). So the broker's order (django-q2's ORM
broker takes rows in no order on PostgreSQL), a duplicate delivery (finds nothing due,
does nothing) and a lost entry (another doorbell or recovery's deficit count rings for
it) cannot reorder, repeat or strand work. In-process mode (run_graph without a live
qcluster, tests) keeps the same hand-off into a local deque, claiming the named step.

Long steps and django-q2's limits: a doorbell task lasts as long as the chain of steps
it runs (an LLM call, a slow tool: minutes, hours). django-q2 kills a task after
``Q_CLUSTER["timeout"]`` seconds and re-delivers a task not acknowledged after
``retry`` seconds; Ballast sets ``max_attempts`` 1, ``timeout`` < ``retry`` (settings) and
never relies on either: a killed worker's step is taken back by recovery through its
lease (heartbeats extend it every BALLAST_LEASE_SECONDS / 3 while the step runs, so a
long step keeps its lease however long it takes), and a re-delivered doorbell claims
whatever is due, or nothing. A node that may run longer than ``timeout`` must set its
own ``timeout_seconds`` below it, or the deployment raises BALLAST_Q_TIMEOUT (and
BALLAST_Q_RETRY above it).

A broker that does not answer (Redis down or restarting): a doorbell is rung only after
the commit that made its step due, and that committed row (pending, due) is the record
that the doorbell is owed. So a refused doorbell is never an error for the caller (the
step's commit, ``run_start``, the API, the CLI: what they committed stands): the
process keeps it and rings it again as soon as the broker answers (:class:`_Ringer`,
every 0.1-1 s), the qcluster's supervisor makes up by count every doorbell a broker
outage or restart may have lost (runs.engine.recovery, :func:`broker_incarnation`), and
should the process die first, recovery rings for the step when its hand-off goes stale.
The pusher of a cluster on the Redis broker waits out an outage and pulls again as soon
as Redis answers (:class:`RedisBroker`) instead of django-q2's sleep of 10 s and restart.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

# The in-process queue of local_mode(): a context variable, not a thread-local, so the
# threads that run a drive's steps concurrently (runs.engine.loop, started in a copy of
# the driving thread's context) hand their successors to the same deque.
_local_queue: contextvars.ContextVar[deque[int] | None] = contextvars.ContextVar("ballast_local_queue", default=None)
_local_lock = threading.Lock()  # the deque's membership test and removal (taken) against appends
log = logging.getLogger("ballast.dispatch")


def enqueue(step_ids: Iterable[int]) -> None:
    """Ring one doorbell per step id (hand them to the queue). Call only after the commit
    that made the steps due. Never raises for the broker: what it refuses, this process
    rings again once it answers (see the module docstring); while it holds refused
    doorbells, new ones join them without waiting on the broker again."""
    ids = list(step_ids)
    if not ids:
        return
    queue = _local_queue.get()
    if queue is not None:
        with _local_lock:
            queue.extend(ids)
        return
    if _ringer.holding():
        _ringer.hold(ids)
        return
    try:
        _ring(ids)
    except Exception as exc:  # the broker's error, whatever its client raises: the commit stands
        _ringer.hold(ids, exc)


def _ring(ids: list[int]) -> None:
    """Put one doorbell per id on the broker (raises what the broker's client raises)."""
    from django_q.conf import Conf  # the queue, on first use (module docstring)
    from django_q.tasks import async_task  # the queue, on first use (module docstring)

    # The ORM broker's doorbells of one hand-off (a fan-out's branches) in one transaction:
    # one commit (one WAL flush) for all of them instead of one each, and PostgreSQL
    # delivers the batch's identical wake-ups (NotifyingOrmBroker) once. Losing the batch
    # with the transaction is losing doorbells, which recovery rings again.
    batch = transaction.atomic(using=Conf.ORM) if Conf.ORM and len(ids) > 1 else contextlib.nullcontext()
    with batch:
        for step_id in ids:
            async_task("runs.tasks.step_execute", step_id, q_options={"task_name": f"step {step_id}"})


class _Ringer:
    """Doorbells the broker refused, rung again from a thread of this process as soon as
    it answers (every 0.1 s at first, then at most every RETRY_MAX_SECONDS). One warning
    when the broker first refuses, one when the held doorbells were rung: a line per
    outage and process, not per doorbell. Held only in memory: a process that dies with
    doorbells held leaves their steps to recovery (stale hand-off, or the supervisor's
    make-up after the outage)."""

    RETRY_MAX_SECONDS = 1.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, None] = {}  # ordered: doorbells are rung in the order they were owed
        self._pid = 0
        self._since = 0.0
        self._thread: threading.Thread | None = None

    def holding(self) -> bool:
        """Whether this process holds refused doorbells (the broker is not known to answer)."""
        return bool(self._held) and self._pid == os.getpid()

    def hold(self, ids: list[int], exc: BaseException | None = None) -> None:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's doorbells and thread are the parent's
                self._held, self._pid, self._thread = {}, os.getpid(), None
            if not self._held:
                self._since = time.monotonic()
                log.warning("the queue broker refused %d doorbell(s) after their commit (%s); ringing them again as soon as it answers", len(ids), exc)
            self._held.update(dict.fromkeys(ids))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ballast-doorbell-ringer", daemon=True)
                self._thread.start()

    def _run(self) -> None:

        delay = 0.1
        while True:
            time.sleep(delay)
            with self._lock:
                ids = list(self._held)
            try:
                _ring(ids)
            except Exception:
                delay = min(delay * 2, self.RETRY_MAX_SECONDS)
                continue
            finally:
                connections.close_all()  # this thread's own (the ORM broker's)
            with self._lock:
                for step_id in ids:
                    self._held.pop(step_id, None)
                if not self._held:
                    log.warning("the queue broker answers again after %.1fs: held doorbells rung", time.monotonic() - self._since)
                    self._thread = None
                    return


_ringer = _Ringer()
_brokers: dict[int, object] = {}


def _broker() -> Any:
    """This process's broker client for the supervisor's checks, made once (a new one per
    call would open a new Redis connection pool every pass)."""
    from django_q.brokers import get_broker  # the queue, on first use (module docstring)

    broker = _brokers.get(os.getpid())
    if broker is None:
        _brokers.clear()
        broker = _brokers[os.getpid()] = get_broker()
    return broker


def broker_incarnation() -> str | None:
    """Which broker answers now: for Redis its server's ``run_id`` (a new one after every
    restart; a Redis that saves nothing comes back with an empty queue), ``"orm"`` for the
    ORM broker (its queue is rows in the database), ``"local"`` in in-process mode; None
    when the broker does not answer. Read by the supervisor each pass (one round trip)."""
    if in_local_mode():
        return "local"
    from django_q.brokers.redis_broker import Redis  # the queue, on first use (module docstring)

    try:
        broker = _broker()
        if isinstance(broker, Redis):
            return str(broker.connection.info("server")["run_id"])
        return "orm"
    except Exception:
        return None


def taken(step_id: int) -> None:
    """A step this thread has just leased inside a commit (a released sibling the commit
    took, fastpath.parallel_commit): in in-process mode, drop its doorbells from the local
    deque, whose entries claim the step they name and would each spend a transaction
    finding it running. Nothing for the broker, whose doorbells claim whatever is due."""
    queue = _local_queue.get()
    if queue is None:
        return
    with _local_lock:
        try:
            while step_id in queue:
                queue.remove(step_id)
        except (ValueError, RuntimeError):
            # The driving thread popped an entry meanwhile (popleft takes no lock): its
            # claim finds the step running and does nothing, as before this pruning.
            pass


def queued() -> int:
    """Doorbells waiting in the broker that no cluster has taken yet. For the ORM broker
    the rows of every queue name (clusters of one database may listen on different
    names; a doorbell waiting in any of them will be answered) not locked by a pull, so a
    dead cluster's prefetched entries do not count; other brokers: django-q2's
    ``queue_size`` of this cluster's queue. The local deque's length in in-process mode;
    0 when the broker cannot tell (recovery then rings for every due step)."""
    queue = _local_queue.get()
    if queue is not None:
        return len(queue)
    from django_q.brokers import get_broker  # the queue, on first use (module docstring)
    from django_q.brokers.orm import ORM  # the queue, on first use (module docstring)
    from django_q.conf import Conf  # the queue, on first use (module docstring)

    try:
        broker = get_broker()
        if isinstance(broker, ORM):
            from django_q.models import OrmQ  # the queue, on first use (module docstring)

            return OrmQ.objects.using(Conf.ORM).filter(lock__lte=timezone.now()).count()
        return int(broker.queue_size() or 0)
    except Exception:  # a broker that cannot count: ring for every due step instead
        return 0


@contextlib.contextmanager
def local_mode() -> Iterator[deque[int]]:
    """Within this block, hand-offs from this thread (and from threads started in a copy of
    its context: the step threads of runs.engine.loop) go to the yielded deque, not django-q2."""
    queue: deque[int] = deque()
    token = _local_queue.set(queue)
    try:
        yield queue
    finally:
        _local_queue.reset(token)


class QueueCluster:
    """A django-q2 cluster run from this process (the qcluster's main process): its
    sentinel, worker, monitor and pusher processes are forked children.

    Constructing it installs django-q2's own SIGTERM/SIGINT handlers, which the caller
    replaces (runs.engine.cluster)."""

    def __init__(self) -> None:
        from django_q.cluster import Cluster  # the queue, on first use (module docstring)

        self._cluster = Cluster()

    def start(self) -> None:
        """Fork the sentinel and wait until it says the cluster runs."""
        self._cluster.start()

    def stop(self) -> None:
        """django-q2's orderly stop: no more pulls, workers finish their tasks, then exit.
        Blocks until the sentinel is gone (killed or stopped)."""
        self._cluster.stop()

    @property
    def alive(self) -> bool:
        """Whether the sentinel process still runs."""
        sentinel = self._cluster.sentinel
        return sentinel is not None and sentinel.is_alive()


def on_worker_start(callback: Callable[[], None]) -> None:
    """Call ``callback()`` in every django-q2 worker process as it starts, before it reads
    its first task (django-q2's ``post_spawn`` signal, sent by each worker, the first
    ones and every one the sentinel starts later, and by no other process). Connect it
    in the cluster's main process before the cluster starts: the forks inherit it."""
    from django_q.signals import post_spawn  # the queue, on first use (module docstring)

    def receiver(sender: object, **kwargs: object) -> None:
        callback()

    # Held strongly (weak=False): the closure has no other reference.
    post_spawn.connect(receiver, weak=False, dispatch_uid="ballast_worker_start")


def task_budget_seconds() -> float | None:
    """How long one doorbell task may go on starting steps: half of django-q2's task
    ``timeout`` (Q_CLUSTER), so the step it starts last has the other half before
    django-q2 interrupts the task (see the module docstring). None in in-process mode and
    without a timeout."""
    if in_local_mode():
        return None

    timeout = float(str(settings.Q_CLUSTER.get("timeout") or 0))
    return None if timeout <= 0 else timeout / 2


def worker_recycle() -> bool:
    """Ask django-q2 to end this worker process cleanly after its current task; its
    sentinel then starts a fresh one ("recycled worker" in the log).

    The task's result is still reported (the queue entry acknowledged) first: this sets
    the worker's memory limit (``Conf.MAX_RSS``, which django-q2 checks after every task)
    to 1 KB in this process only. Returns False, and does nothing, outside a django-q2
    worker process (in-process mode, the web server, the cluster's main process).
    """

    if in_local_mode() or multiprocessing.parent_process() is None:
        return False
    from django_q.conf import Conf  # the queue, on first use (module docstring)

    Conf.MAX_RSS = 1
    return True


def in_local_mode() -> bool:
    """Whether this thread (or the drive it runs a step for) is inside :func:`local_mode`."""
    return _local_queue.get() is not None


# --------------------------------------------------------------------------- PostgreSQL wake-up

NOTIFY_CHANNEL = "ballast_doorbell"
# The longest a pusher waits for a notification before it looks at the queue anyway (an
# entry whose lock ran out, a notification sent before it listened), and so the longest
# it may take to notice that its cluster is stopping.
LISTEN_TIMEOUT = 0.2


def _reconnecting_orm_broker() -> type:
    """django-q2's ORM broker, with a lost database connection dropped at once.

    A blip (pg_terminate_backend, a restart, a failover) left django-q2's processes on a
    dead connection: the sentinel saves its status through the cache every 0.5 s and
    logged "the connection is closed" each time until its scheduler's
    ``close_old_connections()`` came round, up to 30 s later; a pusher whose pull raised
    slept 10 s and exited for the sentinel to replace it. Here a database error in a
    pull or a status save closes the process's broken connections, so the next call
    opens a new one: a pull that fails is an empty pull, and a status save fails once.

    Built on first use (module ``__getattr__``): importing this module must not import
    django-q2's models before the app registry is ready."""

    from django_q.brokers.orm import ORM  # the queue, on first use (module docstring)
    from django_q.conf import Conf  # the queue, on first use (module docstring)

    log = logging.getLogger("ballast.engine")

    def drop_broken() -> None:
        for conn in connections.all(initialized_only=True):
            if conn.connection is not None and not conn.in_atomic_block and not conn.is_usable():
                conn.close()

    class ReconnectingOrmBroker(ORM):
        """The ORM broker; a lost connection is replaced on the next call (see _reconnecting_orm_broker)."""

        def dequeue(self):  # type: ignore[no-untyped-def]
            try:
                return self._pull()
            except DatabaseError as exc:
                log.warning("queue pull failed (%s); reconnecting", str(exc).strip())
                drop_broken()
                time.sleep(Conf.POLL)
                return None

        def _pull(self):  # type: ignore[no-untyped-def]
            return super().dequeue()

        def set_stat(self, key: str, value: str, timeout: int) -> None:
            try:
                super().set_stat(key, value, timeout)
            except DatabaseError:
                drop_broken()  # the next save (0.5 s later) reconnects
                raise

        def get_stat(self, key: str):  # type: ignore[no-untyped-def]
            try:
                return super().get_stat(key)
            except DatabaseError:
                drop_broken()
                raise

    return ReconnectingOrmBroker


def _notifying_orm_broker() -> type:
    """django-q2's ORM broker for PostgreSQL, woken by LISTEN/NOTIFY instead of sleeping
    ``poll`` seconds between empty pulls: ``enqueue`` sends ``pg_notify`` (delivered when
    the enqueuing transaction commits), and a pusher with nothing to pull waits on its own
    listening connection, opened in the pusher process (after django-q2's fork) and
    reopened when it breaks. A lost notification costs at most LISTEN_TIMEOUT.

    Built on first use (``NotifyingOrmBroker`` below, module ``__getattr__``): importing
    this module must not import django-q2's models before the app registry is ready."""

    import psycopg  # the driver, on first use (module docstring)
    from django_q.conf import Conf  # the queue, on first use (module docstring)

    class NotifyingOrmBroker(_broker_class("ReconnectingOrmBroker")):  # type: ignore[misc]
        """The ORM broker with a push wake-up on PostgreSQL (see _notifying_orm_broker)."""

        _listener: psycopg.Connection | None = None
        _listener_pid = 0

        def enqueue(self, task: str) -> int:
            pk = super().enqueue(task)
            with connections[Conf.ORM].cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, self.list_key or Conf.CLUSTER_NAME])
            return pk

        def _pull(self):  # type: ignore[no-untyped-def]
            # The ORM broker's pull, without its sleep when empty.
            rows = self.get_connection().filter(key=self.list_key, lock__lt=timezone.now())[0 : Conf.BULK]
            taken = [(row.pk, row.payload) for row in rows if self.get_connection().filter(id=row.id, lock=row.lock).update(lock=self.timeout(row))]
            if taken:
                return taken
            self._wait()
            return None

        def _wait(self) -> None:
            try:
                listener = self._listening()
                for _ in listener.notifies(timeout=LISTEN_TIMEOUT, stop_after=1):
                    pass
            except psycopg.Error:
                self._close_listener()
                time.sleep(Conf.POLL)

        def _listening(self) -> psycopg.Connection:
            if self._listener is None or self._listener_pid != os.getpid() or self._listener.closed:
                params = connections[Conf.ORM].get_connection_params()
                conninfo = psycopg.conninfo.make_conninfo(
                    "", **{k: v for k, v in params.items() if isinstance(v, str | int) and k not in ("prepare_threshold", "cursor_factory")}
                )
                self._listener = psycopg.connect(conninfo, autocommit=True)
                self._listener_pid = os.getpid()
                self._listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
            return self._listener

        def _close_listener(self) -> None:
            if self._listener is not None and self._listener_pid == os.getpid():
                try:
                    self._listener.close()
                except psycopg.Error:
                    pass
            self._listener = None

    return NotifyingOrmBroker


# --------------------------------------------------------------------------- Redis outages

# How long a pusher whose Redis does not answer waits before it pulls again.
PULL_RETRY_SECONDS = 0.2


def _redis_broker() -> type:
    """django-q2's Redis broker, whose pull waits out a Redis outage: a pull that Redis
    does not answer (``ConnectionError``, ``TimeoutError``) returns nothing after
    PULL_RETRY_SECONDS, and the pusher pulls again, so doorbells flow again within that
    time of Redis answering. django-q2's pusher instead logs a traceback, sleeps 10 s
    and exits for its sentinel to start another, which keeps a cluster deaf for up to
    10 s after Redis is back. One warning per outage and pusher process. Built on first
    use, as NotifyingOrmBroker."""
    import redis  # the driver, on first use (module docstring)
    from django_q.brokers.redis_broker import Redis  # the queue, on first use (module docstring)

    class RedisBroker(Redis):
        """The Redis broker of a pusher that outlives Redis outages (see _redis_broker)."""

        _down_since: float | None = None

        def dequeue(self):  # type: ignore[no-untyped-def]
            try:
                tasks = super().dequeue()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if self._down_since is None:
                    self._down_since = time.monotonic()
                    log.warning("the queue broker (Redis) does not answer a pull (%s); pulling again every %gs", exc, PULL_RETRY_SECONDS)
                time.sleep(PULL_RETRY_SECONDS)
                return None
            if self._down_since is not None:
                log.warning("the queue broker (Redis) answers pulls again after %.1fs", time.monotonic() - self._down_since)
                self._down_since = None
            return tasks

        def set_stat(self, key: str, value: str, timeout: int) -> None:
            # The sentinel's status for django-q2's monitor, saved every 0.5 s: skipped
            # while Redis does not answer (django-q2 logged an error for each).
            try:
                super().set_stat(key, value, timeout)
            except (redis.ConnectionError, redis.TimeoutError):
                pass

    return RedisBroker


_BROKERS = {
    "ReconnectingOrmBroker": _reconnecting_orm_broker,
    "NotifyingOrmBroker": _notifying_orm_broker,
    "RedisBroker": _redis_broker,
}


def _broker_class(name: str) -> type:
    """The broker class NAME, built on first use (django_q is imported only then)."""
    cls = globals().get(name)
    if cls is None:
        cls = globals()[name] = _BROKERS[name]()
    return cls


def __getattr__(name: str) -> object:
    if name in _BROKERS:
        return _broker_class(name)
    raise AttributeError(name)
