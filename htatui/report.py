"""Headless output: a view's frame as a rich table, CSV or a JSON array of row objects."""

from __future__ import annotations

import math
import sys
from typing import Literal, TextIO

import orjson
import polars as pl
from rich.console import Console
from rich.table import Table

Format = Literal["table", "csv", "json"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json")


# Table cells only: a 16 MB kernel name would stall rich's folding; CSV and JSON stay whole.
MAX_TABLE_CELL_CHARS = 2_000


def _table_cell(value: object) -> str:
    text = _cell(value)
    if len(text) <= MAX_TABLE_CELL_CHARS:
        return text
    half = (MAX_TABLE_CELL_CHARS - 1) // 2
    return f"{text[:half]}…{text[-half:]}"


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"{value:.3g}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _json_safe(frame: pl.DataFrame) -> list[dict[str, object]]:
    rows = frame.to_dicts()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float) and not math.isfinite(value):
                row[key] = None
    return rows


def render_frame(frame: pl.DataFrame, fmt: Format, title: str | None = None, out: TextIO | None = None) -> None:
    """Print `frame` in the chosen format; numbers are never rounded in CSV and JSON."""
    stream = out or sys.stdout
    if fmt == "json":
        stream.write(orjson.dumps(_json_safe(frame), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "csv":
        stream.write(frame.write_csv())
    else:
        # Piped output is not cut to 80 columns: scripts and logs read whole names.
        width = None if stream.isatty() else 400
        console = Console(file=stream, soft_wrap=False, width=width)
        if frame.height == 0:
            console.print(f"{title + ': ' if title else ''}no rows")
            return
        table = Table(title=title, title_justify="left", header_style="bold")
        for name, dtype in frame.schema.items():
            table.add_column(name, justify="right" if dtype.is_numeric() else "left", overflow="fold")
        for row in frame.iter_rows():
            table.add_row(*(_table_cell(v) for v in row))
        console.print(table)
