"""The settings' LOGGING configures the logger django-q2 really uses, so CLI commands do not print its INFO lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # every test here starts a fresh interpreter
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging
import django
django.setup()
from django_q.conf import logger  # the logger django-q2 logs to
from django_q.tasks import async_task  # noqa: F401 - importing the queue API, as commands do
logger.info("queue info line")
logger.warning("queue warning line")
print("name=" + logger.name)
"""


def _run(**env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "BALLAST_Q_LOG_LEVEL"}
    environ.update({"DJANGO_SETTINGS_MODULE": "ballast.settings", **env})
    return subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60)


def test_queue_info_lines_are_off_by_default_and_warnings_still_show():
    done = _run()
    assert done.returncode == 0, done.stderr
    assert "name=django-q" in done.stdout
    assert "queue info line" not in done.stderr
    assert "queue warning line" in done.stderr


def test_queue_info_lines_show_when_asked():
    done = _run(BALLAST_Q_LOG_LEVEL="INFO")
    assert done.returncode == 0, done.stderr
    assert "queue info line" in done.stderr


def test_json_lines_when_asked_with_the_build_and_no_step_outside_one():
    done = _run(BALLAST_LOG_FORMAT="json", BALLAST_BUILD="logging-test-3")
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(text) for text in done.stderr.splitlines() if "queue warning line" in text]
    assert (line["level"], line["logger"], line["message"], line["build"]) == ("WARNING", "django-q", "queue warning line", "logging-test-3")
    assert all(line[k] is None for k in ("run_id", "step_id", "attempt", "worker", "trace_id"))


def test_an_unknown_log_format_stops_the_process_naming_the_variable():
    done = _run(BALLAST_LOG_FORMAT="xml")
    assert done.returncode != 0
    assert "BALLAST_LOG_FORMAT must be plain or json, not 'xml'" in done.stderr
