"""Schedule triggers in tests: create one through the API, make it due on the database clock, fire the claim."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from runs.engine import api as engine
from tests.support.bounded import wait_until
from triggers.models import Schedule, ScheduleTick

# A cron for tests that set a schedule's next tick by hand (make_due, make_due_now): its own
# next tick after the hand-set one is months away, so none falls while a test runs (an
# every-minute cron fired again, or rang a doorbell early, near a minute boundary).
YEARLY = "0 0 1 1 *"


def create(world: Any, graph_id: int, **fields: Any) -> dict[str, Any]:
    """POST a schedule as the builder; asserts 201 and returns its body."""
    body = {"name": "nightly", "cron": "0 3 * * *", "input": {"x": 2}, **fields}
    response = world.clients["builder"].post(f"/api/v1/graphs/{graph_id}/schedules/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def make_due(schedule_id: int, *, at: datetime | None = None, ago: float = 1.0) -> datetime:
    """Set the schedule's due row to ``at`` (default: ``ago`` seconds before the database's
    now, a fraction dropped: cron ticks are whole seconds); returns it."""
    when = at if at is not None else (engine.db_now() - timedelta(seconds=ago)).replace(microsecond=0)
    Schedule.objects.filter(pk=schedule_id).update(next_fire_at=when, paused=False)
    return when


def daily_cron_at(moment: datetime) -> str:
    """A daily cron (UTC) whose tick is at ``moment``'s minute."""
    return f"{moment.minute} {moment.hour} * * *"


def make_due_now(schedule_id: int) -> datetime:
    """Make the schedule due at the database's current second, a tick time no earlier tick
    of it has (a tick fires as the latest due time at or before now, so two ticks in one
    test need distinct seconds): waits, on the database clock, for a second after its
    last tick (at most about one second). Returns the due time."""
    last = ScheduleTick.objects.filter(schedule_id=schedule_id, manual=False).order_by("-tick_at").values_list("tick_at", flat=True).first()
    if last is not None:
        wait_until(lambda: engine.db_now().replace(microsecond=0) > last, 10, "the database clock to pass the last tick's second")
    return make_due(schedule_id, at=engine.db_now().replace(microsecond=0))
