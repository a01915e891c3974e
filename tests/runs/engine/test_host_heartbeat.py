"""Dead hosts are found by their heartbeat on the database's clock, in seconds; a skewed host clock decides nothing (issue 23, items 4 and 5)."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from runs.engine import recovery
from runs.engine.store import clock, recovery_queries
from runs.engine.workers import HOST
from runs.models import HostHeartbeat, Step, StepStatus
from tests.support.cluster import test_database_url
from tests.support.leases import run_at_pay

pytestmark = pytest.mark.django_db(transaction=True)

OTHER = "other-host"
WINDOW = 3.0
REPO_ROOT = Path(__file__).resolve().parents[3]


def _rows(**ages: tuple[float, float]) -> None:
    """Heartbeat rows: host -> (seconds since its last beat, seconds since its series began)."""
    now = clock.now()
    for host, (beat_age, up_age) in ages.items():
        HostHeartbeat.objects.update_or_create(
            host=host, defaults={"beat_at": now - timedelta(seconds=beat_age), "up_since": now - timedelta(seconds=up_age)}
        )


def _lease_to(step: Step, owner: str, *, expires_in: float) -> None:
    Step.objects.filter(pk=step.pk).update(
        status=StepStatus.RUNNING, attempt=1, lease_owner=owner, lease_expires_at=clock.now() + timedelta(seconds=expires_in)
    )


def test_a_host_silent_for_the_window_is_dead():
    _rows(**{HOST: (0.1, 60), OTHER: (WINDOW + 2, 60)})
    assert recovery_queries.silent_hosts(HOST, silent_seconds=WINDOW) == {OTHER}
    _rows(**{OTHER: (0.5, 60)})
    assert recovery_queries.silent_hosts(HOST, silent_seconds=WINDOW) == set()


def test_nobody_is_dead_to_a_host_that_was_itself_silent():
    # After an outage that stopped every beat (the database restarted), the first host
    # back must not judge the others before they had the window to beat again.
    _rows(**{HOST: (0.1, 1.0), OTHER: (WINDOW + 2, 60)})
    assert recovery_queries.silent_hosts(HOST, silent_seconds=WINDOW) == set()
    # Nor does a host whose own beats stopped (it cannot tell who else was cut off).
    _rows(**{HOST: (WINDOW + 1, 60)})
    assert recovery_queries.silent_hosts(HOST, silent_seconds=WINDOW) == set()


def test_the_beat_keeps_its_series_and_a_long_gap_starts_a_new_one():
    recovery_queries.host_beat(HOST, silent_seconds=WINDOW)
    first = HostHeartbeat.objects.get(host=HOST)
    assert first.up_since == first.beat_at
    _rows(**{HOST: (1.0, 30)})
    recovery_queries.host_beat(HOST, silent_seconds=WINDOW)
    kept = HostHeartbeat.objects.get(host=HOST)
    assert kept.beat_at - kept.up_since > timedelta(seconds=25)
    _rows(**{HOST: (WINDOW + 1, 30)})
    recovery_queries.host_beat(HOST, silent_seconds=WINDOW)
    fresh = HostHeartbeat.objects.get(host=HOST)
    assert fresh.up_since == fresh.beat_at


@override_settings(BALLAST_HOST_SILENT_SECONDS=WINDOW)
def test_a_live_lease_of_a_silent_host_is_taken_back_and_of_a_beating_host_is_not():
    _run, step = run_at_pay()
    _lease_to(step, f"{OTHER}:4242:1", expires_in=30)  # a lease far from expiring
    _rows(**{HOST: (0.1, 60), OTHER: (0.2, 60)})
    assert recovery.take_back() == []
    assert Step.objects.get(pk=step.pk).status == StepStatus.RUNNING
    _rows(**{OTHER: (WINDOW + 1, 60)})
    assert recovery.take_back() == [step.pk]
    assert Step.objects.get(pk=step.pk).status == StepStatus.PENDING


@override_settings(BALLAST_HOST_SILENT_SECONDS=WINDOW, BALLAST_LIVE_OWNER_GRACE_SECONDS=60)
def test_a_lapsed_lease_gets_the_live_owner_grace_only_while_its_host_beats():
    # A step holding its worker's GIL lets its lease lapse while the host's main process
    # beats on: late, not lost. A cut host stops beating: no grace, taken over at once.
    _run, step = run_at_pay()
    _lease_to(step, f"{OTHER}:4242:1", expires_in=-5)
    _rows(**{HOST: (0.1, 60), OTHER: (0.2, 60)})
    assert recovery.take_back() == []
    assert Step.objects.get(pk=step.pk).status == StepStatus.RUNNING
    _lease_to(step, f"{OTHER}:4242:1", expires_in=-61)  # the grace is over: a hung owner loses it
    assert recovery.take_back() == [step.pk]
    _lease_to(step, f"{OTHER}:4242:1", expires_in=-5)
    _rows(**{OTHER: (WINDOW + 0.5, 60)})  # its host fell silent (its network cut)
    assert recovery.take_back() == [step.pk]
    HostHeartbeat.objects.filter(host=OTHER).delete()  # no heartbeat at all: its lease rules
    _lease_to(step, f"{OTHER}:4242:1", expires_in=-5)
    assert recovery.take_back() == [step.pk]
    assert Step.objects.get(pk=step.pk).status == StepStatus.PENDING


@override_settings(BALLAST_HOST_SILENT_SECONDS=WINDOW)
def test_the_beat_thread_wakes_recovery_for_a_silent_host_holding_a_lease():
    _run, step = run_at_pay()
    _rows(**{HOST: (0.1, 60), OTHER: (WINDOW + 1, 60)})
    beat = recovery.HostBeat(None, wait_for_children=False)
    assert beat.beat_once() is False  # silent, but it holds nothing
    _lease_to(step, f"{OTHER}:4242:1", expires_in=30)
    assert beat.beat_once() is True


def _skewed(code: str, skew: str) -> str:
    """Run ``code`` (after django.setup()) in a Python whose clocks libfaketime moves by
    ``skew``, against this test's database; returns its stdout."""
    lib = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))), None)
    if lib is None:
        pytest.skip("libfaketime is not installed (apt-get install faketime)")
    env = {**os.environ, "DATABASE_URL": test_database_url(), "LD_PRELOAD": str(lib), "FAKETIME": skew,
           "BALLAST_HOST_SILENT_SECONDS": str(WINDOW), "DJANGO_SETTINGS_MODULE": "ballast.settings"}
    script = "import django, datetime\ndjango.setup()\n" + code
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("skew", ["+60s", "-60s"])
@pytest.mark.process
def test_a_host_clock_skewed_by_a_minute_takes_no_live_lease_and_keeps_no_dead_one(skew):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite is one host: its clock is the host's")
    _run, step = run_at_pay()
    # The skewed process sees the database's time, not its own.
    out = _skewed("from runs.engine.store import clock\nfrom django.utils import timezone\n"
                  "print((timezone.now() - clock.now()).total_seconds())", skew)
    host_ahead = float(out.split()[-1])
    assert abs(host_ahead - float(skew.rstrip("s"))) < 5
    # A live lease (20 s left, owner on another host that beats): not taken, whatever the skew.
    _lease_to(step, f"{OTHER}:4242:1", expires_in=20)
    _rows(**{OTHER: (0.1, 60)})
    taken = _skewed("from runs.engine import recovery\nprint(recovery.take_back())", skew)
    assert taken.split()[-1] == "[]"
    assert Step.objects.get(pk=step.pk).status == StepStatus.RUNNING
    # A lease the skewed host renews is written on the database's clock.
    # The renewal happened between ``before`` and ``after`` on the database's clock, so its lease
    # ends between them plus BALLAST_LEASE_SECONDS (30), however long the subprocess took; a
    # lease written on the host's clock would be 60 s off.
    before = clock.now()
    renewed = _skewed(f"from runs.engine.store import claims\nprint(claims.step_heartbeat({step.pk}, 1, '{OTHER}:4242:1'))", skew)
    after = clock.now()
    assert renewed.split()[-1] == "True"
    expires = Step.objects.get(pk=step.pk).lease_expires_at
    slack = timedelta(seconds=1)  # timestamp rounding between the two sessions
    assert before + timedelta(seconds=30) - slack <= expires <= after + timedelta(seconds=30) + slack, (before, expires, after)
    # A dead lease (expired 5 s ago; its host silent and its lease gone): taken back.
    # Silent by its row, not by how long the subprocesses above took to start (a host
    # that still beats gets the live-owner grace for a lapsed lease).
    _lease_to(step, f"{OTHER}:4242:1", expires_in=-5)
    _rows(**{OTHER: (WINDOW + 2, 60)})
    taken = _skewed("from runs.engine import recovery\nprint(recovery.take_back())", skew)
    assert taken.split()[-1] == f"[{step.pk}]"
    assert Step.objects.get(pk=step.pk).status == StepStatus.PENDING
