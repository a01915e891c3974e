"""A webhook delivery over a real socket: daphne serving the app, the README's openssl and curl lines signing and sending it."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runs.models import Run
from tests.support.daphne import Daphne
from tests.support.specs import publish
from tests.support.webhooks import order_spec

pytestmark = [pytest.mark.process, pytest.mark.usefixtures("fast_passwords")]

# The README's lines (Webhook triggers), with the URL and secret from the environment.
SEND = r"""
TS=$(date +%s)
SIG=$(printf '%s.%s' "$TS" "$BODY" | openssl dgst -sha256 -hmac "$SECRET" -hex | sed 's/^.* //')
curl -s -X POST "$URL" -H 'Content-Type: application/json' -H "X-Ballast-Timestamp: $TS" \
  -H "X-Ballast-Signature: sha256=$SIG" -H 'X-Ballast-Delivery: evt-1' --data-raw "$BODY"
"""


def send(url: str, secret: str, body: str) -> Any:
    """Run the README's shell lines; the parsed JSON answer."""
    out = subprocess.run(["bash", "-c", SEND], env={"PATH": "/usr/bin:/bin", "URL": url, "SECRET": secret, "BODY": body},
                         capture_output=True, check=True, timeout=60)
    return json.loads(out.stdout)


def test_the_readme_one_liner_signs_a_delivery_daphne_accepts(world: Any, tmp_path: Path) -> None:
    version = publish(order_spec())
    version.graph.operators.add(world.users["builder"])
    created = world.clients["builder"].post(f"/api/v1/graphs/{version.graph_id}/webhooks/", {"name": "wire"}, format="json").json()
    server = Daphne(tmp_path / "daphne.log").start()
    try:
        url = server.url + created["url"].split("testserver", 1)[1]
        first = send(url, created["secret"], '{"x": 3}')
        again = send(url, created["secret"], '{"x": 3}')
        refused = send(url, "not the secret", '{"x": 3}')
    finally:
        server.stop()
    assert first["run"] == again["run"] and again["replayed"] is True, (first, again, server.log())
    assert refused["error"]["code"] == "signature_invalid"
    run = Run.objects.get()
    assert (run.input, run.source) == ({"x": 3}, "webhook wire")
