"""Due sources: rows of apps above the engine (a schedule's next tick) that fall due by the database clock and are fired by the engine's own claim.

The engine cannot import those apps (they sit above runs in the layers contract), so each
registers a :class:`DueSource` here from its AppConfig.ready, through runs.engine.api.
The claim-by-due-time (runs.engine.loop.step_claim_due) asks every source to fire its
earliest due row before it picks a step, as it fires approval deadlines; the recovery
pass (runs.engine.recovery) rings a doorbell when a source has a row due, so an idle
cluster wakes for it. There is no scanner of a source's own: its row is due, and the
next claim on any worker fires it.

A source promises exactly once per due row: ``fire_next`` locks the row it fires (SELECT
... FOR UPDATE SKIP LOCKED on PostgreSQL; SQLite has one writer), re-reads it as due and
moves it past the time it fired in the same transaction as what the firing writes.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class DueSource:
    """A kind of due row another app owns.

    ``name``: a short label for logs ("schedules"). ``earliest_due(now)``: the due time
    of its earliest row due at ``now`` (database clock, aware UTC), or None; one indexed
    read, no lock, no write: it is asked on every claim. ``fire_next(now, worker)``: fire
    one row due at ``now`` that no other worker holds, in one transaction of its own;
    True when it fired (or settled) one, False when none is due or every due one is held
    by another worker. A raise rolls back the source's transaction; the engine logs it
    and asks that source no more in this claim. ``in_drive_local``: the in-process driver
    (runs.engine.loop.drive_local, ``manage.py run_graph`` without a worker) fires it too,
    because a run it drives cannot go on without it (a child run's result owed to its
    parent step); schedules and housekeeping leave it False.
    """

    name: str
    earliest_due: Callable[[datetime], datetime | None]
    fire_next: Callable[[datetime, str], bool]
    in_drive_local: bool = False


# The hint of a doorbell rung for a due source's row (runs.engine.recovery.SourceBell): no
# step has id 0, and any doorbell's claim fires what is due before it picks a step.
DOORBELL_HINT = 0

_sources: dict[str, DueSource] = {}


def register(source: DueSource) -> DueSource:
    """Add ``source`` (by name: registering a name again replaces it); returns it."""
    _sources[source.name] = source
    return source


def registered() -> list[DueSource]:
    """Every registered source, in the order they were first registered."""
    return list(_sources.values())
