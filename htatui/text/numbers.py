"""How a value reads in a table cell: the one rule `report`'s tables and the app's tables share.

Floats get two decimals and thousands separators (tiny ones three significant digits), integers
are written as they are (ids and step numbers stay searchable), booleans are yes/no. CSV and
JSON keep the exact values; only table cells use this.
"""

from __future__ import annotations

import math


def cell_text(value: object) -> str:
    """The text of one table cell; "" for a missing value (None or NaN)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.3g}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)
