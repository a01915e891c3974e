"""Cron expressions of schedule triggers in a time zone: validation with the field named, and tick times (cronsim; DST by zoneinfo).

Expressions have the five classic fields (minute hour day-of-month month day-of-week,
with names, ranges, steps, ``L`` and ``#`` as cronsim reads them) and are read in the
schedule's IANA time zone: ``30 2 * * *`` in ``Europe/Paris`` is 02:30 Paris time, and on
the day DST skips 02:30 cronsim fires at the first valid time after it (03:00); a repeated
hour fires once. Every tick returned is an aware UTC datetime with whole seconds.
"""
from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

FIELDS = 5
MAX_EXPRESSION_LENGTH = 200


class CronInvalid(ValueError):
    """An expression or time zone refused; ``field`` names it ("cron" or "timezone")."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` ("Europe/Paris", "UTC"); CronInvalid("timezone") otherwise."""
    if not isinstance(name, str) or not name or len(name) > 64:
        raise CronInvalid("timezone", "An IANA time zone name, such as Europe/Paris or UTC.")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronInvalid("timezone", f"Unknown time zone {name!r}: use an IANA name such as Europe/Paris or UTC.") from None


def _iterate(expression: str, tz: ZoneInfo, start: datetime, *, reverse: bool = False) -> Iterator[datetime]:
    return CronSim(expression, start.astimezone(tz).replace(microsecond=0), reverse=reverse)


def validate(expression: str, timezone_name: str, *, now: datetime) -> datetime:
    """Check ``expression`` and ``timezone_name``; return the first tick after ``now``.
    Raises CronInvalid naming ``cron`` (wrong field count, a bad field, an expression that
    never fires, such as ``0 0 30 2 *``) or ``timezone``."""
    zone(timezone_name)  # an unknown zone is refused before the expression is read
    if not isinstance(expression, str) or not expression.strip() or len(expression) > MAX_EXPRESSION_LENGTH:
        raise CronInvalid("cron", "A cron expression of five fields: minute hour day-of-month month day-of-week.")
    if len(expression.split()) != FIELDS:
        raise CronInvalid("cron", f"Five fields are needed (minute hour day-of-month month day-of-week); this has {len(expression.split())}.")
    try:
        return next_after(expression, timezone_name, now)
    except (CronSimError, StopIteration) as exc:
        raise CronInvalid("cron", f"Invalid cron expression: {exc or 'it never fires'}.") from None


def next_after(expression: str, timezone_name: str, moment: datetime) -> datetime:
    """The first tick strictly after ``moment`` (aware), in UTC."""
    tick = next(_iterate(expression, zone(timezone_name), moment))
    return tick.astimezone(UTC)


def next_ticks(expression: str, timezone_name: str, first: datetime, count: int) -> list[datetime]:
    """``first`` (a tick) and the ``count - 1`` ticks after it, in UTC."""
    out = [first]
    it = _iterate(expression, zone(timezone_name), first)
    while len(out) < count:
        out.append(next(it).astimezone(UTC))
    return out


def latest_at_or_before(expression: str, timezone_name: str, moment: datetime) -> datetime:
    """The last tick at or before ``moment`` (aware), in UTC."""
    # cronsim's reverse iteration starts strictly before its start: a second later, floored,
    # makes a tick at ``moment`` itself count.
    start = moment.replace(microsecond=0) + timedelta(seconds=1)
    return next(_iterate(expression, zone(timezone_name), start, reverse=True)).astimezone(UTC)


def ticks_between(expression: str, timezone_name: str, first: datetime, last: datetime, *, cap: int = 1000) -> int:
    """How many ticks lie in [``first``, ``last``) (``first`` a tick), counting up to ``cap``."""
    if first >= last:
        return 0
    count = 1
    it = _iterate(expression, zone(timezone_name), first)
    while count < cap and next(it).astimezone(UTC) < last:
        count += 1
    return count
