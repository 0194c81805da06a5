"""How a value reads in a table cell: the one rule `report`'s tables and the app's tables share.

Floats get two decimals and thousands separators; never scientific notation: a time under
0.01 µs is written to the ns (the trace's precision; under half a ns reads 0.00), a share under
0.01 % reads 0.00, and any other tiny number gets three significant digits written out.
Integers are written as they are (ids and step numbers stay searchable), booleans are yes/no.
CSV and JSON keep the values (to the trace's precision); only table cells use this.
"""

from __future__ import annotations

import math

TINY_DIGITS = 3
"""Significant digits of a tiny number that has no unit to round it by."""

MAX_TINY_DECIMALS = 12
"""…written out to at most this many decimals (smaller reads 0.000000000000)."""


def cell_text(value: object, unit: str = "") -> str:
    """The text of one table cell; "" for a missing value (None or NaN). `unit` (µs, %, …) decides
    how a tiny float reads."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value == 0 or abs(value) >= 0.01 or unit == "%" or math.isinf(value) or unit == "µs" and abs(value) < 0.0005:
            return f"{value:,.2f}"
        if unit == "µs":
            return f"{value:.3f}"
        return tiny_text(value)
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def tiny_text(value: float) -> str:
    """0.0000123 → '0.0000123': three significant digits, written out (no e-notation)."""
    decimals = min(MAX_TINY_DECIMALS, TINY_DIGITS - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text and text.rstrip("0").rstrip(".") not in ("0", "-0") else text
