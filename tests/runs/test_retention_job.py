"""The retention job (runs.retention_job) in process: armed at a cluster's start, fired once by concurrent workers, bounded per firing, re-armed soon while runs are left and at the interval after, off at interval 0, shown read-only in the admin."""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction
from django.test import Client

from graphs.models import Graph
from runs.engine import api as engine
from runs.models import CostRollup, RetentionJob, Run
from runs.retention_job import (
    LEASE_SECONDS,
    REARM_SECONDS,
    retention_earliest_due,
    retention_fire_next,
    retention_job_arm,
)
from tests.support.costs import make_spend
from tests.support.specs import chain, graph, node, publish, run_local, transform

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

DAY = timedelta(days=1)


def old_runs(count: int, *, days_ago: int = 3) -> list[int]:
    """``count`` finished runs of a graph kept one day, finished ``days_ago`` days ago."""
    spec = graph([node("start", "start"), transform("calc", y="1 + 1"), node("end", "end")], chain("start", "calc", "end"), name="old")
    version = publish(spec)
    Graph.objects.filter(pk=version.graph_id).update(retention_days=1)
    ids = [run_local(version, {}).pk for _ in range(count)]
    Run.objects.filter(pk__in=ids).update(finished_at=engine.db_now() - timedelta(days=days_ago))
    return ids


def test_a_cluster_start_arms_the_job_due_at_once_and_an_interval_shortened_pulls_it_in(settings):
    now = engine.db_now()
    assert retention_earliest_due(now) is None  # no row: nothing is due
    job = retention_job_arm(now)
    assert job is not None and job.next_due_at == now and retention_earliest_due(now) == now
    RetentionJob.objects.update(next_due_at=now + 30 * DAY)
    settings.BALLAST_RETENTION_INTERVAL_SECONDS = 3600
    assert retention_job_arm(now).next_due_at == now + timedelta(hours=1)
    # A due time within the interval (or a running firing's lease) is left alone.
    RetentionJob.objects.update(next_due_at=now + timedelta(seconds=LEASE_SECONDS))
    assert retention_job_arm(now).next_due_at == now + timedelta(seconds=LEASE_SECONDS)
    assert RetentionJob.objects.count() == 1


def test_a_firing_prunes_in_bounded_batches_and_rearms_soon_while_runs_are_left(settings):
    settings.BALLAST_RETENTION_BATCH = 1
    settings.BALLAST_RETENTION_MAX_BATCHES = 2
    ids = old_runs(3)
    now = engine.db_now()
    retention_job_arm(now)
    assert retention_fire_next(now, "w:1:1")
    job = RetentionJob.objects.get()
    assert Run.objects.filter(pk__in=ids).count() == 1
    assert job.last_report["runs"] == 2 and job.last_report["batches"] == 2 and job.last_report["more"]
    assert job.running_by == "" and job.last_worker == "w:1:1"
    assert now + timedelta(seconds=REARM_SECONDS) <= job.next_due_at < now + timedelta(seconds=REARM_SECONDS + 60)
    assert not retention_fire_next(now, "w:1:1")  # not due yet
    later = job.next_due_at
    assert retention_earliest_due(later) == later and retention_fire_next(later, "w:2:1")
    job.refresh_from_db()
    assert Run.objects.filter(pk__in=ids).count() == 0 and job.last_report["runs"] == 1 and not job.last_report["more"]
    assert later + DAY <= job.next_due_at < later + DAY + timedelta(minutes=1)  # the default interval: a day


def test_interval_zero_turns_the_job_off(settings):
    ids = old_runs(1)
    now = engine.db_now()
    retention_job_arm(now)
    settings.BALLAST_RETENTION_INTERVAL_SECONDS = 0
    assert retention_earliest_due(now) is None and not retention_fire_next(now, "w:1:1")
    assert retention_job_arm(now) is None and Run.objects.filter(pk__in=ids).exists()


def test_a_held_job_is_not_fired_again_until_its_lease_lapses(settings):
    ids = old_runs(2)
    now = engine.db_now()
    retention_job_arm(now)
    # A firing that claimed the row and died before it finished (no re-arm).
    RetentionJob.objects.update(next_due_at=now + timedelta(seconds=LEASE_SECONDS), running_by="dead:1:1", started_at=now)
    assert not retention_fire_next(now + timedelta(seconds=LEASE_SECONDS - 1), "w:1:1")
    assert Run.objects.filter(pk__in=ids).count() == 2
    assert retention_fire_next(now + timedelta(seconds=LEASE_SECONDS), "w:1:1")
    assert Run.objects.filter(pk__in=ids).count() == 0 and RetentionJob.objects.get().running_by == ""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SKIP LOCKED: PostgreSQL only (SQLite has one writer)")
def test_a_row_another_transaction_holds_is_skipped_not_waited_for():
    ids = old_runs(1)
    now = engine.db_now()
    retention_job_arm(now)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(RetentionJob.objects.select_for_update())
                holding.set()
                release.wait(60)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(60)
        assert not retention_fire_next(now, "w:1:1")  # returns at once: skipped, not waited for
    finally:
        release.set()
        holder.join(60)
    assert Run.objects.filter(pk__in=ids).exists()
    assert retention_fire_next(now, "w:1:1") and not Run.objects.filter(pk__in=ids).exists()


FIRERS = 4


def test_concurrent_firings_prune_once(settings):
    settings.BALLAST_RETENTION_DAYS = 1
    spend = make_spend()
    Run.objects.update(finished_at=engine.db_now() - 3 * DAY)
    spent = sum(Run.objects.values_list("cost_usd", flat=True))
    assert spent > 0
    now = engine.db_now()
    retention_job_arm(now)
    barrier = threading.Barrier(FIRERS)
    fired: dict[str, Any] = {}

    def fire(name: str) -> None:
        try:
            barrier.wait(30)
            fired[name] = retention_fire_next(now, name)
        except Exception as exc:  # reported by the assertion below
            fired[name] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=fire, args=(f"w:{i}:1",)) for i in range(FIRERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(fired.values(), key=str) == [False] * (FIRERS - 1) + [True], fired
    [winner] = [name for name, value in fired.items() if value is True]
    job = RetentionJob.objects.get()
    assert job.last_worker == winner and job.last_report["runs"] == len(spend.runs)
    assert Run.objects.count() == 0
    # Spend rolled up once: the rollups sum to the runs' spend, not twice it.
    assert CostRollup.objects.count() == job.last_report["rollups"]
    assert sum(CostRollup.objects.values_list("cost_usd", flat=True)) == spent


def test_the_admin_shows_the_job_read_only(settings):
    old_runs(1)
    now = engine.db_now()
    retention_job_arm(now)
    assert retention_fire_next(now, "w:1:1")
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-1")
    client = Client()
    client.force_login(admin)
    listing = client.get("/admin/runs/retentionjob/")
    assert listing.status_code == 200 and b"w:1:1" in listing.content
    page = client.get(f"/admin/runs/retentionjob/{RetentionJob.SINGLETON}/change/")
    assert page.status_code == 200 and b"&quot;runs&quot;: 1" in page.content and b'name="_save"' not in page.content
