"""Cron expressions in a time zone (triggers.cron): refusals name the field; ticks follow the zone across DST."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from triggers import cron

NOW = datetime(2026, 3, 27, 12, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "zone", "field"),
    [
        ("61 * * * *", "UTC", "cron"),
        ("* * *", "UTC", "cron"),
        ("0 0 * * * *", "UTC", "cron"),  # seconds are not offered
        ("0 0 30 2 *", "UTC", "cron"),  # never fires
        ("", "UTC", "cron"),
        ("* * * * *", "Mars/Olympus", "timezone"),
        ("* * * * *", "../../etc/passwd", "timezone"),
        ("* * * * *", "", "timezone"),
    ],
)
def test_refusals_name_the_field(expression: str, zone: str, field: str) -> None:
    with pytest.raises(cron.CronInvalid) as caught:
        cron.validate(expression, zone, now=NOW)
    assert caught.value.field == field
    assert caught.value.message


def test_first_tick_is_strictly_after_now_in_the_zone() -> None:
    assert cron.validate("0 9 * * MON-FRI", "Europe/Paris", now=NOW) == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)  # Friday noon -> Monday 09:00 CEST
    assert cron.next_after("0 12 * * *", "UTC", datetime(2026, 3, 27, 12, 0, tzinfo=UTC)) == datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


def test_a_skipped_local_time_fires_once_at_the_first_valid_time() -> None:
    # Paris skips 02:00-03:00 on 2026-03-29: 02:30 fires at 03:00 CEST (01:00 UTC) that day.
    first = cron.next_after("30 2 * * *", "Europe/Paris", datetime(2026, 3, 27, 12, tzinfo=UTC))
    ticks = cron.next_ticks("30 2 * * *", "Europe/Paris", first, 4)
    assert ticks == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
        datetime(2026, 3, 31, 0, 30, tzinfo=UTC),
    ]


def test_latest_tick_at_or_before_and_the_ticks_between() -> None:
    tick = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
    assert cron.latest_at_or_before("0 12 * * *", "UTC", tick) == tick
    assert cron.latest_at_or_before("0 12 * * *", "UTC", NOW) == tick
    assert cron.latest_at_or_before("0 12 * * *", "UTC", tick.replace(hour=11)) == datetime(2026, 3, 26, 12, 0, tzinfo=UTC)
    assert cron.ticks_between("*/5 * * * *", "UTC", tick, tick.replace(hour=13)) == 12
    assert cron.ticks_between("* * * * *", "UTC", datetime(2026, 1, 1, tzinfo=UTC), tick, cap=50) == 50
    assert cron.ticks_between("* * * * *", "UTC", tick, tick) == 0
