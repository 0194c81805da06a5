"""A table fitted to a terminal's width: short headers, names shortened by meaning, columns
left out by priority (rightmost first) and never a number broken across lines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from htatui.text.names import fit_names

UNITS = (
    ("_us", "µs"),
    ("_pct", "%"),
    ("_ms", "ms"),
    ("_bytes", "B"),
    ("_gbps", "GB/s"),
)
WORDS = {
    "non_compute": "non-comp",
    "compute": "comp",
    "duration": "dur",
    "kernel_type": "type",
    "straggler": "strag",
    "rank_source": "source",
    "count": "n",
}
"""Short words for headers in a narrow terminal; the unit always stays."""

KEEP = frozenset({"rank", "name", "job", "kernel", "operator", "op", "view", "metric", "call_path"})
"""Columns that say what a row is: left out only when nothing else is left."""

NAME_MIN = 28
"""Name columns shrink to this many cells (other text to MIN_TEXT) before columns are left out."""

MIN_TEXT = 12
"""What any text column shrinks to when leaving columns out was not enough."""

LOW = frozenset({"warnings", "rank_source", "file", "device", "std_us", "min_us", "max_us", "kernel_type"})
"""Columns left out before the others."""

COLUMN_GAP = 3
"""Cells between columns (a space, a rule and a space)."""


def short_header(name: str) -> str:
    """'non_compute_time_us' → 'non-comp time µs': short words, the unit kept."""
    stem, unit = name, ""
    for suffix, symbol in UNITS:
        if name.endswith(suffix):
            stem, unit = name[: -len(suffix)], symbol
            break
    stem = f"_{stem}_"
    for word, short in WORDS.items():
        stem = stem.replace(f"_{word}_", f"_{short}_")
    stem = stem.replace("_", " ").strip()
    return f"{stem} {unit}".strip() if unit else stem


@dataclass
class FitColumn:
    name: str
    header: str
    cells: list[str]
    numeric: bool

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
    names: Sequence[str],
    cells: Sequence[list[str]],
    numeric: Sequence[bool],
    width: int,
    raw_text: Callable[[int], list[str]],
    keep: Sequence[str] = (),
    key: Sequence[str] = (),
) -> Fitted:
    """Columns that fit `width`: headers shortened, text shortened by meaning, then columns left out.

    `raw_text(i)` gives column i's full texts, shortened again whenever its width shrinks;
    `keep` names the columns that matter most, most important first (the others go first);
    `key` names a table's key columns (the ones it exists for), never left out.
    """
    columns = [FitColumn(n, n, list(c), num) for n, c, num in zip(names, cells, numeric, strict=True)]
    if table_width(columns) <= width:
        return Fitted(columns, [])
    for column in columns:
        column.header = short_header(column.name)
    left_out: list[str] = []
    for floor in (NAME_MIN, None, MIN_TEXT):
        while table_width(columns) > width:
            if _shrink_text(columns, width, floor, names, raw_text):
                continue
            if floor is None or floor == MIN_TEXT and not _droppable(columns, keep, key):
                break
            dropped = _droppable(columns, keep, key)
            if not dropped:
                break
            columns.remove(dropped[-1])
            left_out.insert(0, dropped[-1].name)
        if table_width(columns) <= width:
            break
    return Fitted(columns, left_out)


def _droppable(columns: list[FitColumn], keep: Sequence[str] = (), key: Sequence[str] = ()) -> list[FitColumn]:
    """Columns in the order they are kept (the last one goes first): low-priority ones last; key ones never."""
    rest = [c for c in columns[1:] if c.name not in KEEP and c.name not in key]
    if keep:
        listed = sorted((c for c in rest if c.name in keep), key=lambda c: keep.index(c.name))
        return listed + [c for c in rest if c.name not in keep]
    return [c for c in rest if c.name not in LOW] + [c for c in rest if c.name in LOW]


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
    candidates = [c for c in columns if not c.numeric and c.width > max(_floor(c, floor), len(c.header))]
    if not candidates:
        return False
    widest = max(candidates, key=lambda c: c.width)
    target = max(_floor(widest, floor), len(widest.header), widest.width - (table_width(columns) - width))
    widest.cells = fit_names(raw_text(names.index(widest.name)), target)
    return True


def _floor(column: FitColumn, floor: int) -> int:
    return floor if column.name in KEEP else min(floor, MIN_TEXT)
