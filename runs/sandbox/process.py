"""The guarded evaluator process: the hard backstop on time and memory, killed and respawned on overrun.

A long-lived child (a fresh interpreter, so no locks inherited from a threaded parent)
evaluates one request at a time under RLIMIT_AS and a per-request RLIMIT_CPU, both only
ever lowered: a deployment's own hard limits (``prlimit --cpu=N:N``, systemd's
``LimitCPU=``) are kept, and a child whose CPU time left under the hard limit is less
than a request may need retires after its reply, so a fresh one takes over. The parent
waits at most timeout + HARD_KILL_GRACE, then SIGKILLs it; the next call starts a new
one. Each process (web server, each forked django-q2 worker) starts its own pool lazily
and drops an inherited one after fork. TRAPS.md measured the alternatives: a fork per
evaluation costs about 3 ms and a fresh interpreter about 35 ms; a request to this
process costs tens of microseconds.
"""
from __future__ import annotations

import atexit
import importlib
import io
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from runs.sandbox.errors import ExpressionError, clip
from runs.sandbox.limits import HARD_KILL_GRACE, STARVED_WALL_FACTOR, Limits, setting

__all__ = ["EVALUATORS", "EvaluatorPool", "EvaluatorProcess", "ResultUnpickler", "child_main", "pool",
           "run_isolated"]

# What the child can run: kind -> (module, function(source, state, limits)). The child
# imports each module before it lowers its memory limit.
EVALUATORS: dict[str, tuple[str, str]] = {
    "expr": ("runs.sandbox.expressions", "evaluate_inline"),
    "template": ("runs.sandbox.templating", "render_inline"),
}

_HEADER = struct.Struct("!I")
_CPU_MARGIN = 2  # seconds of RLIMIT_CPU above timeout + grace: the limit counts whole seconds
_SPIN_SECONDS = 0.0002
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/<pid>/stat times are in these
_EXIT_MEMORY = 3
_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("builtins", "set"): set, ("builtins", "frozenset"): frozenset, ("builtins", "complex"): complex,
    ("builtins", "range"): range,
}


class ResultUnpickler(pickle.Unpickler):
    """Unpickler for the child's replies: the child ran hostile input, so plain data only, never code."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _SAFE_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"result refers to {module}.{name}") from None


class _WorkerDied(Exception):
    pass


class EvaluatorProcess:
    """One evaluator child process (``proc``) and its pipes; starts it and waits for "ready".

    Raises ExpressionError if the child cannot start within 30 s.
    """

    def __init__(self, memory_mb: int) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = (f"import sys; sys.path.insert(0, {root!r}); "
                f"from runs.sandbox.process import child_main; child_main({int(memory_mb)})")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", code],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                bufsize=0, close_fds=True,
            )
        except OSError as exc:
            raise ExpressionError(f"the isolated expression evaluator could not start: {exc}") from None
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.cpu_seconds: float | None = None  # CPU time the child used, once reaped
        self.rfd = self.proc.stdout.fileno()
        self.wfd = self.proc.stdin.fileno()
        try:
            ready = self._read(time.monotonic() + 30)
        except (_WorkerDied, TimeoutError, OSError, pickle.UnpicklingError, EOFError) as exc:
            self.kill()
            raise ExpressionError(f"the isolated expression evaluator could not start: {exc!r}") from None
        if ready != ("ready",):
            self.kill()
            raise ExpressionError("the isolated expression evaluator could not start")

    def request(self, payload: tuple[Any, ...], timeout: float) -> tuple[Any, ...]:
        """Send ``payload``, return the reply; _WorkerDied on EOF, TimeoutError once the child has
        used ``timeout`` seconds of CPU time on it, or has taken ``STARVED_WALL_FACTOR`` times
        that in wall time (a child waiting for a core is not a runaway)."""
        _write_frame(self.wfd, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
        start, cpu_start = time.monotonic(), self.cpu_time()
        backstop = start + timeout * STARVED_WALL_FACTOR

        def extend() -> float | None:
            used = self.cpu_time()
            now = time.monotonic()
            if used is None or cpu_start is None or now >= backstop:
                return None
            left = timeout - (used - cpu_start)
            return min(now + left, backstop) if left > 0 else None

        return self._read(start + timeout, extend)

    def cpu_time(self) -> float | None:
        """CPU seconds (user + system) the child has used so far, from /proc (Linux); None elsewhere."""
        try:
            with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return None
        # After the command's ")": state is field 3, so utime (14) and stime (15) are at 11 and 12.
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    def _read(self, deadline: float, extend: Callable[[], float | None] | None = None) -> tuple[Any, ...]:
        header = self._read_exact(_HEADER.size, deadline, extend)
        body = self._read_exact(_HEADER.unpack(header)[0], deadline, extend)
        reply: tuple[Any, ...] = ResultUnpickler(io.BytesIO(body)).load()
        return reply

    def _read_exact(self, n: int, deadline: float, extend: Callable[[], float | None] | None = None) -> bytes:
        chunks, got = [], 0
        poller = select.poll()
        poller.register(self.rfd, select.POLLIN | select.POLLHUP | select.POLLERR)
        # Most replies come within tens of microseconds; polling without sleeping for a
        # moment saves the scheduler wake-up (~40 us measured) that a blocking wait costs.
        spin_until = time.monotonic() + _SPIN_SECONDS
        while not poller.poll(0) and time.monotonic() < spin_until:
            pass
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(remaining * 1000):
                later = extend() if extend is not None else None
                if later is None:
                    raise TimeoutError
                deadline = later
                continue
            chunk = os.read(self.rfd, min(n - got, 1 << 20))
            if not chunk:
                raise _WorkerDied("the evaluator process exited")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def kill(self) -> int | None:
        """SIGKILL the child and reap it; return its exit code (None if it would not die in 5 s).

        Reaps with wait4 so ``cpu_seconds`` says whether a SIGKILL came from the hard
        CPU limit (the kernel's) rather than from the memory backstop.
        """
        # Not Popen.kill: it polls first, which reaps an exited child without its usage.
        code: int | None = self.proc.returncode
        if code is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        while code is None:
            try:
                pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                code = self.proc.poll()
                break
            if pid:
                code = self.proc.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_seconds = usage.ru_utime + usage.ru_stime
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        self.close()
        return code

    def hit_cpu_limit(self) -> bool:
        """Whether the reaped child had used its hard RLIMIT_CPU (inherited from this process)."""
        hard = _cpu_hard_limit()
        # The reaped usage of a child the kernel killed at its limit was seen 0.6 s short of
        # it on a loaded machine (3.4 s at a 4 s limit), so allow a second.
        return hard is not None and self.cpu_seconds is not None and self.cpu_seconds >= hard - 1.0

    def close(self) -> None:
        """Close our ends of the pipes."""
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass


def _cpu_hard_limit() -> int | None:
    """This process's hard RLIMIT_CPU in seconds (children inherit it), None when unlimited."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    return None if hard == resource.RLIM_INFINITY else int(hard)


def _write_frame(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


class EvaluatorPool:
    """Evaluator processes of this OS process: at most ``BALLAST_EXPRESSION_WORKERS`` (2) at once, started on demand."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.cond = threading.Condition()
        self.idle: list[EvaluatorProcess] = []
        self.live: set[EvaluatorProcess] = set()
        self.starting = 0

    def run(self, payload: tuple[Any, ...], timeout: float, source: str) -> Any:
        """Run ``payload`` (kind, source, state, limits as a dict) in an idle child; return its value.

        Raises ExpressionError: the child's own error as it reported it, "timeout" when
        it did not answer within ``timeout`` + HARD_KILL_GRACE seconds (it is killed),
        "memory" when it ran out of address space, "error" when it failed otherwise.
        """
        what = "template" if payload[0] == "template" else "expression"
        stopped = f"{what} took longer than the time limit of {timeout:g} s and was stopped in `{clip(source)}`"
        worker = self._acquire()
        healthy = False
        try:
            try:
                reply = worker.request(payload, timeout + HARD_KILL_GRACE)
            except TimeoutError:
                worker.kill()
                raise ExpressionError(stopped, "timeout", source=source) from None
            except (_WorkerDied, OSError, pickle.UnpicklingError, EOFError) as exc:
                code = worker.kill()
                # SIGXCPU is the child's own CPU-time backstop; SIGKILL is the kernel's at
                # a hard CPU limit or an out-of-memory kill.
                if code == -24 or (code == -9 and worker.hit_cpu_limit()):
                    raise ExpressionError(stopped, "timeout", source=source) from None
                if code in (_EXIT_MEMORY, -9):
                    raise ExpressionError(f"{what} ran out of memory in `{clip(source)}`", "memory",
                                          source=source) from None
                raise ExpressionError(f"the isolated evaluator failed ({exc!r}) on `{clip(source)}`",
                                      source=source) from None
            # The last field says the child retires (too little CPU time left under its hard limit).
            retiring = bool(reply[-1])
            if reply[0] == "ok":
                healthy = not retiring
                return reply[1]
            _, code, message, position, name, _retire = reply
            # After a MemoryError the child exits; anything else leaves it reusable.
            healthy = code != "memory" and not retiring
            if not healthy:
                worker.kill()
            raise ExpressionError(message, code, source=payload[1], position=position, name=name)
        finally:
            self._release(worker, healthy)

    def _take_idle(self) -> EvaluatorProcess | None:
        # Caller holds self.cond. A worker that died while idle (killed from outside) is dropped.
        while self.idle:
            worker = self.idle.pop()
            if worker.proc.poll() is None:
                return worker
            self.live.discard(worker)
            worker.close()
        return None

    def _acquire(self) -> EvaluatorProcess:
        with self.cond:
            worker = self._take_idle()
        if worker is not None:
            return worker
        size = max(1, int(setting("BALLAST_EXPRESSION_WORKERS", 2)))
        with self.cond:
            while True:
                worker = self._take_idle()
                if worker is not None:
                    return worker
                if len(self.live) + self.starting < size:
                    break
                self.cond.wait()
            self.starting += 1
        try:
            worker = EvaluatorProcess(int(setting("BALLAST_EXPRESSION_MEMORY_MB", 512)))
        except BaseException:
            with self.cond:
                self.starting -= 1
                self.cond.notify()
            raise
        with self.cond:
            self.starting -= 1
            self.live.add(worker)
        return worker

    def _release(self, worker: EvaluatorProcess, healthy: bool) -> None:
        with self.cond:
            if healthy:
                self.idle.append(worker)
            else:
                self.live.discard(worker)
                if worker.proc.returncode is None:
                    worker.kill()
            self.cond.notify()

    def shutdown(self) -> None:
        """Kill every child of this pool."""
        with self.cond:
            workers, self.idle, self.live = list(self.live), [], set()
        for w in workers:
            w.kill()

    def forget(self) -> None:
        """After fork: the children belong to the parent; drop our copies of their pipes."""
        for w in list(self.live):
            w.close()
            w.proc.returncode = 0  # never wait() on another process's child
        self.idle, self.live = [], set()


_POOL: EvaluatorPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> EvaluatorPool:
    """This OS process's evaluator pool, created on first use (and again after a fork)."""
    global _POOL
    current = _POOL
    if current is None or current.pid != os.getpid():
        with _POOL_LOCK:
            if _POOL is None or _POOL.pid != os.getpid():
                _POOL = EvaluatorPool()
            current = _POOL
    return current


def _after_fork_in_child() -> None:
    global _POOL, _POOL_LOCK
    # A lock held by another thread at fork time would stay locked forever here.
    _POOL_LOCK = threading.Lock()
    if _POOL is not None:
        _POOL.forget()
    _POOL = None


os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _shutdown_pool() -> None:
    if _POOL is not None and _POOL.pid == os.getpid():
        _POOL.shutdown()


def run_isolated(kind: str, source: str, state: dict[str, Any], limits: Limits) -> Any:
    """Evaluate ``source`` of ``kind`` (a key of :data:`EVALUATORS`) in the evaluator process; return its value.

    ``state`` must be a snapshot (plain JSON values: it is pickled). The value comes back
    through :class:`ResultUnpickler` (plain data only). Raises ExpressionError as
    :meth:`EvaluatorPool.run` says.
    """
    return pool().run((kind, source, state, vars(limits)), limits.timeout, source)


def _load_evaluators() -> dict[str, Callable[[str, dict[str, Any], Limits], Any]]:
    return {kind: getattr(importlib.import_module(module), fn) for kind, (module, fn) in EVALUATORS.items()}


def child_main(memory_mb: int) -> None:
    """Entry point of the evaluator process: read requests on stdin, answer on stdout, forever.

    Each request is (kind, source, state, limits as a dict); each reply ("ok", value,
    retire) or ("err", code, message, position, name, retire). A MemoryError ends the
    process with exit code 3 after its reply; ``retire`` true ends it with 0 after its
    reply (too little CPU time left under a finite hard RLIMIT_CPU for another request);
    the parent's pipe closing ends it with 0.

    Resource limits are only ever lowered, never raised above the hard limits this
    process started with (raising a hard limit needs privileges, and would override the
    deployment's choice).
    """
    import resource

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent to handle
    rfd, wfd = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    sys.stdout = sys.stderr  # nothing may write into the reply pipe by accident
    evaluators = _load_evaluators()  # import before the memory limit
    infinity = resource.RLIM_INFINITY

    def lowered(which: int, value: int) -> tuple[int, int]:
        # (soft, hard) with soft at most ``value`` and never above the current hard limit.
        hard = resource.getrlimit(which)[1]
        return (value if hard == infinity else min(value, hard)), hard

    limit = memory_mb * 1024 * 1024
    soft_as = lowered(resource.RLIMIT_AS, limit)[0]
    resource.setrlimit(resource.RLIMIT_AS, (soft_as, soft_as))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]

    def cpu_used() -> float:
        used = resource.getrusage(resource.RUSAGE_SELF)
        return used.ru_utime + used.ru_stime

    def read_exact(n: int) -> bytes | None:
        # Into one buffer: appending bytes to bytes copies the whole request on every
        # 64 KiB pipe read (1.5 s for a 20 MB state).
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            read = os.readv(rfd, [view[got:]])
            if not read:
                return None
            got += read
        return bytes(buf)

    retire = False

    def send(reply: tuple[Any, ...]) -> None:
        try:
            data = pickle.dumps((*reply, retire), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            data = pickle.dumps(("err", "type", f"the result cannot be returned: {clip(str(exc))}", None, None,
                                 retire))
        _write_frame(wfd, data)

    _write_frame(wfd, pickle.dumps(("ready",)))
    while True:
        header = read_exact(_HEADER.size)
        if header is None:
            os._exit(0)  # parent gone
        body = read_exact(_HEADER.unpack(header)[0])
        if body is None:
            os._exit(0)
        source = ""
        state: Any = None
        value: Any = None
        try:
            kind, source, state, limits_dict = pickle.loads(body)
            limits = Limits(**limits_dict)
            # If the parent is gone and cannot kill us, CPU time still ends a runaway
            # (SIGXCPU at the soft limit; at a deployment's hard limit the kernel's SIGKILL).
            needed = limits.timeout + HARD_KILL_GRACE
            cpu = int(cpu_used() + needed) + _CPU_MARGIN
            if cpu_hard != infinity:
                cpu = min(cpu, cpu_hard)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu_hard))
            value = evaluators[kind](source, state, limits)
            # Retire (after this reply) when the next request could not get its full time.
            retire = cpu_hard != infinity and cpu_used() + needed + 1 > cpu_hard
            send(("ok", value))
        except MemoryError:
            try:
                send(("err", "memory", f"ran out of memory in `{clip(source)}`", None, None))
            finally:
                os._exit(_EXIT_MEMORY)
        except ExpressionError as exc:
            retire = cpu_hard != infinity and cpu_used() + HARD_KILL_GRACE + 1 > cpu_hard
            send(("err", exc.code, exc.message, exc.position, exc.name))
        except BaseException as exc:  # keep serving; report what happened
            send(("err", "error", clip(f"{type(exc).__name__}: {exc}"), None, None))
        finally:
            state = value = None  # drop the request's data before waiting for the next one
        if retire:
            os._exit(0)
