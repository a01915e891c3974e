"""Statistics and scheduling of the benchmark rounds, pure Python (no Django, no database).

- :func:`describe`: median, quartiles, interquartile range and p95 of a list of samples.
- :func:`rotated`: the order contestants run in, round by round, so every contestant takes
  every position equally often (the first place in a round is the coldest, the last runs
  after the others have loaded the machine: rotation spreads both over every contestant).
- :func:`interleave`: runs ``rounds`` rounds of callables in rotated order, collecting one
  sample per contestant per round.

Quartiles use :func:`statistics.quantiles` with ``method="inclusive"`` (the sample's own
minimum and maximum are the 0th and 100th percentiles; for 10 samples q1 is the value a
quarter of the way between the 3rd and 4th smallest), the same rule as NumPy's default
linear interpolation.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

MIN_ROUNDS = 10


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (p95 of 5 samples is the largest); NaN when empty."""
    values = sorted(samples)
    if not values:
        return float("nan")
    rank = max(1, math.ceil(pct / 100 * len(values)))
    return values[rank - 1]


def quartiles(samples: Sequence[float]) -> tuple[float, float, float]:
    """(q1, median, q3), interpolated inclusively; a single sample is all three.

    Raises ValueError on an empty list (no figure can be reported from nothing)."""
    values = sorted(samples)
    if not values:
        raise ValueError("quartiles of no samples")
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def describe(samples: Sequence[float]) -> dict[str, float | int]:
    """``{"median", "q1", "q3", "iqr", "p95", "min", "max", "count"}`` of ``samples``.

    ``iqr`` is q3 - q1, in the samples' unit; raises ValueError on an empty list."""
    q1, q2, q3 = quartiles(samples)
    return {
        "median": q2,
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "p95": percentile(samples, 95),
        "min": min(samples),
        "max": max(samples),
        "count": len(samples),
    }


def rotated(names: Sequence[str], round_index: int) -> list[str]:
    """The order of round ``round_index`` (0-based): ``names`` shifted left by
    ``round_index`` places, so over ``len(names)`` rounds each name runs once in each
    position and always after the same neighbour (a Latin square's rows)."""
    if not names:
        return []
    k = round_index % len(names)
    return list(names[k:]) + list(names[:k])


def interleave(
    contestants: dict[str, Callable[[], float]],
    rounds: int,
    *,
    on_round: Callable[[int, list[str]], Any] | None = None,
) -> tuple[dict[str, list[float]], list[list[str]]]:
    """Run every contestant once per round, ``rounds`` rounds, in :func:`rotated` order.

    Each callable returns one sample (its own unit). Returns (samples per contestant in
    round order, the order of every round). ``on_round(i, order)`` is called before each
    round (progress). Raises ValueError when ``rounds`` < :data:`MIN_ROUNDS` (medians and
    quartiles of fewer rounds are noise on a shared machine)."""
    if rounds < MIN_ROUNDS:
        raise ValueError(f"rounds must be at least {MIN_ROUNDS}, got {rounds}")
    names = list(contestants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    orders: list[list[str]] = []
    for i in range(rounds):
        order = rotated(names, i)
        if on_round:
            on_round(i, order)
        orders.append(order)
        for name in order:
            samples[name].append(float(contestants[name]()))
    return samples, orders


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """Round-by-round ratios numerator[i] / denominator[i] (both from the same round, so
    minutes of drift between rounds cancel). Raises ValueError on different lengths."""
    if len(numerator) != len(denominator):
        raise ValueError(f"paired samples differ in length: {len(numerator)} and {len(denominator)}")
    return [a / b for a, b in zip(numerator, denominator, strict=True) if b]
