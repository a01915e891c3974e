"""Live run events that never lie: gap-free per-run seq from every writer, and real
WebSocket clients (Channels' communicator on the real ASGI app) that get every committed
event after their cursor exactly once, across drops and reconnects, never an uncommitted
one, on the embedded default (the shared poller) and with Redis as the channel layer.
The shared poller's database reads per interval do not grow with the number of sockets."""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from accounts.tokens import token_create
from ballast.asgi import application
from runs.engine.store import events as run_events
from runs.live import hub as live_hub
from runs.models import Run, RunEvent, RunEventKind
from tests.support.bounded import TIME_SLACK, assert_took_under
from tests.support.specs import chain, graph, node, run_local, transform
from tests.support.world import World, failing_spec, linear_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]
TIMEOUT = 10


def redis_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(params=["embedded", "redis"])
def layer(request: Any, settings: Any) -> str:
    """The push path under test: the shared poller alone, or Redis push plus the safety poll."""
    if request.param == "redis":
        if not redis_up():
            pytest.skip("Redis is not running at 127.0.0.1:6379")
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"], "prefix": f"ballast-test-{uuid.uuid4().hex[:8]}"},
            }
        }
        settings.BALLAST_LIVE_PUSH = True
        # Long enough that a test passing within it was served by the push, not the poll.
        settings.BALLAST_LIVE_SAFETY_SECONDS = 3.0
    return request.param


def seqs_of(run: Run) -> list[int]:
    return list(RunEvent.objects.filter(run=run).order_by("id").values_list("seq", flat=True))


def add_event(run_id: int, n: int = 1, pause: float = 0.0) -> None:
    """Commit ``n`` events to the run through the one writer, in their own transactions,
    ``pause`` seconds apart."""
    for i in range(n):
        if i and pause:
            time.sleep(pause)  # scenario: events committed apart in time
        run_events.create(run_id=run_id, kind=RunEventKind.STEP_REQUEUED, data={"by": "test", "i": i})


async def connect(path: str) -> WebsocketCommunicator:
    ws = WebsocketCommunicator(application, path)
    connected, _ = await ws.connect(timeout=TIMEOUT)
    assert connected, path
    return ws


async def receive_events(ws: WebsocketCommunicator, count: int) -> list[dict[str, Any]]:
    return [(await ws.receive_json_from(TIMEOUT))["event"] for _ in range(count)]


def fan_out_spec() -> dict[str, Any]:
    """start -> a, b (parallel) -> join -> end: commits of parallel branches."""
    nodes = [node("start", "start"), transform("a", a="1"), transform("b", b="2"), node("join", "join"), transform("sum", c="a + b"), node("end", "end")]
    edges = chain("start", "a", "join", "sum", "end") + chain("start", "b", "join")
    return graph(nodes, edges, state={"a": {"default": 0}, "b": {"default": 0}, "c": {"default": 0}})


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "portable-commit"])
def test_every_writer_numbers_a_runs_events_one_by_one_without_gaps(world: World, settings: Any, fast: bool) -> None:
    settings.BALLAST_FAST_COMMIT = fast
    runs = [
        run_local(linear_spec(), {"x": 2}),  # the sequential fast path (when on)
        run_local(fan_out_spec(), {}),  # parallel branches and a join: the portable commit
        run_local(failing_spec(), {"x": 1, "zero": 0}),  # a failed step and run
        world.decided(world.waiting_run()),  # waiting at a gate, decided, resumed
    ]
    for run in runs:
        run.refresh_from_db()
        seqs = seqs_of(run)
        assert run.status in ("succeeded", "failed"), run.error
        assert seqs == list(range(1, len(seqs) + 1)), (run.pk, seqs)  # id order is seq order: commit order
        assert run.read_event_seq() == len(seqs)
    assert runs[0].status == "succeeded" and runs[2].status == "failed"


def test_seq_is_unique_per_run(world: World) -> None:
    run = world.succeeded_run()
    with pytest.raises(IntegrityError), transaction.atomic():
        RunEvent.objects.create(run=run, seq=1, kind=RunEventKind.RUN_RESUMED, data={})


def test_a_rolled_back_event_gives_its_number_back(world: World) -> None:
    run = world.succeeded_run()
    before = seqs_of(run)
    with pytest.raises(RuntimeError), transaction.atomic():
        run_events.create(run_id=run.pk, kind=RunEventKind.RUN_RESUMED, data={"by": "rolled back"})
        raise RuntimeError("roll back")
    add_event(run.pk)
    assert seqs_of(run) == before + [len(before) + 1]


def test_subscribe_from_seq_n_gets_every_later_event_in_order_then_live(world: World, layer: str, settings: Any) -> None:
    if layer == "redis":
        # Far longer than any wait for a core: events seen before it were pushed, not polled.
        settings.BALLAST_LIVE_SAFETY_SECONDS = 30.0
    run = world.waiting_run()
    key = token_create(user=world.users["starter"], name="ws")[1]
    have = seqs_of(run)
    n = 2

    async def body() -> tuple[list[int], list[int], float]:
        ws = await connect(f"/ws/runs/{run.pk}/?after={n}&token={key}")
        backlog = [e["seq"] for e in await receive_events(ws, len(have) - n)]
        assert await ws.receive_nothing(0.3)
        started = time.monotonic()
        await database_sync_to_async(add_event)(run.pk, 5)
        live_seqs = [e["seq"] for e in await receive_events(ws, 5)]
        took = time.monotonic() - started
        assert await ws.receive_nothing(0.3)  # none twice
        await ws.disconnect()
        return backlog, live_seqs, took

    backlog, live_seqs, took = async_to_sync(body)()
    assert backlog == have[n:]
    assert live_seqs == list(range(len(have) + 1, len(have) + 6))
    if layer == "redis":
        assert_took_under(took, 2.5 * TIME_SLACK, "live events")  # pushed, not found by the 30 s safety poll


def test_reconnect_after_a_drop_gets_the_missed_events_none_twice(world: World, layer: str) -> None:
    run = world.waiting_run()
    key = token_create(user=world.users["starter"], name="ws")[1]
    start = len(seqs_of(run))

    async def body() -> list[int]:
        seen: list[int] = []
        ws = await connect(f"/ws/runs/{run.pk}/?token={key}")
        seen += [e["seq"] for e in await receive_events(ws, start)]
        await database_sync_to_async(add_event)(run.pk, 3)
        seen += [e["seq"] for e in await receive_events(ws, 3)]
        await ws.disconnect()  # the drop; events commit while no socket is open
        await database_sync_to_async(add_event)(run.pk, 4)
        # The decision drives the run to its end through the real commit paths.
        await database_sync_to_async(world.decided)(run)
        total = await database_sync_to_async(lambda: Run.objects.get(pk=run.pk).read_event_seq())()
        ws = await connect(f"/ws/runs/{run.pk}/?after={seen[-1]}&token={key}")
        seen += [e["seq"] for e in await receive_events(ws, total - seen[-1])]
        assert await ws.receive_nothing(0.3)
        await database_sync_to_async(add_event)(run.pk, 2)  # and live again after the replay
        seen += [e["seq"] for e in await receive_events(ws, 2)]
        assert await ws.receive_nothing(0.3)
        await ws.disconnect()
        return seen

    seen = async_to_sync(body)()
    assert seen == list(range(1, len(seen) + 1))
    assert seen == seqs_of(run)


def test_an_uncommitted_or_rolled_back_event_is_never_sent(world: World, layer: str) -> None:
    """A writer holds an event uncommitted while the socket polls (and the hub is told of
    the run by Redis or reads it), then rolls back; the next committed event takes its seq."""
    run = world.succeeded_run()
    key = token_create(user=world.users["starter"], name="ws")[1]
    last = run.read_event_seq()
    written, release = threading.Event(), threading.Event()

    def hold_then_roll_back() -> None:
        try:
            with transaction.atomic():
                run_events.create(run_id=run.pk, kind=RunEventKind.RUN_RESUMED, data={"by": "never committed"})
                written.set()
                release.wait(10)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        finally:
            connection.close()

    async def body() -> list[dict[str, Any]]:
        ws = await connect(f"/ws/runs/{run.pk}/?after={last}&token={key}")
        writer = threading.Thread(target=hold_then_roll_back)
        writer.start()
        assert await asyncio.get_running_loop().run_in_executor(None, written.wait, 10)
        assert await ws.receive_nothing(1.0)  # several poll intervals: the uncommitted row is not read
        release.set()
        await asyncio.get_running_loop().run_in_executor(None, writer.join, 10)
        assert await ws.receive_nothing(0.5)
        await database_sync_to_async(add_event)(run.pk)
        got = [(await ws.receive_json_from(TIMEOUT))["event"]]
        assert await ws.receive_nothing(0.3)
        await ws.disconnect()
        return got

    got = async_to_sync(body)()
    assert [(e["seq"], e["data"].get("by")) for e in got] == [(last + 1, "test")]
    assert "never committed" not in str(list(RunEvent.objects.filter(run=run).values_list("data", flat=True)))


@pytest.mark.skipif(not redis_up(), reason="Redis is not running at 127.0.0.1:6379")
def test_a_full_channel_layer_buffer_loses_nothing(world: World, settings: Any, caplog: Any) -> None:
    """channels-redis drops messages for a channel at capacity; the hub sees the gap in seq
    and reads the rows: the socket still gets every event once, in order.

    Cancelling the receiver mid-read can leave its Redis connection broken, so that the
    restarted receive fails once: the hub then reads the rows at the poll interval until
    the layer answers, and a push arriving after that read finds no gap. Either way the
    dropped pushes cost nothing; the test accepts either path and says which it took."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"], "prefix": f"ballast-test-{uuid.uuid4().hex[:8]}", "capacity": 2},
        }
    }
    settings.BALLAST_LIVE_PUSH = True
    settings.BALLAST_LIVE_SAFETY_SECONDS = 30.0  # only a gap wakes the reader in this test
    run = world.succeeded_run()
    key = token_create(user=world.users["starter"], name="ws")[1]
    last = run.read_event_seq()

    async def body() -> tuple[list[int], dict[str, int]]:
        ws = await connect(f"/ws/runs/{run.pk}/?after={last}&token={key}")
        await asyncio.sleep(0.3)  # the consumer follows the run just after the handshake
        hub = live_hub.hub()
        hub.stats["pushes"] = 0
        hub.stats["gaps"] = 0
        # Block the hub's receiver so that the pushes pile up in Redis past capacity.
        receiver = hub.receiver
        assert receiver is not None
        receiver.cancel()
        # Apart, so that the publisher thread sends them as separate messages (it
        # coalesces what commits while it is busy sending).
        await database_sync_to_async(add_event)(run.pk, 30, 0.02)
        await asyncio.sleep(0.5)
        hub.receiver = None
        hub._start()
        await database_sync_to_async(add_event)(run.pk)  # the next push reveals the gap
        got = [e["seq"] for e in await receive_events(ws, 31)]
        assert await ws.receive_nothing(0.3)
        await ws.disconnect()
        return got, dict(hub.stats)

    got, stats = async_to_sync(body)()
    assert got == list(range(last + 1, last + 32))
    assert stats["pushes"] < 31, stats  # the layer kept at most its capacity of the 30
    layer_failed = "receive from the channel layer failed" in caplog.text
    assert stats["gaps"] >= 1 or layer_failed, stats  # the gap seen, or the rows read while it was down


def test_a_socket_follows_several_runs_and_only_readable_ones(world: World, layer: str) -> None:
    mine, other = world.succeeded_run(), world.succeeded_run()
    key = token_create(user=world.users["viewer"], name="ws")[1]  # the outsider may read none
    starter = token_create(user=world.users["starter"], name="ws")[1]
    mine_seq, other_seq = mine.read_event_seq(), other.read_event_seq()  # read now (a query), before the events below

    async def body() -> tuple[dict[str, Any], list[tuple[int, int]], dict[str, Any]]:
        viewer = await connect(f"/ws/runs/?token={key}")
        await viewer.send_json_to({"type": "follow", "run": mine.pk, "after": 0})
        refused = await viewer.receive_json_from(TIMEOUT)
        ws = await connect(f"/ws/runs/?token={starter}")
        await ws.send_json_to({"type": "follow", "run": mine.pk, "after": mine_seq})
        await ws.send_json_to({"type": "follow", "run": other.pk, "after": other_seq - 1})
        got = [(e["run"], e["seq"]) for e in await receive_events(ws, 1)]
        await database_sync_to_async(add_event)(mine.pk)
        await database_sync_to_async(add_event)(other.pk)
        got += [(e["run"], e["seq"]) for e in await receive_events(ws, 2)]
        await ws.send_json_to({"type": "follow", "run": "x"})
        bad = await ws.receive_json_from(TIMEOUT)
        assert await viewer.receive_nothing(0.2)
        await viewer.disconnect()
        await ws.disconnect()
        return refused, got, bad

    refused, got, bad = async_to_sync(body)()
    assert refused["type"] == "error" and refused["error"]["code"] == "not_found" and refused["run"] == mine.pk
    assert sorted(got) == sorted([(other.pk, other_seq), (mine.pk, mine_seq + 1), (other.pk, other_seq + 1)])
    assert bad["type"] == "error" and bad["error"]["where"] == "run"


@contextlib.asynccontextmanager
async def counting() -> AsyncIterator[list[str]]:
    """The SQL of the queries run on the database thread the shared poller's reads run on
    (the hub's tasks run in an empty context, where thread-sensitive calls share one
    thread), filled in when the block ends."""
    captured = CaptureQueriesContext(connection)
    loop = asyncio.get_running_loop()
    sql: list[str] = []

    async def on_hub_thread(fn: Any, *args: Any) -> Any:
        return await loop.create_task(database_sync_to_async(fn)(*args), context=contextvars.Context())

    await on_hub_thread(captured.__enter__)
    try:
        yield sql
    finally:
        await on_hub_thread(captured.__exit__, None, None, None)
        sql += await on_hub_thread(lambda: [q["sql"] for q in captured.captured_queries])


def selects(sql: list[str]) -> int:
    """Reads among the captured queries (the writes of the test's own commits left out)."""
    return sum(1 for q in sql if q.lstrip().upper().startswith("SELECT"))


def _measure(runs: list[Run], sockets_per_run: int, key: str, seconds: float) -> dict[str, Any]:
    """Open the sockets, let them read their backlogs, then count the database queries of
    the web side (the shared poller) for ``seconds`` while nothing commits."""
    after = {r.pk: r.read_event_seq() for r in runs}  # read_event_seq() queries: not in the event loop

    async def body() -> dict[str, Any]:
        clients = []
        for r in runs:
            for _ in range(sockets_per_run):
                clients.append(await connect(f"/ws/runs/{r.pk}/?after={after[r.pk]}&token={key}"))
        hub = live_hub.hub()
        await asyncio.sleep(0.5)
        polls_before = hub.stats["polls"]
        async with counting() as captured:
            await asyncio.sleep(seconds)
        polls = hub.stats["polls"] - polls_before
        for ws in clients:
            await ws.disconnect()
        return {"queries": len(captured), "polls": polls, "sockets": len(clients)}

    return async_to_sync(body)()


def test_200_sockets_cost_the_database_what_one_socket_does(world: World, settings: Any) -> None:
    settings.BALLAST_LIVE_POLL_SECONDS = 0.1
    key = token_create(user=world.users["admin"], name="ws")[1]
    runs = [world.succeeded_run() for _ in range(4)]
    for r in runs:
        r.refresh_from_db()
    one = _measure(runs[:1], 1, key, 1.0)
    many = _measure(runs, 50, key, 1.0)
    assert many["sockets"] == 200 and one["sockets"] == 1
    print("idle, 1 socket:", one, "200 sockets:", many)
    for got in (one, many):
        assert got["polls"] >= 5, got  # the poller ran about every 0.1 s
        assert got["queries"] >= got["polls"] - 1, got  # and its reads were counted (the last may be in flight)
        # One query per poll while nothing moves (the counters of every followed run).
        assert got["queries"] <= got["polls"] + 1, got
    assert many["queries"] <= one["queries"] * 1.5 + 2, (one, many)


def test_200_sockets_on_200_runs_read_o1_queries_per_poll_while_events_commit(world: World, settings: Any) -> None:
    settings.BALLAST_LIVE_POLL_SECONDS = 0.1
    key = token_create(user=world.users["admin"], name="ws")[1]
    runs = [world.queued_run() for _ in range(200)]
    assert all(r.read_event_seq() == 1 for r in runs)  # run_created

    async def body() -> dict[str, Any]:
        clients = [(r, await connect(f"/ws/runs/{r.pk}/?after=1&token={key}")) for r in runs]
        hub = live_hub.hub()
        await asyncio.sleep(0.5)
        polls_before = hub.stats["polls"]
        async with counting() as captured:
            for r in runs[:100]:
                await database_sync_to_async(add_event)(r.pk)
            received = [await ws.receive_json_from(TIMEOUT) for _, ws in clients[:100]]
            await asyncio.sleep(0.5)
        polls = hub.stats["polls"] - polls_before
        for _, ws in clients[100:]:
            assert await ws.receive_nothing(0.01)
        for _, ws in clients:
            await ws.disconnect()
        return {"reads": selects(captured), "polls": polls, "received": received, "hub_reads": hub.stats["reads"]}

    got = async_to_sync(body)()
    print("200 sockets, 100 runs moving:", {k: v for k, v in got.items() if k != "received"})
    assert [m["event"]["run"] for m in got["received"]] == [r.pk for r in runs[:100]]
    assert got["polls"] >= 3
    # At most two queries per poll: the counters, and the new events of the runs that moved.
    # (The test's own commits ran on this thread too: only the SELECTs are counted.)
    assert got["polls"] <= got["reads"] <= 2 * got["polls"] + 2, {k: v for k, v in got.items() if k != "received"}


def test_while_the_channel_layer_is_down_the_rows_are_read_at_the_poll_interval(world: World, settings: Any) -> None:
    """No push comes while the layer's receive fails: the hub reads the rows at the poll
    interval, not the safety interval (30 s here, three times the socket's wait)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens here once the probe is closed
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [f"redis://127.0.0.1:{closed}/0"]}}
    }
    settings.BALLAST_LIVE_PUSH = True
    settings.BALLAST_LIVE_SAFETY_SECONDS = 30.0
    run = world.succeeded_run()
    key = token_create(user=world.users["starter"], name="ws")[1]
    last = run.read_event_seq()

    async def body() -> list[int]:
        ws = await connect(f"/ws/runs/{run.pk}/?after={last}&token={key}")
        assert await ws.receive_nothing(0.5)  # the consumer follows the run and reads its backlog
        await database_sync_to_async(add_event)(run.pk, 2)
        got = [e["seq"] for e in await receive_events(ws, 2)]
        await ws.disconnect()
        return got

    assert async_to_sync(body)() == [last + 1, last + 2]
