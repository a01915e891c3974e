"""How Decimal amounts (USD costs) are printed by commands: one function, so zero is "0" everywhere."""
from __future__ import annotations

from decimal import Decimal


def format_decimal(value: Decimal | int | float | str) -> str:
    """Fixed-point text of ``value`` without an exponent or trailing zeros: ``Decimal("0E-12")``
    is ``"0"``, ``Decimal("1.250000")`` is ``"1.25"``, ``Decimal("1E+2")`` is ``"100"``.

    Dropping trailing zeros loses no digit, so printed amounts still add up exactly.
    Floats go through ``str`` first (their shortest repr). Raises ``decimal.InvalidOperation``
    for text that is not a number.
    """
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    if number.is_zero():
        return "0"  # also -0 and 0E-12
    return f"{number.normalize():f}"


def format_usd(value: Decimal | int | float | str | None, *, unknown: str = "unknown") -> str:
    """``$`` and :func:`format_decimal` of ``value`` (``"$0"``, ``"$0.0042"``), or ``unknown``
    when the amount is None (a model without a known price)."""
    return unknown if value is None else f"${format_decimal(value)}"
