"""The retention job run by real qclusters: old finished runs are pruned with nobody calling prune_runs, an idle cluster wakes for the job's due row, and two clusters prune each run once."""
from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from graphs.models import Graph
from runs.models import RetentionJob, Run
from tests.support import engine
from tests.support.cluster import WAIT_CEILING, wait_until
from tests.support.specs import chain, graph, node, publish, run_local, transform

pytestmark = [pytest.mark.crash, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

# One run per batch, two batches per firing: five runs take three firings, re-armed a couple
# of seconds apart (runs.retention_job.REARM_SECONDS).
BOUNDED = {"BALLAST_RETENTION_BATCH": "1", "BALLAST_RETENTION_MAX_BATCHES": "2"}
PRUNED = re.compile(r"retention: pruned (\d+) run\(s\)")


def old_and_new_runs(old: int) -> tuple[list[int], int]:
    """``old`` runs of a graph kept one day, finished three days ago, and one that just finished."""
    spec = graph([node("start", "start"), transform("calc", y="1 + 1"), node("end", "end")], chain("start", "calc", "end"), name="kept a day")
    version = publish(spec)
    Graph.objects.filter(pk=version.graph_id).update(retention_days=1)
    runs = [run_local(version, {}) for _ in range(old + 1)]
    assert all(r.status == "succeeded" for r in runs), [r.error for r in runs]
    ids = [r.pk for r in runs[:old]]
    Run.objects.filter(pk__in=ids).update(finished_at=engine.db_now() - timedelta(days=3))
    return ids, runs[-1].pk


def pruned_in_logs(clusters: list[Any]) -> list[int]:
    """The runs each firing of the clusters says it pruned (their log lines)."""
    return [int(n) for c in clusters for n in PRUNED.findall(c.log_path.read_text(errors="replace"))]


def test_an_idle_cluster_wakes_for_the_due_job_and_prunes_in_bounded_firings(cluster_factory: Any) -> None:
    old, new = old_and_new_runs(5)
    # Armed, but not due before the cluster is up (a day: the default interval, left alone at start).
    RetentionJob.objects.create(pk=RetentionJob.SINGLETON, next_due_at=engine.db_now() + timedelta(days=1))
    cluster = cluster_factory("ret", workers=1, extra_env=BOUNDED).start()
    cluster.wait_ready()
    assert Run.objects.filter(pk__in=old).count() == 5
    due = engine.db_now() + timedelta(seconds=1)
    RetentionJob.objects.update(next_due_at=due)
    wait_until(lambda: not Run.objects.filter(pk__in=old).exists(), WAIT_CEILING, "the old runs to be pruned", clusters=[cluster])
    wait_until(lambda: RetentionJob.objects.get().next_due_at > engine.db_now() + timedelta(hours=23), WAIT_CEILING,
               "the job to be re-armed a day ahead", clusters=[cluster])
    job = RetentionJob.objects.get()
    assert job.finished_at >= due and job.running_by == "" and job.last_report["more"] is False
    assert Run.objects.filter(pk=new).exists()
    assert sorted(pruned_in_logs([cluster])) == [1, 2, 2]  # three firings, two batches of one at most


def test_two_clusters_arm_the_job_at_start_and_prune_each_run_once(cluster_factory: Any) -> None:
    old, new = old_and_new_runs(5)
    assert not RetentionJob.objects.exists()
    clusters = [cluster_factory(name, workers=2, extra_env=BOUNDED).start() for name in ("a", "b")]
    wait_until(lambda: not Run.objects.filter(pk__in=old).exists(), WAIT_CEILING, "the old runs to be pruned", clusters=clusters)
    wait_until(lambda: RetentionJob.objects.get().next_due_at > engine.db_now() + timedelta(hours=23), WAIT_CEILING,
               "the job to be re-armed a day ahead", clusters=clusters)
    for cluster in clusters:
        cluster.wait_recovery_passes(3)  # time for a second firing, were one possible
    assert RetentionJob.objects.count() == 1 and Run.objects.filter(pk=new).exists()
    assert sum(pruned_in_logs(clusters)) == 5
