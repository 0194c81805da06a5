"""How the diff writes its cells and title: status glyphs, signed deltas, counts (no Textual here)."""

from __future__ import annotations

from typing import Any

from htatui.sources import SourcePath
from htatui.text.names import middle_cut
from htatui.text.numbers import cell_text

GLYPHS = {"added": "+", "removed": "−", "slower": "▲", "faster": "▼", "unchanged": "="}
"""Status glyphs: meaning never rests on colour alone."""


def side_name(path: SourcePath) -> str:
    """What the screen calls a side: the folder or file name, never a temp-dir path."""
    return path.name or str(path)


def diff_title(base: str, test: str, width: int) -> tuple[str, str]:
    """(prefix, sides) of the title line, fitted to `width`: the prefix goes first, then both
    names are cut in their middle, so the test job's name never falls off the end."""
    prefix, sides = " htatui diff │", f" base {base} ↔ test {test}"
    if len(prefix) + len(sides) <= width:
        return prefix, sides
    room = max(10, width - len(" base  ↔ test "))
    base_room = min(len(base), room // 2 if len(test) > room - room // 2 else room - len(test))
    return "", f" base {middle_cut(base, base_room)} ↔ test {middle_cut(test, room - base_room)}"


def fmt_count(value: Any) -> str:
    number = float(value)
    return f"{int(number):,}" if number.is_integer() else f"{number:,.1f}"


def fmt_whole(value: float) -> str:
    """Whole numbers (counts, whole µs) without decimals; others with two."""
    return f"{int(value):,}" if value.is_integer() else cell_text(value)


def fmt_compact(value: float) -> str:
    """One decimal below 10,000, none above (keeps big µs totals inside their column)."""
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:,.1f}"


def fmt_delta(value: float, unit: str = "", *, compact: bool = True) -> str:
    sign = "+" if value > 0 else ""
    return f"{sign}{fmt_compact(value) if compact else f'{value:,.1f}'}{unit}"
