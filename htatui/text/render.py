"""Headless output: a view's frame as a rich table, CSV or a JSON array of row objects."""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Sequence
from typing import Literal, TextIO

import orjson
import polars as pl

from htatui.text.fit import FitColumn, Fitted, fit_columns, table_width
from htatui.text.numbers import cell_text

Format = Literal["table", "csv", "json"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json")
TABLE_EDGES = 4
"""Cells of a rich table's left and right borders with their padding."""


# Table cells only: a 16 MB kernel name would stall rich's folding; CSV and JSON stay whole.
MAX_TABLE_CELL_CHARS = 2_000


def _table_cell(value: object) -> str:
    text = cell_text(value)
    if len(text) <= MAX_TABLE_CELL_CHARS:
        return text
    half = (MAX_TABLE_CELL_CHARS - 1) // 2
    return f"{text[:half]}…{text[-half:]}"


def _json_safe(frame: pl.DataFrame) -> list[dict[str, object]]:
    rows = frame.to_dicts()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
    return rows


def render_frame(
    frame: pl.DataFrame,
    fmt: Format,
    title: str | None = None,
    out: TextIO | None = None,
    *,
    wide: bool = False,
    keep: Sequence[str] = (),
) -> None:
    """Print `frame` in the chosen format; numbers are never rounded in CSV and JSON.

    A table on a terminal fits its width (see htatui.text.fit) unless `wide`, leaving out the columns
    not in `keep` first; piped, it keeps full rows.
    """
    stream = out or sys.stdout
    if fmt == "json":
        stream.write(orjson.dumps(_json_safe(frame), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "csv":
        stream.write(frame.write_csv())
    else:
        _render_table(frame, title, stream, wide, keep)


def _render_table(frame: pl.DataFrame, title: str | None, stream: TextIO, wide: bool, keep: Sequence[str]) -> None:
    # rich only here: CSV and JSON output do not pay for importing it.
    from rich.console import Console
    from rich.table import Table

    terminal = stream.isatty()
    if frame.height == 0:
        Console(file=stream, soft_wrap=False).print(f"{title + ': ' if title else ''}no rows")
        return
    names = frame.columns
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    cells = [[_table_cell(v) for v in frame[name].to_list()] for name in names]
    if terminal and not wide:
        columns = shutil.get_terminal_size().columns
        fitted = fit_columns(names, cells, numeric, columns - TABLE_EDGES, lambda i: cells[i], keep)
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
