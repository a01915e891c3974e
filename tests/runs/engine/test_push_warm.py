"""A worker's publisher is ready before its first commit: warm_push imports and builds the
channel layer in the publisher's own thread (when Redis is configured), not at the first
publish, where it held a fresh worker's first events back (the SQLite + Redis p95 tail)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # every test here starts a fresh interpreter
REPO = Path(__file__).resolve().parents[3]

# A fresh interpreter: what warm_push does to a process that has not published yet.
PROBE = """
import json, sys, time
import django
django.setup()
from runs.engine.store import events
before = "channels_redis.core" in sys.modules
events.warm_push()
deadline = time.monotonic() + 60  # the import runs in the publisher's thread
while events._publisher.thread is not None and "channels_redis.core" not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.01)
thread = events._publisher.thread
print(json.dumps({"before": before, "thread": bool(thread and thread.is_alive()),
                  "imported": "channels_redis.core" in sys.modules}))
"""


def probe(**env: str) -> dict[str, bool]:
    full = {k: v for k, v in os.environ.items() if k not in ("BALLAST_CHANNELS_REDIS_URL", "BALLAST_REDIS_URL")}
    full.update(DJANGO_SETTINGS_MODULE="ballast.settings", **env)
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=full, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_with_redis_the_publisher_starts_and_imports_the_layer_before_any_publish():
    # Nothing connects: the URL only has to parse (no Redis is needed for this test).
    assert probe(BALLAST_CHANNELS_REDIS_URL="redis://127.0.0.1:6379/15") == {"before": False, "thread": True, "imported": True}


def test_without_redis_nothing_starts():
    assert probe() == {"before": False, "thread": False, "imported": False}
