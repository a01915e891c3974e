"""The engine as tests drive it: its API (runs.engine.api), plus the step-level entry points and
worker plumbing that only tests call, from where they live in the engine.

Tests that claim, commit, fail or recover one step by hand, or read a worker's identity,
import this module as ``engine``; product code calls runs.engine.api alone.
"""
from __future__ import annotations

from collections.abc import Callable

from runs.engine import dispatch, loop, recovery, threads, workers
from runs.engine.api import *  # noqa: F403 (the API, re-exported for tests)
from runs.engine.api import __all__ as _api_names
from runs.engine.scheduler import CompiledGraph
from runs.engine.store import claims, commit, connections, recovery_queries
from runs.engine.types import (
    ClaimedStep,
    CommitOutcome,
    RunNotFound,
    StartedRun,
    StateTooLarge,
    StepStateError,
    TestRunRefused,
)
from runs.nodes.base import NodeResult
from runs.vocabulary import NodeError

__all__ = [
    *_api_names,
    "ClaimedStep",
    "CommitOutcome",
    "CompiledGraph",
    "RunNotFound",
    "StartedRun",
    "StateTooLarge",
    "StepStateError",
    "TestRunRefused",
    "abandoned_steps",
    "current_worker",
    "execute_node",
    "in_local_mode",
    "process_group_members",
    "recover_once",
    "step_claim",
    "step_claim_due",
    "step_commit",
    "step_execute",
    "step_fail",
    "step_recover",
    "steps_dispatch",
]

in_local_mode = dispatch.in_local_mode
current_worker = workers.current_worker
process_group_members = workers.process_group_members
execute_node = loop.execute_node
abandoned_steps = threads.abandoned_steps
step_claim = claims.step_claim
# The claim by due time: fires due deadlines and due sources' rows (schedules), then claims a step.
step_claim_due = loop.step_claim_due


def _dispatch_on_commit(step_ids: list[int]) -> list[int]:
    """Hand ``step_ids`` to the queue after the current transaction commits (as the API does)."""
    if step_ids:
        connections.on_commit(lambda: dispatch.enqueue(step_ids))
    return step_ids


def steps_dispatch(step_ids: list[int]) -> None:
    """Hand committed pending steps to the queue now (steps whose hand-off local_mode held)."""
    dispatch.enqueue(step_ids)


def step_execute(step_id: int, *, worker: str | None = None) -> None:
    """Claim, execute and commit step ``step_id`` and the successors leased to this worker."""
    loop.execute_step(step_id, worker=worker)


def step_commit(claimed: ClaimedStep, result: NodeResult, *, keep_next: bool = True) -> CommitOutcome:
    """Commit a finished attempt (one fenced transaction: runs.engine.store.commit.step_commit);
    the steps it made runnable go to the queue after commit."""
    outcome = commit.step_commit(claimed, result, keep_next=keep_next)
    _dispatch_on_commit(outcome.dispatch)
    return outcome


def step_fail(claimed: ClaimedStep, error: NodeError) -> CommitOutcome:
    """Record a failed attempt (fenced: runs.engine.store.commit.step_fail); the steps it made
    runnable go to the queue after commit."""
    outcome = commit.step_fail(claimed, error)
    _dispatch_on_commit(outcome.dispatch)
    return outcome


def steps_release_kept(run_id: int, worker: str, *, in_hand: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Hand back ``worker``'s steps of run ``run_id`` that never began and that no thread of
    it holds (``in_hand``); their ids (runs.engine.store.claims.steps_release_kept)."""
    return claims.steps_release_kept(run_id, worker, in_hand=in_hand)


def recover_once(*, on_start: bool = False) -> list[int]:
    """One recovery pass (runs.engine.recovery.recover_once); the step ids handed to the queue."""
    return recovery.recover_once(on_start=on_start)


def step_recover(step_id: int, *, recovered_by: str, owner_is_dead: Callable[[str], bool]) -> list[int]:
    """Take back one running step if its lease expired or ``owner_is_dead(owner)``; the step
    ids handed to the queue after commit."""
    return _dispatch_on_commit(recovery_queries.step_recover(step_id, recovered_by=recovered_by, owner_is_dead=owner_is_dead))
