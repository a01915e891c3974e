"""Builders shared by the store conformance tests: graph versions, started runs, steps, workers."""
from __future__ import annotations

from runs.engine import api as engine
from runs.models import Run, RunEvent, Step
from runs.services import run_start
from tests.support.specs import publish

# Worker ids of two workers on this host.
W, W2 = "thishost:1:1", "thishost:2:2"


def started(spec, run_input=None):
    """(run, start step id): a run committed, its start step's hand-off kept local."""
    with engine.local_mode():
        run = run_start(version=publish(spec), run_input=run_input or {})
    return run, Step.objects.get(run=run, node_id="start").pk


def step(run, node_id):
    """The step of ``run`` at ``node_id`` (one expected)."""
    return Step.objects.get(run=run, node_id=node_id)


def kinds(run, after=0):
    """The kinds of ``run``'s events with an id above ``after``, in commit order."""
    return list(RunEvent.objects.filter(run=run, id__gt=after).order_by("id").values_list("kind", flat=True))


def last_event_id(run):
    """The id of ``run``'s newest event (0 if none)."""
    return RunEvent.objects.filter(run=run).order_by("-id").values_list("id", flat=True).first() or 0


def version(run):
    """``run``'s version counter as stored now (not the in-memory copy's)."""
    return Run.objects.values_list("version", flat=True).get(pk=run.pk)


# Text only the parallel fast path's run lock contains (fastpath.parallel_commit), on both.
PARALLEL_MARKER = "AND budget_usd IS NULL AND budget_tokens IS NULL"


# Text only a branch's one-statement commit from its snapshot contains (PostgreSQL).
BRANCH_MARKER = "%(expect_active)s"
