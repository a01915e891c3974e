"""What the chaos suite runs under its workers: network namespaces on a bridge, a private PostgreSQL cluster and Redis, the effect server, the web app.

Everything here is private to one suite run and named from its :class:`Layout` (ports,
subnet, name prefix), so two suites with different ``CHAOS_PORT_BASE``/``CHAOS_SUBNET``
can run side by side, and the suite refuses to start when a port, a namespace or the
bridge it would use is taken. Nothing here touches the shared PostgreSQL (127.0.0.1:5432)
or the shared Redis: the database whose backends the suite terminates is the one
:class:`PrivatePostgres` created. Every start registers its stop with a :class:`Stack`,
which undoes them in reverse order however the run ends.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PG_BIN = Path(os.environ.get("CHAOS_PG_BIN", "/usr/lib/postgresql/15/bin"))
PG_USER = "postgres"  # the Debian package's system user: initdb refuses to run as root
REQUIRED_COMMANDS = ("ip", "unshare", "redis-server", "runuser")
# Debian's faketime package (libfaketime), multi-threaded variant; the path has the architecture in it.
FAKETIME_LIB = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))), Path("/usr/lib/faketime/libfaketimeMT.so.1"))


class ChaosSetupError(RuntimeError):
    """The suite cannot start here: a port or name is taken, a command is missing, not root."""


@dataclass(frozen=True)
class Layout:
    """Names, addresses and ports of one suite run.

    ``subnet`` is the first three octets of a private /24 (``10.231.77``): the bridge is
    ``.1``, host ``i`` (1-based) is ``.(10+i)``. Ports are ``port_base`` + 0 (PostgreSQL),
    1 (Redis), 2 (effect server), 3 (web app).
    """

    prefix: str = "chaos"
    subnet: str = "10.231.77"
    port_base: int = 25430
    hosts: int = 2

    @property
    def bridge(self) -> str:
        return f"br-{self.prefix}"[:15]

    @property
    def bridge_ip(self) -> str:
        return f"{self.subnet}.1"

    @property
    def cidr(self) -> str:
        return f"{self.subnet}.0/24"

    @property
    def pg_port(self) -> int:
        return self.port_base

    @property
    def redis_port(self) -> int:
        return self.port_base + 1

    @property
    def effect_port(self) -> int:
        return self.port_base + 2

    @property
    def web_port(self) -> int:
        return self.port_base + 3

    def host_name(self, i: int) -> str:
        """Network namespace and host name of host ``i`` (1-based)."""
        return f"{self.prefix}-h{i}"

    def host_ip(self, i: int) -> str:
        return f"{self.subnet}.{10 + i}"

    def veth(self, i: int) -> str:
        return f"v{self.prefix}-h{i}"[:15]


def run(cmd: list[str], *, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run a short command, capturing its output; raise with it when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` on any address (a bind to the wildcard succeeds;
    SO_REUSEADDR so that closed connections still in TIME-WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def check_can_start(layout: Layout) -> None:
    """Refuse to start (ChaosSetupError) unless root, the commands exist and every port,
    namespace and the bridge of ``layout`` are free."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the chaos suite needs root (network namespaces, initdb as the postgres user)")
    for cmd in REQUIRED_COMMANDS:
        if not shutil.which(cmd):
            problems.append(f"command {cmd!r} not found (.ci/run installs what the suite needs)")
    if not (PG_BIN / "pg_ctl").exists():
        problems.append(f"{PG_BIN}/pg_ctl not found (set CHAOS_PG_BIN)")
    if not FAKETIME_LIB.exists():
        problems.append(f"{FAKETIME_LIB} not found: apt-get install faketime")
    for port in (layout.pg_port, layout.redis_port, layout.effect_port, layout.web_port):
        if not port_free(port):
            problems.append(f"port {port} is taken (set CHAOS_PORT_BASE)")
    if shutil.which("ip"):
        namespaces = run(["ip", "netns", "list"], check=False).stdout.split()
        for i in range(1, layout.hosts + 1):
            if layout.host_name(i) in namespaces:
                problems.append(f"network namespace {layout.host_name(i)} exists (a previous run left it: python -m tests.chaos --cleanup)")
        if run(["ip", "link", "show", layout.bridge], check=False).returncode == 0:
            problems.append(f"bridge {layout.bridge} exists (python -m tests.chaos --cleanup)")
        addresses = run(["ip", "-o", "-4", "addr", "show"], check=False).stdout
        if f" {layout.subnet}." in addresses and run(["ip", "link", "show", layout.bridge], check=False).returncode != 0:
            problems.append(f"subnet {layout.cidr} is in use on this machine (set CHAOS_SUBNET)")
    if problems:
        raise ChaosSetupError("the chaos suite will not start:\n  " + "\n  ".join(problems))


class Stack:
    """Undo actions, run in reverse order by :meth:`close` (each at most once, errors kept going)."""

    def __init__(self) -> None:
        self._undo: list[tuple[str, Callable[[], None]]] = []
        self.errors: list[str] = []

    def push(self, what: str, undo: Callable[[], None]) -> None:
        self._undo.append((what, undo))

    def close(self) -> None:
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except Exception as exc:  # keep undoing the rest
                self.errors.append(f"{what}: {exc}")


# ------------------------------------------------------------------------------ network


def network_up(layout: Layout, stack: Stack) -> None:
    """A bridge with ``.1`` in the root namespace and one namespace per host, each with a
    veth whose namespace end is ``eth0`` at ``.(10+i)``."""
    run(["ip", "link", "add", layout.bridge, "type", "bridge"])
    stack.push(f"bridge {layout.bridge}", lambda: run(["ip", "link", "del", layout.bridge], check=False))
    run(["ip", "addr", "add", f"{layout.bridge_ip}/24", "dev", layout.bridge])
    run(["ip", "link", "set", layout.bridge, "up"])
    for i in range(1, layout.hosts + 1):
        ns, veth = layout.host_name(i), layout.veth(i)
        run(["ip", "netns", "add", ns])
        stack.push(f"netns {ns}", lambda ns=ns: run(["ip", "netns", "del", ns], check=False))
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
        stack.push(f"veth {veth}", lambda veth=veth: run(["ip", "link", "del", veth], check=False))
        run(["ip", "link", "set", veth, "master", layout.bridge, "up"])
        run(["ip", "-n", ns, "addr", "add", f"{layout.host_ip(i)}/24", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])


def set_host_link(layout: Layout, i: int, up: bool) -> None:
    """Cut (``up=False``) or restore host ``i``'s only network link, inside its namespace."""
    run(["ip", "-n", layout.host_name(i), "link", "set", "eth0", "up" if up else "down"])


def cleanup_leftovers(layout: Layout) -> list[str]:
    """Remove namespaces and the bridge a killed suite run of ``layout`` left behind.
    Returns what was removed (processes are not touched: their ids are unknown here)."""
    removed = []
    namespaces = run(["ip", "netns", "list"], check=False).stdout.split()
    for i in range(1, layout.hosts + 1):
        if layout.host_name(i) in namespaces:
            run(["ip", "netns", "del", layout.host_name(i)], check=False)
            removed.append(layout.host_name(i))
    if run(["ip", "link", "show", layout.bridge], check=False).returncode == 0:
        run(["ip", "link", "del", layout.bridge], check=False)
        removed.append(layout.bridge)
    return removed


# ------------------------------------------------------------------------------ processes


def kill_session(proc: subprocess.Popen, sig: int = signal.SIGKILL, timeout: float = 30.0) -> None:
    """Send ``sig`` to the process group led by ``proc`` (started with start_new_session)
    and wait for ``proc``; SIGKILL the group if it outlives ``timeout``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout)
    try:  # children of the group that outlived its leader
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, poll: float = 0.1) -> None:
    """Poll ``predicate`` until true; RuntimeError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


# ------------------------------------------------------------------------------ PostgreSQL


class PrivatePostgres:
    """A PostgreSQL cluster of the suite's own: initdb as the postgres user in ``workdir``,
    listening on the bridge address only, trust for the namespaces' subnet only, with
    commit timestamps on (the suite reads when each attempt committed)."""

    def __init__(self, layout: Layout, workdir: Path):
        self.layout = layout
        self.datadir = workdir / "pg"
        self.sockdir = workdir / "pgsock"
        self.log = workdir / "postgres.log"
        self.dbname = "chaos"

    @property
    def url(self) -> str:
        return f"postgres://{PG_USER}@{self.layout.bridge_ip}:{self.layout.pg_port}/{self.dbname}"

    def _as_pg(self, cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
        return run(["runuser", "-u", PG_USER, "--", *cmd], **kwargs)

    def start(self, stack: Stack) -> None:
        for d in (self.datadir, self.sockdir):
            d.mkdir(parents=True)
            shutil.chown(d, PG_USER, PG_USER)
        os.chmod(self.datadir, 0o700)
        self.log.touch()
        shutil.chown(self.log, PG_USER, PG_USER)
        self._as_pg([str(PG_BIN / "initdb"), "-D", str(self.datadir), "-A", "trust", "-U", PG_USER, "--no-sync", "-E", "UTF8"])
        # Only local sockets and the namespaces' subnet; no line for 127.0.0.1 or anything else.
        (self.datadir / "pg_hba.conf").write_text(
            f"local all all trust\nhost all all {self.layout.cidr} trust\n"
        )
        options = (
            f"-p {self.layout.pg_port} -c listen_addresses={self.layout.bridge_ip} "
            f"-c unix_socket_directories={self.sockdir} -c track_commit_timestamp=on "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        stack.push("postgres", self.stop)
        self._as_pg([str(PG_BIN / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start"])
        self._as_pg([str(PG_BIN / "psql"), "-h", str(self.sockdir), "-p", str(self.layout.pg_port), "-d", "postgres",
                     "-qc", f"CREATE DATABASE {self.dbname}"])

    def dump(self, path: Path) -> None:
        """Write the suite database (schema and rows) to ``path`` as SQL."""
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            subprocess.run(["runuser", "-u", PG_USER, "--", str(PG_BIN / "pg_dump"), "-h", str(self.sockdir), "-p",
                            str(self.layout.pg_port), "--no-owner", self.dbname], stdout=out, check=True)
        tmp.rename(path)

    def restore(self, path: Path) -> None:
        """Load a :meth:`dump` into the (empty) suite database."""
        with open(path, "rb") as src:
            proc = subprocess.run(["runuser", "-u", PG_USER, "--", str(PG_BIN / "psql"), "-h", str(self.sockdir), "-p",
                                   str(self.layout.pg_port), "-d", self.dbname, "-q", "-v", "ON_ERROR_STOP=1"],
                                  stdin=src, capture_output=True)
        if proc.returncode != 0:
            raise RuntimeError(f"restoring {path} failed: {proc.stderr.decode(errors='replace')[-2000:]}")

    def stop(self) -> None:
        if (self.datadir / "postmaster.pid").exists():
            self._as_pg([str(PG_BIN / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate", "-w", "stop"], check=False)
        shutil.rmtree(self.datadir, ignore_errors=True)

    def sql(self, statement: str) -> str:
        """Run one statement on the suite's database through the local socket; returns psql's output."""
        return self._as_pg([str(PG_BIN / "psql"), "-h", str(self.sockdir), "-p", str(self.layout.pg_port), "-d", self.dbname,
                            "-Atqc", statement]).stdout

    def terminate_backends(self) -> int:
        """Terminate every backend connected to the suite's own database (never another
        cluster's: this goes through this cluster's socket). Returns how many."""
        out = self.sql(
            f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{self.dbname}' AND pid <> pg_backend_pid()"
        )
        return int(out.strip() or 0)

    def accepting(self) -> bool:
        return run([str(PG_BIN / "pg_isready"), "-q", "-h", self.layout.bridge_ip, "-p", str(self.layout.pg_port)], check=False).returncode == 0


# ------------------------------------------------------------------------------ Redis


class PrivateRedis:
    """``redis-server --port N --save "" --appendonly no`` on the bridge address and
    loopback, in its own session; :meth:`kill` and :meth:`start` are the Redis fault."""

    def __init__(self, layout: Layout, workdir: Path):
        self.layout = layout
        self.log = workdir / "redis.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.layout.bridge_ip}:{self.layout.redis_port}/0"

    def start(self) -> None:
        if not port_free(self.layout.redis_port):
            raise ChaosSetupError(f"port {self.layout.redis_port} is taken: will not start Redis there")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.layout.redis_port), "--bind", f"{self.layout.bridge_ip} 127.0.0.1",
                 "--save", "", "--appendonly", "no", "--protected-mode", "no"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        wait_for(self.answering_is_mine, 30, "the private redis-server to answer")

    def answering_is_mine(self) -> bool:
        """Whether the server on the port answers and is the process this object started."""
        import redis

        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            info = redis.Redis(host=self.layout.bridge_ip, port=self.layout.redis_port, socket_timeout=1).info("server")
        except redis.RedisError:
            return False
        if int(info["process_id"]) != self.proc.pid:
            raise ChaosSetupError(f"the Redis answering on port {self.layout.redis_port} is not the one the suite started")
        return True

    def kill(self) -> None:
        if self.proc is not None:
            kill_session(self.proc)
            self.proc = None


# ------------------------------------------------------------------------------ effect server


@dataclass
class EffectLog:
    """Every side effect the tools sent: dicts with the tool's fields plus ``t`` (arrival,
    time.time() in the suite's namespace: the real clock, whatever a host's skew)."""

    path: Path
    calls: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: dict) -> None:
        with self.lock:
            self.calls.append(call)
            with open(self.path, "a") as fh:
                fh.write(json.dumps(call) + "\n")

    def for_runs(self, run_ids: set[int]) -> list[dict]:
        with self.lock:
            return [c for c in self.calls if c.get("run") in run_ids]


def start_effect_server(layout: Layout, log: EffectLog, stack: Stack) -> None:
    """The HTTP server the tools' side effects land on (POST /effect), on the bridge address."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            try:
                call = json.loads(self.rfile.read(length))
            except ValueError:
                self.send_response(400)
                self.end_headers()
                return
            call["t"] = time.time()
            log.add(call)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer((layout.bridge_ip, layout.effect_port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="effect-server", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    stack.push("effect server", stop)
