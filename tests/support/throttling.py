"""Throttle settings for tests: rates replaced, away from the end of a fixed window."""
from __future__ import annotations


def rates(**overrides: str) -> dict:
    """REST_FRAMEWORK with some throttle rates replaced. Rates here are per hour, and a
    test starting in the last minute of an hour waits for the next one: counters are
    fixed windows, and a window ending mid-test would reset the count it checks."""
    import time

    from django.conf import settings

    left = 3600 - time.time() % 3600
    if left < 60:
        time.sleep(left + 0.5)
    config = dict(settings.REST_FRAMEWORK)
    config["DEFAULT_THROTTLE_RATES"] = {**config["DEFAULT_THROTTLE_RATES"], **overrides}
    return config
