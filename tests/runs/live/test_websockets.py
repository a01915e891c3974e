"""WebSockets: who may connect (every role to the inbox, who may read the run to a run's
stream; token or session; never anonymous, never a foreign Origin riding the session), run events after a cursor then live, including events
committed by another OS process, and the approvals inbox."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connection

from accounts.tokens import token_create, token_revoke
from ballast.asgi import application
from runs.models import RunEvent
from tests.support.world import ROLE_NAMES, World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]
ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = 10


def token_of(user: Any) -> str:
    return token_create(user=user, name="ws")[1]


def run_async(fn):
    """Run an async test body from a sync (transactional) test."""
    return async_to_sync(fn)()


async def try_connect(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> tuple[bool, WebsocketCommunicator]:
    communicator = WebsocketCommunicator(application, path, headers=headers or [])
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    return connected, communicator


def ws_paths(world: World) -> list[str]:
    return [f"/ws/runs/{world.waiting_run().pk}/", "/ws/approvals/"]


def test_websocket_permission_matrix(world: World) -> None:
    paths = ws_paths(world)
    tokens = {role: token_of(user) for role, user in world.users.items() if user is not None}

    async def body() -> dict[tuple[str, str], bool]:
        got = {}
        for role in ROLE_NAMES:
            for path in paths:
                query = f"?token={tokens[role]}" if role in tokens else ""
                connected, communicator = await try_connect(path + query)
                got[(role, path)] = connected
                if connected:
                    await communicator.disconnect()
        return got

    got = run_async(body)
    # Every signed-in user may open the inbox; a run's stream only who may read the run
    # (the outsider "viewer" may not: tests/accounts/test_read_permissions.py has the rule).
    assert got == {
        (role, path): role != "anonymous" and not (role == "viewer" and path.startswith("/ws/runs/"))
        for role in ROLE_NAMES
        for path in paths
    }


def test_websocket_auth_by_header_session_and_origin(world: World) -> None:
    from django.test import Client

    path = "/ws/approvals/"
    key = token_of(world.users["viewer"])
    revoked_token, revoked_key = token_create(user=world.users["viewer"], name="old")
    token_revoke(token=revoked_token, by="test")
    browser = Client()
    browser.force_login(world.users["approver"])
    cookie = f"sessionid={browser.cookies[settings.SESSION_COOKIE_NAME].value}".encode()

    async def body() -> dict[str, bool]:
        cases = {
            "header token": [(b"authorization", f"Token {key}".encode())],
            "bad token": [(b"authorization", b"Token bal_not-a-real-key")],
            "revoked token": [(b"authorization", f"Token {revoked_key}".encode())],
            "session, same origin": [(b"cookie", cookie), (b"origin", b"http://localhost")],
            "session, no origin": [(b"cookie", cookie)],
            "session, foreign origin": [(b"cookie", cookie), (b"origin", b"https://evil.example")],
        }
        got = {}
        for name, headers in cases.items():
            connected, communicator = await try_connect(path, headers)
            got[name] = connected
            if connected:
                await communicator.disconnect()
        return got

    assert run_async(body) == {
        "header token": True,
        "bad token": False,
        "revoked token": False,
        "session, same origin": True,
        "session, no origin": True,
        "session, foreign origin": False,
    }


def test_run_events_stream_from_a_cursor_then_live_and_resume_after_reconnect(world: World) -> None:
    run = world.waiting_run()
    key = token_of(world.users["starter"])
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))

    async def body() -> tuple[list[int], list[str], list[int]]:
        connected, ws = await try_connect(f"/ws/runs/{run.pk}/?after={seqs[1]}&token={key}")
        assert connected
        backlog = [(await ws.receive_json_from(TIMEOUT))["event"]["seq"] for _ in seqs[2:]]
        assert await ws.receive_nothing(0.5)
        await database_sync_to_async(world.decided)(run)
        live = []
        while not live or live[-1]["kind"] != "run_succeeded":
            live.append((await ws.receive_json_from(TIMEOUT))["event"])
        await ws.disconnect()
        # Reconnect with the last seq seen: nothing is repeated, nothing is lost.
        connected, again = await try_connect(f"/ws/runs/{run.pk}/?after={live[1]['seq']}&token={key}")
        assert connected
        replay = [(await again.receive_json_from(TIMEOUT))["event"]["seq"] for _ in live[2:]]
        assert await again.receive_nothing(0.3)
        await again.disconnect()
        return backlog, [e["kind"] for e in live], replay

    backlog, live_kinds, replay = run_async(body)
    assert backlog == seqs[2:]
    assert live_kinds[-1] == "run_succeeded" and "step_succeeded" in live_kinds
    all_seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert all_seqs == list(range(1, len(all_seqs) + 1))
    assert replay == all_seqs[len(seqs) + 2 :]


def test_bad_cursor_and_unknown_run_are_refused(world: World) -> None:
    key = token_of(world.users["starter"])
    run = world.waiting_run()

    async def body() -> list[bool]:
        results = []
        for path in (f"/ws/runs/{run.pk}/?after=-3&token={key}", f"/ws/runs/{run.pk}/?after=abc&token={key}", f"/ws/runs/999999/?token={key}"):
            connected, communicator = await try_connect(path)
            results.append(connected)
        return results

    assert run_async(body) == [False, False, False]


def test_a_socket_path_that_does_not_exist_is_refused_not_a_500(world: World) -> None:
    key = token_of(world.users["starter"])

    async def body() -> list[tuple[bool, int | None]]:
        results = []
        for path in (f"/ws/runs/abc/?token={key}", f"/ws/nothing/?token={key}", "/ws/"):
            communicator = WebsocketCommunicator(application, path)
            results.append(await communicator.connect(timeout=TIMEOUT))  # URLRouter raised ValueError here
        return results

    assert run_async(body) == [(False, 4404)] * 3


def _database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.mark.process
def test_events_committed_by_another_process_reach_the_socket(world: World) -> None:
    """The worker is another OS process (here `manage.py approve`, which decides and then
    drives the run in its own process): its commits still reach the WebSocket client,
    because the consumer reads rows, not an in-process channel layer."""
    run = world.waiting_run()
    key = token_of(world.users["builder"])
    last = RunEvent.objects.filter(run=run).order_by("-seq").values_list("seq", flat=True).first()
    env = {**os.environ, "DATABASE_URL": _database_url(), "BALLAST_LOG_LEVEL": "WARNING"}

    async def body() -> list[str]:
        connected, ws = await try_connect(f"/ws/runs/{run.pk}/?after={last}&token={key}")
        assert connected
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "approve", str(run.pk), "--comment", "from another process"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        kinds: list[str] = []
        try:
            while not kinds or kinds[-1] != "run_succeeded":
                kinds.append((await ws.receive_json_from(30))["event"]["kind"])
        finally:
            out, _ = proc.communicate(timeout=60)
            await ws.disconnect()
        assert proc.returncode == 0, out.decode()
        return kinds

    kinds = run_async(body)
    assert kinds[-1] == "run_succeeded" and "step_succeeded" in kinds


def test_approvals_inbox_sends_a_snapshot_then_arrivals_and_departures(world: World) -> None:
    first = world.waiting_run()
    key = token_of(world.users["approver"])
    operator_key = token_of(world.users["operator"])

    async def body() -> dict[str, Any]:
        connected, ws = await try_connect(f"/ws/approvals/?token={key}")
        assert connected
        snapshot = await ws.receive_json_from(TIMEOUT)
        _, other = await try_connect(f"/ws/approvals/?token={operator_key}")
        other_snapshot = await other.receive_json_from(TIMEOUT)
        second = await database_sync_to_async(world.waiting_run)()
        arrived = await ws.receive_json_from(TIMEOUT)
        await database_sync_to_async(world.decided)(first)
        closed = await ws.receive_json_from(TIMEOUT)
        assert await other.receive_nothing(0.5)  # not the operator's to decide: nothing arrives
        await ws.disconnect()
        await other.disconnect()
        return {"snapshot": snapshot, "other": other_snapshot, "arrived": arrived, "closed": closed, "second": second.pk}

    got = run_async(body)
    assert got["snapshot"]["type"] == "snapshot" and [a["run"] for a in got["snapshot"]["approvals"]] == [first.pk]
    assert got["other"] == {"type": "snapshot", "count": 0, "approvals": []}
    assert got["arrived"]["type"] == "approval.pending" and got["arrived"]["approval"]["run"] == got["second"]
    assert got["closed"]["type"] == "approval.closed" and got["closed"]["approval"]["run"] == first.pk
    assert got["closed"]["approval"]["status"] == "approved"


def test_approvals_inbox_sends_a_page_not_the_whole_inbox(world: World, monkeypatch) -> None:
    """A snapshot carries the count and the newest MAX_ITEMS; a burst beyond it ends with
    approval.more (10,000 waiting requests are not sent item by item: bench/inbox.py)."""
    from approvals import consumers

    monkeypatch.setattr(consumers, "MAX_ITEMS", 2)
    runs = [world.waiting_run() for _ in range(3)]
    key = token_of(world.users["approver"])

    async def body() -> dict[str, Any]:
        _, ws = await try_connect(f"/ws/approvals/?token={key}")
        snapshot = await ws.receive_json_from(TIMEOUT)
        await ws.disconnect()
        return snapshot

    snapshot = run_async(body)
    assert snapshot["count"] == 3 and [a["run"] for a in snapshot["approvals"]] == [runs[2].pk, runs[1].pk]
    # A burst that one wake-up sees whole (the socket's read, called as its thread does).
    consumer = consumers.ApprovalInboxConsumer()
    consumer.user, consumer.inbox = world.users["approver"], {}
    poll = consumers.ApprovalInboxConsumer.__dict__["_poll"].func
    poll(consumer)
    burst = [world.waiting_run() for _ in range(3)]
    arrived, changed, left, more = poll(consumer)
    assert [a["run"] for a in arrived] == [burst[2].pk, burst[1].pk] and (changed, left, more) == ([], [], 1)


def test_approvals_inbox_follows_a_change_of_who_may_decide(world: World) -> None:
    # The inbox socket lists what the inbox selector lists when the marker moves: naming the
    # operator as the approver moves the request from the approvers' inbox to theirs.
    from approvals.models import ApprovalRequest

    run = world.waiting_run()
    approver_key = token_of(world.users["approver"])
    operator_key = token_of(world.users["operator"])

    def name_operator() -> None:
        request = ApprovalRequest.objects.get(run=run)
        request.approvers = ["operator"]
        # Every real change of who may decide (approval_reassign, a deadline's reassign)
        # bumps the version, which the shared marker poller (approvals.consumers) reads.
        request.version += 1
        request.save()  # save() recomputes the principals the inbox query matches

    async def body() -> dict[str, Any]:
        _, approver = await try_connect(f"/ws/approvals/?token={approver_key}")
        _, operator = await try_connect(f"/ws/approvals/?token={operator_key}")
        snapshots = [await approver.receive_json_from(TIMEOUT), await operator.receive_json_from(TIMEOUT)]
        await database_sync_to_async(name_operator)()
        got = {"snapshots": snapshots, "operator": await operator.receive_json_from(TIMEOUT), "approver": await approver.receive_json_from(TIMEOUT)}
        await approver.disconnect()
        await operator.disconnect()
        return got

    got = run_async(body)
    assert [len(s["approvals"]) for s in got["snapshots"]] == [1, 0]
    assert got["operator"]["type"] == "approval.pending" and got["operator"]["approval"]["run"] == run.pk
    assert got["operator"]["approval"]["may_decide"] is True
    assert got["approver"]["type"] == "approval.closed" and got["approver"]["approval"]["run"] == run.pk
    assert got["approver"]["approval"]["may_decide"] is False
