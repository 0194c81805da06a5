"""Headless output: a view's frame as a rich table, CSV or a JSON array of row objects."""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, TextIO

import orjson
import polars as pl

from htatui.analysis.core.columns import KEPT_DECIMALS, ColumnSpec, TableColumns, specs_for
from htatui.text.box_table import table_head, table_rows, visible
from htatui.text.fit import FitColumn, Fitted, fit_columns, table_width
from htatui.text.numbers import cell_text

if TYPE_CHECKING:
    import numpy as np

Format = Literal["table", "csv", "json"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json")
TABLE_EDGES = 4
"""Cells of a rich table's left and right borders with their padding."""

PIPE_WIDTH = 160
"""A table's width when stdout is not a terminal and $COLUMNS is not set: a file or a pager
still gets a readable table (`--wide`, CSV and JSON keep every column and full names)."""

CLEAN_DIGITS = 13
"""A CSV/JSON float with a unit the trace fixes (µs: to the ns) is rounded to it (KEPT_DECIMALS);
any other is written as its CLEAN_DIGITS-significant-digit decimal when that changes
it by at most CLEAN_ULPS units in the last place and CLEAN_ABS in absolute: binary noise such
as 730.3699999999999 (730.37 less one ulp) goes; a value whose digits are all real (75/7's
75.71428571428571, an epoch timestamp in µs) is written whole, as repr writes it."""

CLEAN_ULPS = 4
CLEAN_ABS = 1e-6
"""…so no value moves by more than 4 ulps (< 1e-15 relative) nor by more than 1e-6 (a picosecond in µs)."""


# Table cells only: a 16 MB kernel name would stall rich's folding; CSV and JSON stay whole.
MAX_TABLE_CELL_CHARS = 2_000


def _table_cell(value: object, unit: str) -> str:
    text = visible(cell_text(value, unit))
    if len(text) <= MAX_TABLE_CELL_CHARS:
        return text
    half = (MAX_TABLE_CELL_CHARS - 1) // 2
    return f"{text[:half]}…{text[-half:]}"


def clean_values(values: np.ndarray) -> np.ndarray:
    """Each float without binary noise: its CLEAN_DIGITS-significant-digit decimal (as the nearest
    double) when that is within CLEAN_ULPS ulps and CLEAN_ABS of it, else the value itself.

    Vectorised: scaling by an exact power of ten and dividing back is rounded once, so `near` is
    the double nearest the decimal; the rare values whose scale is not exact (under 1e-10, over
    1e35) go through the decimal text one at a time."""
    import numpy as np  # only CSV and JSON clean their floats: a table (and `info`) loads no numpy

    x = np.asarray(values, dtype=np.float64)
    out = x.copy()
    with np.errstate(all="ignore"):
        magnitude = np.abs(x)
        shift = CLEAN_DIGITS - 1 - np.floor(np.log10(np.where(magnitude > 0, magnitude, 1.0)))
        usable = np.isfinite(x) & (magnitude > 0) & (shift <= 22) & (shift >= -22)
        up = np.where(usable & (shift >= 0), shift, 0.0)
        down = np.where(usable & (shift < 0), -shift, 0.0)
        near = np.where(shift >= 0, np.round(x * 10.0**up) / 10.0**up, np.round(x / 10.0**down) * 10.0**down)
        tolerance = np.minimum(CLEAN_ULPS * np.spacing(magnitude), CLEAN_ABS)
        take = usable & (np.abs(near - x) <= tolerance)
    out[take] = near[take]
    for index in np.flatnonzero(np.isfinite(x) & (magnitude > 0) & ~usable):
        value = float(x[index])
        text_near = float(f"{value:.{CLEAN_DIGITS}g}")
        if abs(text_near - value) <= min(CLEAN_ULPS * math.ulp(value), CLEAN_ABS):
            out[index] = text_near
    return out


def clean_float(value: float) -> float:
    """One value through clean_values (730.3699999999999 → 730.37)."""
    import numpy as np

    return float(clean_values(np.array([value]))[0])


def kept_floats(frame: pl.DataFrame, columns: TableColumns | None = None) -> pl.DataFrame:
    """Every float column to the precision its unit has in the trace (µs: 3 decimals, the ns; %
    and ms: KEPT_DECIMALS), any other through clean_values (nulls stay null); the rest as they are."""
    changed = []
    for spec in specs_for(frame, columns):
        if frame.schema[spec.name] not in (pl.Float32, pl.Float64):
            continue
        column = frame[spec.name].cast(pl.Float64)
        decimals = KEPT_DECIMALS.get(spec.shown_unit)
        if decimals is not None:
            changed.append(pl.col(spec.name).cast(pl.Float64).round(decimals))
            continue
        cleaned = pl.Series(spec.name, clean_values(column.fill_null(0.0).to_numpy()))
        changed.append(pl.when(column.is_null()).then(None).otherwise(cleaned).alias(spec.name))
    return frame.with_columns(changed) if changed else frame


def json_rows(frame: pl.DataFrame, columns: TableColumns | None = None) -> list[dict[str, object]]:
    """The rows as `--format json` writes them: floats kept to their precision, NaN and inf as null."""
    rows = kept_floats(frame, columns).to_dicts()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
    return rows


def csv_text(frame: pl.DataFrame, columns: TableColumns | None = None) -> str:
    """CSV as polars writes it (shortest round-trip floats), from floats kept to their precision."""
    return kept_floats(frame, columns).write_csv()


def render_frame(
    frame: pl.DataFrame,
    fmt: Format,
    title: str | None = None,
    out: TextIO | None = None,
    *,
    wide: bool = False,
    columns: TableColumns | None = None,
    empty_message: str | None = None,
    notes: Sequence[str] = (),
) -> None:
    """Print `frame` in the chosen format; CSV and JSON keep each float to its unit's precision.

    `columns` declares the table's columns (labels, units, what is kept); a table without one is
    labelled from its column names. A table fits the terminal's width ($COLUMNS, or PIPE_WIDTH
    when piped; see htatui.text.fit) unless `wide`. An empty table says why (`empty_message`);
    `notes` (files skipped while loading…) follow a table, never CSV or JSON.
    """
    stream = out or sys.stdout
    if fmt == "json":
        stream.write(orjson.dumps(json_rows(frame, columns), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "csv":
        stream.write(csv_text(frame, columns))
    else:
        _render_table(frame, title, stream, wide, specs_for(frame, columns), empty_message)
        from rich.console import Console

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
    specs: Sequence[ColumnSpec],
    empty_message: str | None,
) -> None:
    # rich only here: CSV and JSON output do not pay for importing it.
    from rich.console import Console
    from rich.text import Text

    if frame.height == 0:
        why = f" ({empty_message})" if empty_message else ""
        console = Console(file=stream, width=table_columns(stream))
        console.print(f"{title + ': ' if title else ''}no rows{why}", markup=False, highlight=False)
        return
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    cells = [[_table_cell(v, spec.shown_unit) for v in frame[spec.name].to_list()] for spec in specs]
    if not wide:
        columns = table_columns(stream)
        fitted = fit_columns(specs, cells, numeric, columns - TABLE_EDGES, lambda i: cells[i])
    else:
        columns = 0
        fitted = Fitted([FitColumn(s, c, num) for s, c, num in zip(specs, cells, numeric, strict=True)], [])
    # The console is never narrower than the table, so nothing folds a number; rich styles the
    # title and header only, the rows are written as text (box_table: linear in the rows).
    drawn = table_width(fitted.columns) + TABLE_EDGES
    console = Console(file=stream, soft_wrap=True, width=max(columns, drawn))
    top, header = table_head(fitted.columns)
    if title:  # wrapped at the table's width, as rich's table did
        console.print(Text(visible(title), style="italic"), width=drawn, soft_wrap=False)
    console.print(top, markup=False, highlight=False)
    console.print(Text(header, style="bold"))
    for line in table_rows(fitted.columns):
        stream.write(line + "\n")
    if fitted.left_out:
        console.print(
            f"left out to fit {columns} columns: {', '.join(fitted.left_out)} (--wide shows all)",
            style="dim",
            markup=False,
            highlight=False,
            soft_wrap=False,
        )
