"""A worker cluster's process imports no web stack: its start is what recovery waits for."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # every test here starts a fresh interpreter
REPO = Path(__file__).resolve().parents[3]

# What `manage.py qcluster` has loaded once it could run steps: setup, the task module,
# the cluster and every node kind. Checked in a fresh interpreter that believes it is one.
PROBE = """
import json, sys
sys.argv = ["manage.py", "qcluster"]
import django
django.setup()
import runs.tasks, runs.engine.cluster, django_q.cluster
from django.conf import settings
from runs.nodes import get_kind
for kind in settings.BALLAST_NODE_KINDS:
    get_kind(kind)
from django.core.management import load_command_class
load_command_class("runs", "qcluster")
print(json.dumps(sorted(sys.modules)))
"""

WEB = ("rest_framework", "drf_spectacular", "channels", "daphne", "twisted", "axes", "django.contrib.admin",
       "django.contrib.staticfiles", "ballast.views", "ballast.urls", "runs.api.apis", "runs.live.consumers", "approvals.apis",
       "builder.apis", "accounts.authentication")


def test_a_worker_process_imports_no_web_stack():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ballast.settings"}
    env.pop("BALLAST_WORKER_FULL_APPS", None)
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True)
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    loaded = sorted(m for m in modules if any(m == w or m.startswith(w + ".") for w in WEB))
    assert loaded == []
    assert "runs.engine.loop" in modules and "approvals.nodes" in modules


# What a worker cluster has imported when it starts running steps: setup, the command,
# the cluster and the task module (node kinds load on first use; the approval kind is
# loaded at setup, its app connects receivers).
START_PROBE = """
import json, sys
sys.argv = ["manage.py", "qcluster"]
import django
django.setup()
import runs.tasks, runs.engine.cluster, django_q.cluster
from django.core.management import load_command_class
load_command_class("runs", "qcluster")
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.every_db
def test_a_worker_starts_without_jinja2_jsonschema_or_an_unused_driver():
    # About 0.2 s (jsonschema), 0.1 s (Jinja2) and, on SQLite, 0.25 s (psycopg) of CPU at
    # every worker start, which is what a restarted worker's first step waits for; they
    # load when a template, an output schema or a PostgreSQL commit first needs them.
    from django.db import connection

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ballast.settings"}
    env.pop("BALLAST_WORKER_FULL_APPS", None)
    out = subprocess.run([sys.executable, "-c", START_PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True)
    modules = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "approvals.nodes" in modules and "runs.engine.loop" in modules
    unwanted = {"jinja2", "jsonschema"} | ({"psycopg"} if connection.vendor == "sqlite" else set())
    assert sorted(unwanted & modules) == []
