"""Headless output: a view's frame as a rich table, CSV or a JSON array of row objects."""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Literal, TextIO

import orjson
import polars as pl
from rich.console import Console
from rich.table import Table

from htatui.text.fit import FitColumn, Fitted, fit_columns, table_width
from htatui.text.numbers import cell_text

Format = Literal["table", "csv", "json"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json")
TABLE_EDGES = 4
"""Cells of a rich table's left and right borders with their padding."""

PIPE_WIDTH = 160
"""A table's width when stdout is not a terminal and $COLUMNS is not set: a file or a pager
still gets a readable table (`--wide`, CSV and JSON keep every column and full names)."""

CLEAN_DIGITS = 13
"""A CSV/JSON float is written as its CLEAN_DIGITS-significant-digit decimal when that changes
it by at most CLEAN_ULPS units in the last place and CLEAN_ABS in absolute: binary noise such
as 730.3699999999999 (730.37 less one ulp) goes; a value whose digits are all real (75/7's
75.71428571428571, an epoch timestamp in µs) is written whole, as repr writes it."""

CLEAN_ULPS = 4
CLEAN_ABS = 1e-6
"""…so no value moves by more than 4 ulps (< 1e-15 relative) nor by more than 1e-6 (a picosecond in µs)."""


# Table cells only: a 16 MB kernel name would stall rich's folding; CSV and JSON stay whole.
MAX_TABLE_CELL_CHARS = 2_000


def _table_cell(value: object) -> str:
    text = cell_text(value)
    if len(text) <= MAX_TABLE_CELL_CHARS:
        return text
    half = (MAX_TABLE_CELL_CHARS - 1) // 2
    return f"{text[:half]}…{text[-half:]}"


def clean_float(value: float) -> float:
    """`value` without binary noise: its CLEAN_DIGITS-digit decimal when that is within
    CLEAN_ULPS ulps and CLEAN_ABS of it (so repr writes 730.37), else `value` itself."""
    if not math.isfinite(value) or value == 0:
        return value
    near = float(f"{value:.{CLEAN_DIGITS}g}")
    tolerance = min(CLEAN_ULPS * math.ulp(value), CLEAN_ABS)
    return near if abs(near - value) <= tolerance else value


def _clean_floats(frame: pl.DataFrame) -> pl.DataFrame:
    """Every float column (and list of floats) through clean_float; other columns as they are."""
    changed = []
    for name, dtype in frame.schema.items():
        if dtype in (pl.Float32, pl.Float64):
            values = [None if v is None else clean_float(v) for v in frame[name].to_list()]
            changed.append(pl.Series(name, values, dtype=pl.Float64))
    return frame.with_columns(changed) if changed else frame


def _json_safe(frame: pl.DataFrame) -> list[dict[str, object]]:
    rows = _clean_floats(frame).to_dicts()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
    return rows


def csv_text(frame: pl.DataFrame) -> str:
    """CSV with each float written as the shortest text that reads back as its clean value."""
    floats = [name for name, dtype in frame.schema.items() if dtype in (pl.Float32, pl.Float64)]
    if not floats:
        return frame.write_csv()
    texts = [
        pl.Series(name, [None if v is None else _float_text(clean_float(v)) for v in frame[name].to_list()], pl.Utf8)
        for name in floats
    ]
    return frame.with_columns(texts).write_csv()


def _float_text(value: float) -> str:
    """As polars writes floats (NaN, inf, -inf), otherwise Python's shortest round-trip repr."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"  # as polars writes it: 4.75e-9, 1e16


def render_frame(
    frame: pl.DataFrame,
    fmt: Format,
    title: str | None = None,
    out: TextIO | None = None,
    *,
    wide: bool = False,
    keep: Sequence[str] = (),
    key: Sequence[str] = (),
    empty_message: str | None = None,
    notes: Sequence[str] = (),
) -> None:
    """Print `frame` in the chosen format; numbers are never rounded in CSV and JSON.

    A table fits the terminal's width ($COLUMNS, or PIPE_WIDTH when piped; see htatui.text.fit)
    unless `wide`, leaving out the columns not in `keep` first and never those in `key`.
    CSV and JSON floats lose only their binary noise (clean_float). An empty table says why
    (`empty_message`); `notes` (files skipped while loading…) follow a table, never CSV or JSON.
    """
    stream = out or sys.stdout
    if fmt == "json":
        stream.write(orjson.dumps(_json_safe(frame), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "csv":
        stream.write(csv_text(frame))
    else:
        _render_table(frame, title, stream, wide, (*key, *keep), key, empty_message)
        for note in notes:
            Console(file=stream, width=table_columns(stream)).print(note, markup=False, highlight=False)


def table_columns(stream: TextIO) -> int:
    """The width a table is fitted to: $COLUMNS when set, else the terminal's, else PIPE_WIDTH."""
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    if stream.isatty():
        return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
    return PIPE_WIDTH


def _render_table(
    frame: pl.DataFrame,
    title: str | None,
    stream: TextIO,
    wide: bool,
    keep: Sequence[str],
    key: Sequence[str],
    empty_message: str | None,
) -> None:
    if frame.height == 0:
        why = f" ({empty_message})" if empty_message else ""
        console = Console(file=stream, width=table_columns(stream))
        console.print(f"{title + ': ' if title else ''}no rows{why}", markup=False, highlight=False)
        return
    names = frame.columns
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    cells = [[_table_cell(v) for v in frame[name].to_list()] for name in names]
    if not wide:
        columns = table_columns(stream)
        fitted = fit_columns(names, cells, numeric, columns - TABLE_EDGES, lambda i: cells[i], keep, key)
    else:
        columns = 0
        fitted = Fitted([FitColumn(n, n, c, num) for n, c, num in zip(names, cells, numeric, strict=True)], [])
    # The console is never narrower than the table, so rich never folds a number.
    console = Console(file=stream, soft_wrap=False, width=max(columns, table_width(fitted.columns) + TABLE_EDGES))
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in fitted.columns:
        table.add_column(
            column.header,
            justify="right" if column.numeric else "left",
            no_wrap=True,
            min_width=column.width,
            overflow="ellipsis",
        )
    for row in zip(*(column.cells for column in fitted.columns), strict=True):
        table.add_row(*row)
    console.print(table)
    if fitted.left_out:
        console.print(
            f"left out to fit {columns} columns: {', '.join(fitted.left_out)} (--wide shows all)",
            style="dim",
            markup=False,
            highlight=False,
        )
