"""CSV cells a spreadsheet will not run as formulas (runs.reports.formatting.csv_cell; OWASP "CSV Injection")."""
from __future__ import annotations

import io

import pytest

from runs.reports.formatting import CsvWriter, csv_cell


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("-1.5", "-1.5"),  # a number stays a number
        ("+3", "+3"),
        ("refund agent", "refund agent"),
        (12, 12),
        (None, None),
    ],
)
def test_formula_like_text_becomes_text(value, cell):
    assert csv_cell(value) == cell


def test_the_writer_escapes_every_cell():
    out = io.StringIO()
    CsvWriter(out).writerow(["=A1", 1, "ok"])
    assert out.getvalue() == "'=A1,1,ok\r\n"
