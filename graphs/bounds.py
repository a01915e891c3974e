"""Bounds of the numbers a run's row stores, shared by everything that accepts them.

They live with the graph format, which imports no other app: a graph's ``settings``
(graphs.spec.GraphSettings) declare these limits first. The settings, the run API's
overrides (runs.api.serializers) and the run writes (runs.engine.store.operations) all check a
budget or a limit against these same figures, so a value one of them accepts always fits the
column it lands in: ``Run.budget_usd`` is ``DecimalField(max_digits=24,
decimal_places=12)``, ``Run.budget_tokens`` a ``BigIntegerField``, ``max_parallelism``
and ``max_steps`` ``PositiveIntegerField`` s. A value past a column's range used to be
stored (SQLite keeps whatever it is given) and then broke every read of the row
(``decimal.InvalidOperation``), so it is refused at every door instead.

No Django, no pydantic: plain figures and one check.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

# A USD budget is under 10**8 (at most 8 integer digits, what the run API has always
# taken), well inside Run.budget_usd's 12; decimal places past the column's 12 are
# rounded when saved, as they always were, so only the integer part is bounded. The run
# API takes 6 decimal places (its DecimalFields: BUDGET_USD_MAX_DIGITS in all).
BUDGET_USD_INTEGER_DIGITS = 8
BUDGET_USD_LIMIT = Decimal(10) ** BUDGET_USD_INTEGER_DIGITS  # exclusive
BUDGET_USD_DECIMAL_PLACES = 6
BUDGET_USD_MAX_DIGITS = BUDGET_USD_INTEGER_DIGITS + BUDGET_USD_DECIMAL_PLACES
# A token budget (and any other count stored in a BigIntegerField).
MAX_BIGINT = 2**63 - 1
# The largest value a PositiveIntegerField holds on every database.
MAX_POSITIVE_INT = 2**31 - 1


def budget_usd_problem(value: Any) -> str | None:
    """Why ``value`` (a Decimal, int, float or numeric string) is not a storable USD
    budget, or None when it is: finite, 0 or more, under BUDGET_USD_LIMIT. None (no
    budget) is fine."""
    if value is None:
        return None
    try:
        amount = value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError):
        return f"{value!r} is not a number"
    if not amount.is_finite():
        return f"{amount} is not a number a budget can be"
    if amount < 0:
        return "must be 0 or more"
    if amount >= BUDGET_USD_LIMIT:
        return f"must be less than {BUDGET_USD_LIMIT:,} ({BUDGET_USD_INTEGER_DIGITS} integer digits at most)"
    return None


def count_problem(value: Any, *, maximum: int, minimum: int = 0) -> str | None:
    """Why ``value`` is not an integer from ``minimum`` to ``maximum`` (a column's range),
    or None when it is (None itself is fine: no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{value!r} is not an integer"
    if not minimum <= value <= maximum:
        return f"must be between {minimum} and {maximum}"
    return None


def run_limit_problems(*, budget_usd: Any, budget_tokens: Any, max_parallelism: Any, max_steps: Any) -> dict[str, str]:
    """The limits a new run would store that do not fit its row's columns, as
    ``{field: why}`` (empty when all fit): the last check before a run row is written,
    for a graph version stored before the spec bounded them."""
    found = {
        "budget_usd": budget_usd_problem(budget_usd),
        "budget_tokens": count_problem(budget_tokens, maximum=MAX_BIGINT),
        "max_parallelism": count_problem(max_parallelism, minimum=1, maximum=MAX_POSITIVE_INT),
        "max_steps": count_problem(max_steps, minimum=1, maximum=MAX_POSITIVE_INT),
    }
    return {name: why for name, why in found.items() if why is not None}
