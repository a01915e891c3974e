"""How values are printed by commands and exports: Decimal amounts (one function, so zero is "0" everywhere) and CSV cells."""
from __future__ import annotations

import csv
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol


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


# A spreadsheet reads a cell starting with one of these as a formula (OWASP, "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell a spreadsheet will not run: text that starts like a formula
    (``=``, ``+``, ``-``, ``@``, tab, carriage return) gets a leading ``'``, which
    spreadsheets show as text, unless it is a number (``-1.5`` stays a number). A graph
    named ``=HYPERLINK(...)`` must not become a link in an operator's cost report. Source:
    OWASP, "CSV Injection" (https://owasp.org/www-community/attacks/CSV_Injection)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        try:
            Decimal(value)
        except InvalidOperation:
            return "'" + value
    return value


class _Writable(Protocol):
    def write(self, text: str, /) -> Any: ...


class CsvWriter:
    """``csv.writer`` whose every cell goes through :func:`csv_cell`; ``writerow`` returns
    what the underlying writer returns (the line, for a streaming echo buffer)."""

    def __init__(self, out: _Writable):
        self._writer = csv.writer(out)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([csv_cell(c) for c in row])
