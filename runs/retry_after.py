"""The one Retry-After parser: how long a server (an LLM provider, an HTTP tool's endpoint) asked us to wait."""
from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping

# Longest wait we take from a Retry-After header: a misbehaving server or proxy must not
# park a step for a day.
MAX_RETRY_AFTER_SECONDS = 600.0


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from response headers (names in lower case, or a case-insensitive
    mapping such as httpx's): ``retry-after-ms`` (milliseconds, OpenAI's) wins over
    ``retry-after``, which is delta-seconds or an HTTP date (RFC 9110 section 10.2.3;
    ``now`` is the Unix time a date is measured from, default the clock).

    Returns None when neither header is there or parses; else a value from 0 (a date in
    the past) to MAX_RETRY_AFTER_SECONDS.
    """
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    raw = headers.get("retry-after")
    seconds: float | None = None
    try:
        if raw_ms is not None:
            seconds = float(raw_ms) / 1000
        elif raw is not None:
            seconds = float(raw)
    except ValueError:
        seconds = None
    if seconds is None and raw:
        parsed = email.utils.parsedate_tz(raw.strip())
        if parsed is not None:
            seconds = email.utils.mktime_tz(parsed) - (time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER_SECONDS)
