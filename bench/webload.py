"""The web process under load: the run list, the inbox and the run page's API reads at 1, 50
and 200 concurrent users, and 1,000 open WebSockets on one web process.

``python -m bench web [--n RUNS] [--users 1,50,200] [--seconds 30] [--sockets 1000]``.

Served as in production (docker-compose.yml): one daphne process (``ballast.asgi``, DEBUG
off) on the bench database, Redis as the channel layer and the cache (throttle counters),
``BENCH_WEB_REDIS_URL``, default ``redis://127.0.0.1:6379/7``). Seeded: ``n`` finished runs
(default 3,000), copied row for row (steps, attempts, events) from a real 8-node run, and
``n // 10`` runs waiting at an approval gate, copied from a real one; one user in the
``operators`` and ``approvers`` groups reads them with an API token (the API rate limit is
raised for the bench: the throttle still runs, in Redis, but no user is refused).

HTTP: locust (bench/webload_locust.py) in a process of its own, headless, no think time:
each user loads one page over and over, the requests the browser app sends for it (the run
list's first page, the inbox's first page, a run page's run, graph, node kinds, actions and
approvals; each with the top bar's inbox counts). Per page and user count: requests/s,
p50, p95 and failures over the run after every user started (locust's ``--reset-stats``),
and what the machine spent meanwhile: CPU cores used by daphne, by locust, by the
PostgreSQL server (every database: its processes and the ones that exited) and by the
whole machine; the web process's threads and the bench database's connections at most,
and the connections PostgreSQL opened per second (``pg_stat_database.sessions``).

WebSockets: a fresh daphne, ``sockets`` asyncio ``websockets`` clients on ``ws/runs/`` (the
browser's socket) each following one waiting run from seq 0 (its backlog must arrive whole),
held open for ``seconds``; the web process's resident memory before and after, its CPU and
the database's transactions while they idle; then 10 of the followed runs are approved in
this process and every socket following one must receive the commit's events (commit to
receipt latency through the Redis push).

On PostgreSQL the web process connects as a role of its own limited to
``BENCH_WEB_CONN_LIMIT`` (60) connections, so that a bench on a shared server cannot take
every connection (a superuser is not held by a database's own limit): a request it refuses
answers 500 and is counted as a failure.
"""
from __future__ import annotations

import asyncio
import csv
import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bench import graphs
from bench.cases import _clone_waiting_runs, start_inprocess
from bench.cluster import WebServer, free_port, rss_kib, wait_until
from bench.core import REPO, WORK_DIR, Reporter, check, log, pg_url, reset_tables

REDIS_URL = os.environ.get("BENCH_WEB_REDIS_URL", "redis://127.0.0.1:6379/7")
CONN_LIMIT = int(os.environ.get("BENCH_WEB_CONN_LIMIT", "60"))
PAGES = ("run_list", "inbox", "run_page")
DECIDED = 10
TICK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- seeding


def _seed(history: int) -> dict[str, Any]:
    """``history`` finished runs and ``history // 10`` waiting at a gate; the reader and its token."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection

    from accounts.tokens import token_create
    from approvals.models import ApprovalRequest
    from runs.models import Run

    reset_tables()
    finished, _ = start_inprocess(graphs.publish(graphs.linear(8)))
    check(Run.objects.get(pk=finished).status == "succeeded", "the finished template run did not succeed")
    _clone_waiting_runs(finished, history - 1)
    waiting, _ = start_inprocess(graphs.publish(graphs.gate()), {"name": "Ada"})
    check(Run.objects.get(pk=waiting).status == "waiting", "the gate template run is not waiting")
    _clone_waiting_runs(waiting, max(1, history // 10) - 1)
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE")
    User = get_user_model()
    User.objects.filter(username="bench-web").delete()
    user = User.objects.create_user("bench-web", "web@localhost", None)
    for name in ("operators", "approvers"):
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    _, key = token_create(user=user, name="bench web", by="bench")
    done = list(Run.objects.filter(status="succeeded").order_by("id").values_list("id", flat=True))
    pending = list(ApprovalRequest.objects.filter(status="pending").order_by("run_id").values_list("run_id", "id"))
    check(len(done) == history and len(pending) == max(1, history // 10), f"seeded {len(done)} finished, {len(pending)} waiting")
    return {"user": user, "key": key, "finished": done, "waiting": [r for r, _ in pending],
            "approval_of": dict(pending), "seq": Run.objects.get(pk=waiting).read_event_seq()}


def _web_role(db: str) -> str:
    """DATABASE_URL for the web process: a login role of the bench database's own, limited
    to CONN_LIMIT connections, with every right on its tables (PostgreSQL); else the bench URL."""
    from bench.core import database_url

    if db != "postgres":
        return database_url(db)
    from django.db import connection

    role = _role_name()
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
        if not cur.fetchone():
            cur.execute(f'CREATE ROLE "{role}" LOGIN')
        cur.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT {CONN_LIMIT}')
        cur.execute(f'GRANT ALL ON SCHEMA public TO "{role}"')
        cur.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
        cur.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    return urlparse(pg_url())._replace(netloc=f"{role}@{urlparse(pg_url()).hostname}:{urlparse(pg_url()).port or 5432}").geturl()


def _role_name() -> str:
    from django.db import connection

    return f"{connection.settings_dict['NAME']}_web"[:63]


def _drop_web_role(db: str) -> None:
    if db != "postgres":
        return
    from django.db import connection

    role = _role_name()
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
        if cur.fetchone():
            cur.execute(f'DROP OWNED BY "{role}"')  # its grants in this database
            cur.execute(f'DROP ROLE "{role}"')


class PgBouncer:
    """pgbouncer in transaction mode in front of the bench database, as a process group of
    its own (run as ``nobody``: it refuses root), pooling at most ``pool`` server connections
    of the web role. :attr:`url` is the web process's DATABASE_URL (preparing off)."""

    def __init__(self, role: str, pool: int):
        from django.db import connection

        self.db = connection.settings_dict["NAME"]
        self.port = free_port()
        self.dir = WORK_DIR / f"pgbouncer-{self.port}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o755)
        self.ini = self.dir / "pgbouncer.ini"
        self.ini.write_text(
            f"[databases]\n{self.db} = host=127.0.0.1 port=5432 dbname={self.db} user={role}\n"
            f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\nauth_type = any\n"
            f"pool_mode = transaction\ndefault_pool_size = {pool}\nmax_client_conn = 5000\n"
            "ignore_startup_parameters = extra_float_digits,options\n")
        self.ini.chmod(0o644)
        self.url = f"postgres://{role}@127.0.0.1:{self.port}/{self.db}?prepare_threshold=none"
        self.pool = pool
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> PgBouncer:
        import shutil

        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        check(Path(binary).exists(), "--pooler needs pgbouncer (apt-get install pgbouncer)")
        with open(self.dir / "pgbouncer.log", "ab") as logf:
            self.proc = subprocess.Popen([binary, "-u", "nobody", str(self.ini)], stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        from bench.loopback import accepts

        wait_until(lambda: accepts(self.port) or self.proc.poll() is not None, 30, "pgbouncer to listen")
        check(self.proc.poll() is None, f"pgbouncer exited: {(self.dir / 'pgbouncer.log').read_text()[-2000:]}")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------- what the machine spends


def _proc_cpu(pid: int, children: bool = False) -> float:
    """CPU seconds of ``pid`` (with its waited-for children's if asked); 0 if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            rest = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(rest[11]) + int(rest[12]) + ((int(rest[13]) + int(rest[14])) if children else 0)
    return ticks / TICK


def _children(ppid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        out.append(int(entry))
            except OSError:
                pass
    return out


def _machine_busy() -> float:
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / TICK


def _threads(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler:
    """Every 0.5 s, in a thread: CPU seconds so far of daphne, locust, the PostgreSQL server
    and the machine; daphne's threads; the bench database's connections and sessions."""

    def __init__(self, db: str, web_pid: int):
        self.web_pid, self.locust_pid = web_pid, 0
        self.samples: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.pg = None
        self.postmaster = 0
        if db == "postgres":
            import psycopg
            from django.db import connection

            self.dbname = connection.settings_dict["NAME"]
            self.pg = psycopg.connect(pg_url("postgres"), autocommit=True)
            self.postmaster = int(self.pg.execute("SELECT pid FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()[0])
            with open(f"/proc/{self.postmaster}/stat") as fh:
                self.postmaster = int(fh.read().rsplit(")", 1)[1].split()[1])
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> dict[str, Any]:
        s: dict[str, Any] = {"t": time.time(), "web": _proc_cpu(self.web_pid), "locust": _proc_cpu(self.locust_pid) if self.locust_pid else 0.0,
                             "machine": _machine_busy(), "threads": _threads(self.web_pid)}
        if self.pg is not None:
            s["pg"] = _proc_cpu(self.postmaster, children=True) + sum(_proc_cpu(p) for p in _children(self.postmaster))
            row = self.pg.execute(
                "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = %s), "
                "(SELECT sessions FROM pg_stat_database WHERE datname = %s), "
                "(SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s)", [self.dbname] * 3).fetchone()
            self.pg.execute("SELECT pg_stat_clear_snapshot()")
            s.update(conns=int(row[0]), sessions=int(row[1]), xacts=int(row[2]))
        return s

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.samples.append(self._sample())
            self.stop.wait(0.5)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()
        if self.pg is not None:
            self.pg.close()

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        """Rates between the samples nearest ``t0`` and ``t1``: cores used by each process,
        connections opened per second, transactions per second; maxima of threads and
        connections in between."""
        inside = [s for s in self.samples if t0 <= s["t"] <= t1]
        if len(inside) < 2:
            return {}
        a, b = inside[0], inside[-1]
        span = b["t"] - a["t"]
        out: dict[str, Any] = {f"cores_{k}": round((b[k] - a[k]) / span, 2) for k in ("web", "locust", "machine", "pg") if k in a}
        out["web_threads_max"] = max(s["threads"] for s in inside)
        if "conns" in a:
            out["db_connections_max"] = max(s["conns"] for s in inside)
            out["db_connects_per_s"] = round((b["sessions"] - a["sessions"]) / span, 1)
            out["db_xacts_per_s"] = round((b["xacts"] - a["xacts"]) / span, 1)
        return out


# --------------------------------------------------------------------------- HTTP with locust


def _locust(page: str, users: int, seconds: int, port: int, key: str, runs: str, sampler: Sampler) -> dict[str, Any]:
    """One headless locust run; its aggregated and per-endpoint figures after every user started."""
    prefix = WORK_DIR / f"web-{page}-{users}"
    for old in WORK_DIR.glob(f"{prefix.name}_*.csv"):
        old.unlink()
    env = dict(os.environ, BENCH_WEB_PAGE=page, BENCH_WEB_TOKEN=key, BENCH_WEB_RUNS=runs)
    cmd = [sys.executable, "-m", "locust", "-f", str(REPO / "bench" / "webload_locust.py"), "--headless", "--only-summary",
           "-u", str(users), "-r", str(users), "-t", f"{seconds + 2}s", "--reset-stats", "--stop-timeout", "10",
           "--host", f"http://127.0.0.1:{port}", "--csv", str(prefix), "--loglevel", "WARNING"]
    with open(WORK_DIR / "web-locust.log", "ab") as logf:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        sampler.locust_pid = proc.pid
        try:
            proc.wait(timeout=seconds + 120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            sampler.locust_pid = 0
    with open(f"{prefix}_stats.csv") as fh:
        rows = {r["Name"]: r for r in csv.DictReader(fh)}
    with open(f"{prefix}_stats_history.csv") as fh:
        history = [r for r in csv.DictReader(fh) if r["Name"] == "Aggregated" and int(r["User Count"]) == users]
    check(rows.get("Aggregated") and int(rows["Aggregated"]["Request Count"]) > 0, f"locust {page} x{users}: no requests (see {WORK_DIR}/web-locust.log)")
    total = rows.pop("Aggregated")
    with open(f"{prefix}_failures.csv") as fh:
        failed = {f"{r['Name']}: {r['Error']}"[:200]: int(r["Occurrences"]) for r in csv.DictReader(fh)}
    window = sampler.window(float(history[0]["Timestamp"]) + 1, float(history[-1]["Timestamp"])) if len(history) > 2 else {}
    return {
        "rps": float(total["Requests/s"]), "requests": int(total["Request Count"]), "failures": int(total["Failure Count"]),
        "p50": float(total["50%"]), "p95": float(total["95%"]), "p99": float(total["99%"]),
        "endpoints": {n: {"rps": round(float(r["Requests/s"]), 1), "p50": float(r["50%"]), "p95": float(r["95%"]), "failures": int(r["Failure Count"])}
                      for n, r in rows.items()},
        "failure_kinds": failed,
        **window,
    }


# --------------------------------------------------------------------------- WebSockets


class SocketFarm:
    """``len(runs)`` ``websockets`` clients on ``ws/runs/``, each following one run from seq 0,
    on an asyncio loop in a thread of this process."""

    def __init__(self, port: int, key: str, runs: list[int]):
        self.url = f"ws://127.0.0.1:{port}/ws/runs/?token={key}"
        self.runs = runs
        self.got: list[list[tuple[float, dict[str, Any]]]] = [[] for _ in runs]
        self.closed: dict[int, str] = {}
        self.errors: list[str] = []
        self.retries: list[str] = []
        self.opened = 0
        self.loop = asyncio.new_event_loop()
        self.sockets: list[Any] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def _one(self, i: int, run: int, gate: asyncio.Semaphore) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake

        try:
            async with gate:
                # As the browser does (frontend/src/lib/liveEvents.ts): a refused or dropped
                # handshake is tried again after 0.5 s, doubling; each retry is counted.
                for attempt in range(6):
                    try:
                        ws = await connect(self.url, open_timeout=60, ping_interval=None, max_size=None)
                        break
                    except (OSError, InvalidHandshake) as exc:
                        if attempt == 5:
                            raise
                        self.retries.append(f"{type(exc).__name__}: {exc}"[:120])
                        await asyncio.sleep(0.5 * 2**attempt)
                self.sockets.append(ws)
                await ws.send(json.dumps({"type": "follow", "run": run, "after": 0}))
            self.opened += 1
            async for raw in ws:
                message = json.loads(raw)
                if message.get("type") == "event":
                    self.got[i].append((time.time(), message["event"]))
                elif message.get("type") == "error":
                    self.errors.append(str(message)[:200])
            self.closed[i] = f"closed {ws.close_code}"
        except ConnectionClosed as exc:
            self.closed[i] = f"closed {exc.rcvd.code if exc.rcvd else None}"
        except Exception as exc:
            self.closed[i] = f"{type(exc).__name__}: {exc}"

    async def _open_all(self) -> None:
        gate = asyncio.Semaphore(50)
        for i, run in enumerate(self.runs):
            self.loop.create_task(self._one(i, run, gate))

    async def _close_all(self) -> None:
        await asyncio.gather(*(ws.close() for ws in self.sockets), return_exceptions=True)

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._open_all(), self.loop).result()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close_all(), self.loop).result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)


def _sockets(rep: Reporter, db: str, count: int, hold: int, seed: dict[str, Any], env: dict[str, str]) -> None:
    from approvals.services import approval_decide
    from runs.engine import api as engine

    port = free_port()
    web = WebServer("web-sockets", db, port)
    web.extra_env = env
    waiting = seed["waiting"]
    runs = [waiting[i % len(waiting)] for i in range(count)]
    with web:
        web.wait_ready()
        farm = SocketFarm(port, seed["key"], runs[:1])  # warm: the hub, the channel layer, the first imports
        farm.start()
        wait_until(lambda: len(farm.got[0]) >= seed["seq"], 60, "the warm-up socket's backlog", cluster=web)
        farm.close()
        rss_before = rss_kib(web.proc.pid)
        with Sampler(db, web.proc.pid) as sampler:
            t_open = time.time()
            farm = SocketFarm(port, seed["key"], runs)
            farm.start()
            try:
                wait_until(lambda: all(len(g) >= seed["seq"] for g in farm.got) or len(farm.closed) > 0, 300,
                           f"{count} sockets' backlogs", cluster=web, poll=0.2)
                opened_s = time.time() - t_open
                check(not farm.closed and not farm.errors, f"sockets closed or refused while opening: {list(farm.closed.values())[:5]} {farm.errors[:5]}")
                t_idle = time.time()
                time.sleep(hold)
                idle = sampler.window(t_idle, time.time())
                still_open = count - len(farm.closed)
                rss_after = rss_kib(web.proc.pid)
                check(still_open == count, f"{count - still_open} sockets closed while idle: {list(farm.closed.values())[:5]}")
                before = {i: len(g) for i, g in enumerate(farm.got)}
                decided = waiting[:DECIDED]
                t_decide = time.time()
                with engine.local_mode():  # the runs' successors stay queued: no worker drives them
                    for run in decided:
                        approval_decide(approval_id=seed["approval_of"][run], decision="approve", user=seed["user"], comment="bench")
                followers = [i for i, r in enumerate(runs) if r in decided]
                wait_until(lambda: all(len(farm.got[i]) > before[i] for i in followers), 60,
                           "the decided runs' events at every socket following them", cluster=web, poll=0.05)
                time.sleep(1.0)  # the rest of each commit's events
                latencies = [(t - datetime.fromisoformat(e["created_at"]).timestamp()) * 1000
                             for i in followers for t, e in farm.got[i][before[i]:]
                             if datetime.fromisoformat(e["created_at"]).timestamp() >= t_decide - 1]
                for i in followers:
                    seqs = [e["seq"] for _, e in farm.got[i]]
                    check(seqs == list(range(1, len(seqs) + 1)), f"socket {i}: seqs {seqs} not 1..n once in order")
                check(len(farm.closed) == 0, f"sockets closed: {list(farm.closed.values())[:5]}")
            finally:
                farm.close()
    rep.emit("web.sockets", n=count, runs=1, samples=latencies, unit="ms", per_commit=None,
             sockets_open_after_hold=still_open, hold_s=hold, open_all_s=round(opened_s, 1),
             rss_before_mib=round(rss_before / 1024, 1), rss_after_mib=round(rss_after / 1024, 1),
             rss_per_socket_kib=round((rss_after - rss_before) / count, 1), decided_runs=DECIDED, sockets_told=len(followers),
             handshake_retries=len(farm.retries), retry_reasons=sorted(set(farm.retries))[:5],
             idle=idle, note=f"{count} websockets clients on ws/runs/ (one daphne, Redis channel layer), each following a waiting run from seq 0; "
                             f"held {hold} s; then {DECIDED} runs approved in the bench process: latency from each event's commit (created_at) "
                             "to its receipt by every socket following the run")


# --------------------------------------------------------------------------- the case


def case_web(rep: Reporter, db: str, n: int | None, runs: int, *, users: list[int], seconds: int, sockets: int, pooler: int = 0) -> None:
    """See the module docstring. ``pooler``: a pool size: the web process reaches PostgreSQL
    through pgbouncer in transaction mode with that many server connections (figures
    ``web.*.pgbouncer``); 0: directly, as docker-compose.yml does."""
    from contextlib import ExitStack

    check(not pooler or db == "postgres", "--pooler is for PostgreSQL")
    history = n or 3000
    t0 = time.perf_counter()
    seed = _seed(history)
    log(f"web: {history} finished and {len(seed['waiting'])} waiting runs seeded in {time.perf_counter() - t0:.1f} s")
    env = {"DATABASE_URL": _web_role(db), "BALLAST_CHANNELS_REDIS_URL": REDIS_URL, "BALLAST_CACHE_REDIS_URL": REDIS_URL,
           "BALLAST_API_RATE_TOKEN": "10000000/minute", "BALLAST_API_RATE_USER": "10000000/minute"}
    page_runs = ",".join([str(r) for r in seed["finished"][:: max(1, history // 20)][:20]] + [f"{r}:w" for r in seed["waiting"][:20]])
    suffix, via = (".pgbouncer", f"through pgbouncer (transaction mode, pool {pooler})") if pooler else ("", "straight to PostgreSQL")
    try:
        with ExitStack() as stack:
            if pooler:
                env["DATABASE_URL"] = stack.enter_context(PgBouncer(_role_name(), pooler)).url
            port = free_port()
            web = WebServer("web-http", db, port)
            web.extra_env = env
            with web:
                web.wait_ready()
                with Sampler(db, web.proc.pid) as sampler:
                    for page in PAGES:
                        for u in users:
                            load = os.getloadavg()[0]
                            got = _locust(page, u, seconds, port, seed["key"], page_runs, sampler)
                            log(f"web{suffix} {page} x{u}: {got['rps']:.1f} req/s, p50 {got['p50']:.0f} ms, p95 {got['p95']:.0f} ms, "
                                f"{got['failures']} failed; cores web {got.get('cores_web')} locust {got.get('cores_locust')} "
                                f"pg {got.get('cores_pg')} machine {got.get('cores_machine')}; conns max {got.get('db_connections_max')}, "
                                f"threads max {got.get('web_threads_max')} (load {load:.1f})")
                            p50, p95 = got.pop("p50"), got.pop("p95")
                            rep.emit(f"web.{page}.{u}_users{suffix}", n=got["requests"], runs=1, median=p50, p95=p95, unit="ms/request",
                                     users=u, seconds=seconds, load1_at_start=round(load, 2), runs_seeded=history, pooler=pooler or None, **got,
                                     note=f"locust, {u} users without think time loading the {page} page's API reads "
                                          f"(Authorization: Token), one daphne process {via}, Redis cache and channel layer, DEBUG off")
                check(web.alive, f"daphne exited:\n{web.log_tail()}")
            if sockets:
                _sockets(rep, db, sockets, seconds, seed, env)
    finally:
        _drop_web_role(db)
        _flush_redis()


def _flush_redis() -> None:
    """Empty the bench's Redis database (the throttle counters, the channel layer's keys)."""
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()


def parse_users(text: str) -> list[int]:
    return [int(u) for u in text.split(",") if u.strip()]

