"""A DataTable fed from a polars frame: filtered, sorted and capped in polars, with vim keys."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from htatui.analysis.common import shorten_name

ROW_LIMIT = 200
"""Rows built at most; the rest stay in polars and the title says how many were left out."""

NAME_WIDTH = 36
"""Text cells longer than this are shortened in the middle (the full text is copied with y)."""

Formatter = Callable[[Any], str]


def fmt_us(value: Any) -> str:
    return f"{value:,.1f}"


def fmt_pct(value: Any) -> str:
    return f"{value:.1f}"


def fmt_int(value: Any) -> str:
    return f"{int(value):,}"


def fmt_float(value: Any) -> str:
    return f"{value:,.2f}"


def fmt_ratio(value: Any) -> str:
    return f"{value:.3f}"


FORMATS: dict[str, Formatter] = {
    "us": fmt_us,
    "pct": fmt_pct,
    "int": fmt_int,
    "float": fmt_float,
    "ratio": fmt_ratio,
    "text": str,
}


MAX_CELL_SOURCE_CHARS = 4_096
"""Longer text is cut in its middle, not shortened by meaning, before a cell draws it."""


@lru_cache(maxsize=4096)
def short_kernel_name(name: str) -> str:
    return shorten_name(name) or name


def middle_truncate(text: str, width: int) -> str:
    """Shorten `text` to `width` cells by cutting its middle: kernel names differ at both ends."""
    if width <= 0 or len(text) <= width:
        return text
    if width < 5:
        return text[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    return f"{text[:head]}…{text[-tail:]}"


@dataclass(frozen=True)
class Column:
    """How one frame column is shown: its label (with unit), format, width and sortability."""

    key: str
    label: str
    fmt: str = "float"
    width: int | None = None
    sortable: bool = True
    short_names: bool = False
    """Show kernel names the way HTA shortens them (templates and arguments dropped)."""
    transform: Callable[[str], str] | None = None
    """Another way to shorten a text cell for display (copy and filter still see the full text)."""
    cut_end: bool = False
    """Shorten long text at its end instead of its middle."""

    @property
    def numeric(self) -> bool:
        return self.fmt != "text"

    def cell(self, value: Any) -> Text:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return Text("–", justify="right" if self.numeric else "left", style="dim")
        if self.numeric:
            try:
                return Text(FORMATS[self.fmt](value), justify="right")
            except (TypeError, ValueError):
                return Text(str(value), justify="right")
        text = str(value)
        if len(text) > MAX_CELL_SOURCE_CHARS:
            # Shortening nested templates is quadratic in the name's length and no cell shows
            # that much: a huge name is only cut in its middle.
            text = middle_truncate(text, MAX_CELL_SOURCE_CHARS)
        elif self.short_names:
            text = short_kernel_name(text)
        if self.transform is not None:
            text = self.transform(text)
        width = self.width or NAME_WIDTH
        if self.cut_end and len(text) > width:
            return Text(text[: width - 1] + "…")
        return Text(middle_truncate(text, width))


def auto_columns(frame: pl.DataFrame, labels: dict[str, str] | None = None) -> list[Column]:
    """Columns for every field of `frame`: units from name suffixes (`_us`, `_pct`, `_gbps`)."""
    labels = labels or {}
    columns: list[Column] = []
    for name, dtype in frame.schema.items():
        if dtype.is_integer():
            fmt = "int"
        elif dtype.is_float():
            fmt = "us" if name.endswith("_us") else "pct" if name.endswith("_pct") else "float"
        else:
            fmt = "text"
        columns.append(Column(name, labels.get(name, default_label(name)), fmt))
    return columns


def default_label(name: str) -> str:
    """'idle_time_us' → 'idle time (µs)'; 'bw_gbps' → 'bw (GB/s)'."""
    units = {"_us": "µs", "_pct": "%", "_gbps": "GB/s", "_ms": "ms", "_bytes": "B"}
    for suffix, unit in units.items():
        if name.endswith(suffix):
            return f"{name[: -len(suffix)].replace('_', ' ')} ({unit})"
    return name.replace("_", " ")


class ViewTable(DataTable[Text]):
    """A capped, polars-backed table with vim keys, a sort column and an incremental filter."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False, id="table.down"),
        Binding("k", "cursor_up", "Up", show=False, id="table.up"),
        Binding("h", "scroll_left", "Scroll left", show=False, id="table.left"),
        Binding("l", "scroll_right", "Scroll right", show=False, id="table.right"),
        Binding("g", "scroll_top", "Top", show=False, id="table.top"),
        Binding("G", "scroll_bottom", "Bottom", show=False, id="table.bottom"),
        Binding("ctrl+d", "page_down", "Half page down", show=False, id="table.page_down"),
        Binding("ctrl+u", "page_up", "Half page up", show=False, id="table.page_up"),
        Binding("s", "cycle_sort", "Sort", tooltip="Sort by the next column", id="table.sort"),
        Binding("S", "reverse_sort", "Reverse", show=False, tooltip="Reverse the sort", id="table.reverse"),
        Binding("y", "copy_cell", "Copy", show=False, tooltip="Copy the row's name (OSC 52)", id="table.copy"),
        Binding(
            "Y",
            "copy_row",
            "Copy row",
            show=False,
            tooltip="Copy the row, tab-separated",
            id="table.copy_row",
        ),
    ]

    DEFAULT_CSS = """
    ViewTable {
        height: 1fr;
        border: none;
        border-top: solid $panel-lighten-2;
        border-title-color: $foreground-muted;
        &:focus {
            border-top: solid $primary;
            border-title-color: $foreground;
        }
    }
    """

    @dataclass
    class Changed(Message):
        """The rows shown changed (new data, filter or sort)."""

        table: ViewTable

    def __init__(self, title: str = "", *, row_limit: int = ROW_LIMIT, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.title = title
        self.row_limit = row_limit
        self.columns_spec: list[Column] = []
        self.source = pl.DataFrame()
        self.shown = pl.DataFrame()
        self.filter_text = ""
        self.sort_key: str | None = None
        self.descending = True
        self.fixed_columns = 1

    # ---- data ---------------------------------------------------------------------------
    def set_frame(
        self,
        frame: pl.DataFrame,
        columns: Sequence[Column] | None = None,
        *,
        sort: str | None = None,
        descending: bool = True,
    ) -> None:
        """Show `frame` with `columns` (all fields when None); missing fields are skipped."""
        spec = list(columns) if columns is not None else auto_columns(frame)
        self.columns_spec = [c for c in spec if c.key in frame.columns]
        self.source = frame
        if sort is not None and sort in frame.columns:
            self.sort_key, self.descending = sort, descending
        elif self.sort_key not in frame.columns:
            self.sort_key = None
        self._rebuild(keep_cursor=False)

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._rebuild(keep_cursor=False)

    def filtered(self) -> pl.DataFrame:
        """The source rows that pass the filter, in the current sort order (not capped)."""
        frame = self.source
        needle = self.filter_text.strip().lower()
        text_columns = [c.key for c in self.columns_spec if not c.numeric]
        if needle and text_columns and frame.height:
            match = pl.any_horizontal(
                pl.col(name).cast(pl.Utf8).str.to_lowercase().str.contains(needle, literal=True).fill_null(False)
                for name in text_columns
            )
            frame = frame.filter(match)
        if self.sort_key is not None and frame.height:
            frame = frame.sort(self.sort_key, descending=self.descending, nulls_last=True, maintain_order=True)
        return frame

    def _rebuild(self, keep_cursor: bool) -> None:
        row = self.cursor_row if keep_cursor else 0
        matching = self.filtered()
        self.shown = matching.head(self.row_limit)
        self.clear(columns=True)
        for column in self.columns_spec:
            arrow = ""
            if column.key == self.sort_key:
                arrow = " ▼" if self.descending else " ▲"
            label = Text(column.label + arrow, justify="right" if column.numeric else "left")
            self.add_column(label, key=column.key, width=column.width)
        keys = [c.key for c in self.columns_spec]
        self.add_rows(
            [column.cell(value) for column, value in zip(self.columns_spec, values, strict=True)]
            for values in self.shown.select(keys).iter_rows()
        )
        if self.row_count:
            self.move_cursor(row=min(row, self.row_count - 1), animate=False)
        self._update_title(matching.height)
        self.post_message(self.Changed(self))

    def _update_title(self, matching: int) -> None:
        parts = [self.title] if self.title else []
        total, shown = self.source.height, self.shown.height
        if self.filter_text:
            parts.append(f"/{self.filter_text}: {matching:,} of {total:,} match")
            if shown < matching:
                parts.append(f"showing {shown:,}")
        elif shown < total:
            parts.append(f"showing {shown:,} of {total:,}")
        self.border_title = " · ".join(parts)

    def selected_row(self) -> dict[str, Any] | None:
        """The full (untruncated) values of the highlighted row."""
        if not self.row_count or self.shown.height == 0:
            return None
        index = min(self.cursor_row, self.shown.height - 1)
        return self.shown.row(index, named=True)

    # ---- actions ------------------------------------------------------------------------
    def action_cycle_sort(self) -> None:
        sortable = [c.key for c in self.columns_spec if c.sortable]
        if not sortable:
            return
        position = sortable.index(self.sort_key) + 1 if self.sort_key in sortable else 0
        self.sort_key = sortable[position % len(sortable)]
        self.descending = next(c.numeric for c in self.columns_spec if c.key == self.sort_key)
        self._rebuild(keep_cursor=False)

    def action_reverse_sort(self) -> None:
        if self.sort_key is None:
            self.action_cycle_sort()
            return
        self.descending = not self.descending
        self._rebuild(keep_cursor=False)

    def action_scroll_top(self) -> None:
        if self.row_count:
            self.move_cursor(row=0, animate=False)

    def action_scroll_bottom(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)

    def action_page_down(self) -> None:
        if self.row_count:
            step = max(1, self.scrollable_content_region.height // 2)
            self.move_cursor(row=min(self.row_count - 1, self.cursor_row + step), animate=False)

    def action_page_up(self) -> None:
        if self.row_count:
            step = max(1, self.scrollable_content_region.height // 2)
            self.move_cursor(row=max(0, self.cursor_row - step), animate=False)

    def action_copy_cell(self) -> None:
        row = self.selected_row()
        if row is None or not self.columns_spec:
            return
        text = _plain(row[self.columns_spec[0].key])
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied {middle_truncate(text, 40)}", timeout=2)

    def action_copy_row(self) -> None:
        row = self.selected_row()
        if row is None:
            return
        text = "\t".join(_plain(row[c.key]) for c in self.columns_spec)
        self.app.copy_to_clipboard(text)
        self.notify("Copied the row (tab-separated)", timeout=2)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key is None:
            return
        if key == self.sort_key:
            self.descending = not self.descending
        else:
            self.sort_key = key
            self.descending = next((c.numeric for c in self.columns_spec if c.key == key), True)
        self._rebuild(keep_cursor=False)


def _plain(value: Any) -> str:
    return "" if value is None else str(value)
