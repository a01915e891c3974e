"""A frame the sockets cannot read (binary, or text that is not JSON) closes the socket
with a code that says so (4415 binary, 4400 not JSON), on every route: no exception in
the server, no traceback in its log, no 1011. Once through the ASGI app
(channels' communicator: the close the consumer sends), once over the wire against a real
daphne with a real client (the code a client receives: daphne cannot send RFC 6455's 1003
or 1007, so an app that chose them would still end in 1011)."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from accounts.tokens import token_create
from ballast.asgi import application
from runs.live.consumers import CLOSE_BINARY_FRAME, CLOSE_NOT_JSON
from tests.support.daphne import Daphne, close_code_after_sending
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]
TIMEOUT = 10

BAD_FRAMES = [
    (b"\x00\x01binary", CLOSE_BINARY_FRAME),
    (b'{"type": "follow", "run": 1}', CLOSE_BINARY_FRAME),  # JSON, but in a binary frame
    ("not json", CLOSE_NOT_JSON),
    ('{"type": "follow"', CLOSE_NOT_JSON),
    ("", CLOSE_NOT_JSON),
    ('{"type": "follow", "run": 1, "after": NaN}', CLOSE_NOT_JSON),  # Python's lenient parser takes NaN
]


def paths(world: World) -> list[str]:
    key = token_create(user=world.users["starter"], name="ws")[1]
    return [f"/ws/runs/{world.waiting_run().pk}/?token={key}", f"/ws/runs/?token={key}", f"/ws/approvals/?token={key}"]


def test_a_frame_that_is_not_json_text_closes_the_socket_with_a_code_saying_so(world: World, caplog: Any) -> None:
    routes = paths(world)

    async def body() -> dict[tuple[str, Any], Any]:
        got = {}
        for path in routes:
            for frame, _ in BAD_FRAMES:
                ws = WebsocketCommunicator(application, path)
                connected, _ = await ws.connect(timeout=TIMEOUT)
                assert connected, path
                await ws.send_input({"type": "websocket.receive", ("bytes" if isinstance(frame, bytes) else "text"): frame})
                # Whatever the socket streams first (backlog, snapshot), then the close;
                # an exception in the consumer would be raised here.
                while (message := await ws.receive_output(TIMEOUT))["type"] != "websocket.close":
                    assert message["type"] == "websocket.send", message
                got[(path.split("?")[0], frame)] = message.get("code")
                await ws.disconnect()
        return got

    with caplog.at_level(logging.WARNING):
        got = async_to_sync(body)()
    expected = {(path.split("?")[0], frame): code for path in routes for frame, code in BAD_FRAMES}
    assert got == expected
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_good_message_after_the_change_is_still_read(world: World) -> None:
    path = paths(world)[1]
    run = world.waiting_run()

    async def body() -> dict[str, Any]:
        ws = WebsocketCommunicator(application, path)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await ws.send_json_to({"type": "follow", "run": run.pk, "after": 0})
        first = await ws.receive_json_from(TIMEOUT)
        await ws.disconnect()
        return first

    first = async_to_sync(body)()
    assert first["type"] == "event" and first["event"]["seq"] == 1


@pytest.fixture
def server(transactional_db: None, tmp_path: Path) -> Iterator[Daphne]:
    daphne = Daphne(tmp_path / "daphne.log").start()
    yield daphne
    daphne.stop()


@pytest.mark.process
def test_over_the_wire_a_real_client_gets_the_code_and_the_server_logs_no_traceback(world: World, server: Daphne) -> None:
    cases = [(path, frame, code) for path in paths(world) for frame, code in BAD_FRAMES[:1] + BAD_FRAMES[2:3]]

    got = [close_code_after_sending(server.port, path, frame)[0] for path, frame, _ in cases]
    assert got == [code for _, _, code in cases], server.log()
    log = server.log()
    assert "Traceback" not in log and "Exception inside application" not in log, log
