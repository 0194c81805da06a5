"""A table fitted to a terminal's width: names shortened by meaning, sentences cut at their end,
columns left out by their declared importance (`ColumnSpec`: low ones first, then the rest from
the right; never what says what a row is, nor the table's answer) and never a number broken."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from htatui.analysis.core.columns import ColumnSpec
from htatui.text.names import fit_names

NAME_MIN = 28
"""Name columns shrink to this many cells (other text to MIN_TEXT) before columns are left out."""

MIN_TEXT = 12
"""What any text column shrinks to when leaving columns out was not enough."""

COLUMN_GAP = 3
"""Cells between columns (a space, a rule and a space)."""


@dataclass
class FitColumn:
    spec: ColumnSpec
    cells: list[str]
    numeric: bool

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def header(self) -> str:
        return self.spec.header()

    @property
    def width(self) -> int:
        return max([len(self.header), *(len(c) for c in self.cells)])


@dataclass(frozen=True)
class Fitted:
    columns: list[FitColumn]
    left_out: list[str]
    """Names of the columns left out to fit."""


def table_width(columns: Sequence[FitColumn]) -> int:
    return sum(c.width for c in columns) + COLUMN_GAP * max(len(columns) - 1, 0)


def fit_columns(
    specs: Sequence[ColumnSpec],
    cells: Sequence[list[str]],
    numeric: Sequence[bool],
    width: int,
    raw_text: Callable[[int], list[str]],
) -> Fitted:
    """Columns that fit `width`: text shortened (names by meaning, sentences at their end), then
    columns left out, `low` ones first, then `normal` ones, rightmost first; `id` and `key`
    columns (and the first column) stay.

    `raw_text(i)` gives column i's full texts, shortened again whenever its width shrinks.
    """
    columns = [FitColumn(spec, list(c), num) for spec, c, num in zip(specs, cells, numeric, strict=True)]
    if table_width(columns) <= width:
        return Fitted(columns, [])
    names = [spec.name for spec in specs]
    left_out: list[str] = []
    for floor in (NAME_MIN, None, MIN_TEXT):
        while table_width(columns) > width:
            if _shrink_text(columns, width, floor, names, raw_text):
                continue
            dropped = _droppable(columns)
            if floor is None or not dropped:
                break
            columns.remove(dropped[-1])
            left_out.insert(0, dropped[-1].name)
        if table_width(columns) <= width:
            break
    return Fitted(columns, left_out)


def _droppable(columns: list[FitColumn]) -> list[FitColumn]:
    """Columns in the order they are kept (the last one goes first): `low` ones last; `id` and `key` never."""
    rest = [c for c in columns[1:] if c.spec.importance not in ("id", "key")]
    return [c for c in rest if c.spec.importance != "low"] + [c for c in rest if c.spec.importance == "low"]


def _shrink_text(
    columns: list[FitColumn],
    width: int,
    floor: int | None,
    names: Sequence[str],
    raw_text: Callable[[int], list[str]],
) -> bool:
    """Narrow the widest text column toward `floor` (names never below NAME_MIN unless floor is lower)."""
    if floor is None:
        return False
    # An answer in words (a straggler's cause) is cut only after every other column it could
    # make room by leaving out has gone.
    candidates = [
        c
        for c in columns
        if not c.numeric
        and c.width > max(_floor(c, floor), len(c.header))
        and not (floor == NAME_MIN and c.spec.sentence and c.spec.importance == "key")
    ]
    if not candidates:
        return False
    widest = max(candidates, key=lambda c: c.width)
    target = max(_floor(widest, floor), len(widest.header), widest.width - (table_width(columns) - width))
    texts = raw_text(names.index(widest.name))
    widest.cells = [end_cut(t, target) for t in texts] if widest.spec.sentence else indented_names(texts, target)
    return True


def indented_names(texts: list[str], width: int) -> list[str]:
    """Names shortened by meaning to `width`, each keeping its leading spaces (a tree's `call_path`
    says its depth by them)."""
    indents = [len(text) - len(text.lstrip(" ")) for text in texts]
    if not any(indents):
        return fit_names(texts, width)
    deepest = min(max(indents), max(width - 8, 0))
    bare = fit_names([text.lstrip(" ") for text in texts], max(width - deepest, 1))
    return [" " * min(indent, deepest) + name for indent, name in zip(indents, bare, strict=True)]


def end_cut(text: str, width: int) -> str:
    """A sentence cut at its end to `width` cells: its beginning says the most."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _floor(column: FitColumn, floor: int) -> int:
    important = column.spec.importance in ("id", "key")
    return floor if important else min(floor, MIN_TEXT)
