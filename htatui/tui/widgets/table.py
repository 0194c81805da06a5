"""A DataTable fed from a polars frame: filtered, sorted and capped in polars, with vim keys."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable

from htatui.analysis.core.columns import Importance, TableColumns, specs_for
from htatui.analysis.core.names import readable_name
from htatui.text.names import SHORT_LEVEL, fit_names, middle_cut
from htatui.text.numbers import cell_text

ROW_LIMIT = 200
"""Rows built at most; the rest stay in polars and the title says how many were left out."""

NAME_WIDTH = 36
"""Text cells longer than this are shortened in the middle (the full text is copied with y)."""


def fmt_us(value: Any) -> str:
    """A µs figure in a label (the op tree's node labels), as table cells write it."""
    return cell_text(float(value))


CURSOR_MARK = "▶"
"""Marks the cursor row of the focused table, in a gutter left of the first column."""

MIN_NAME_WIDTH = 28
"""A name column is cut down to this, but no further, to keep number columns in sight."""

MARK_COLUMN_WIDTH = 3
"""The gutter's cells: the mark and the cell padding either side."""

MAX_CELL_SOURCE_CHARS = 4_096
"""Longer text is cut in its middle, not shortened by meaning, before a cell draws it."""


@lru_cache(maxsize=4096)
def short_kernel_name(name: str) -> str:
    return readable_name(name)


@dataclass(frozen=True)
class ColumnHint:
    """How a screen wants one of a table's columns shown (the label and values are the table's)."""

    width: int | None = None
    short_names: bool = False
    transform: Callable[[str], str] | None = None
    cut_end: bool = False
    priority: int | None = None
    """None: from the column's declared importance (`ColumnSpec`); a number overrides it where a
    screen's toggle changes what comes first (Idle's %/µs)."""


PRIORITY: dict[Importance, int] = {"id": 0, "key": 0, "normal": 1, "low": 2}
"""A declared importance as a Column priority: what says what a row is and the answer stay."""


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
    priority: int = 1
    """Columns that do not fit the table's width are left out highest priority number first
    (rightmost first among equals); 0 is never left out, nor is the first column."""
    unit: str = ""
    """µs, %, … (how a tiny number reads, `cell_text`)."""

    @property
    def numeric(self) -> bool:
        return self.fmt != "text"

    def cell(self, value: Any) -> Text:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return Text("–", justify="right" if self.numeric else "left", style="dim")
        if self.numeric:
            return Text(cell_text(value, self.unit), justify="right")
        text = value if isinstance(value, str) else cell_text(value)
        if len(text) > MAX_CELL_SOURCE_CHARS:
            # Shortening nested templates is quadratic in the name's length and no cell shows
            # that much: a huge name is only cut in its middle.
            text = middle_cut(text, MAX_CELL_SOURCE_CHARS)
        elif self.short_names:
            text = short_kernel_name(text)
        if self.transform is not None:
            text = self.transform(text)
        # An answer in words starts whole; the table cuts it only when nothing else can go.
        width = self.width or (len(text) if _answer_in_words(self) else NAME_WIDTH)
        if self.cut_end and len(text) > width:
            return Text(text[: width - 1] + "…")
        return Text(middle_cut(text, width))

    def cells(self, values: Sequence[Any]) -> list[Text]:
        """The cells of a whole column (text cells are shortened together to stay distinct)."""
        if self.numeric or self.transform is not None or self.cut_end:
            return [self.cell(value) for value in values]
        present = [value if isinstance(value, str) else cell_text(value) for value in values if value is not None]
        start = SHORT_LEVEL if self.short_names else 0
        fitted = iter(fit_names(present, self.width or NAME_WIDTH, start=start))
        return [Text("–", style="dim") if value is None else Text(next(fitted)) for value in values]


def fitted_width(column: Column, cells: Sequence[Text]) -> int | None:
    """A numeric column widens to its longest number: a number is never cut."""
    if column.width is None or not column.numeric:
        return column.width
    return max([column.width, *(cell.cell_len for cell in cells)])


def auto_columns(
    frame: pl.DataFrame, hints: Mapping[str, ColumnHint] | None = None, declared: TableColumns | None = None
) -> list[Column]:
    """Every column of `frame`, in its order, labelled and ranked as its table declares (`report`
    prints the same labels; undeclared columns: from the name), numbers written as `report`
    writes them; `hints` only shape the display."""
    hints = hints or {}
    columns: list[Column] = []
    for spec in specs_for(frame, declared):
        dtype = frame.schema[spec.name]
        fmt = "int" if dtype.is_integer() else "float" if dtype.is_numeric() else "text"
        hint = hints.get(spec.name, ColumnHint())
        columns.append(
            Column(
                spec.name,
                spec.header(),
                fmt,
                width=hint.width,
                short_names=hint.short_names,
                transform=hint.transform,
                cut_end=hint.cut_end or spec.sentence,
                priority=PRIORITY[spec.importance] if hint.priority is None else hint.priority,
                unit=spec.shown_unit,
            )
        )
    return columns


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
        Binding("enter", "select_cursor", "Full name", show=False, tooltip="Show the row's full name", id="table.full"),
        Binding(
            "w",
            "toggle_columns",
            "Columns",
            show=False,
            tooltip="Show every column, or only those that fit",
            id="table.columns",
        ),
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

        @property
        def control(self) -> ViewTable:
            """The table, so `@on(ViewTable.Changed, selector)` can match it."""
            return self.table

    def __init__(self, title: str = "", *, row_limit: int = ROW_LIMIT, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.title = title
        self.note = ""
        """A sentence beside the title (how the table was made); cut first when the title is too wide."""
        self.row_limit = row_limit
        self.columns_spec: list[Column] = []
        self.source = pl.DataFrame()
        self.shown = pl.DataFrame()
        self.filter_text = ""
        self.sort_key: str | None = None
        self.descending = True
        self.fixed_columns = 1
        self._matching = 0
        self._fitted_for = 0
        self.show_all_columns = False
        self.left_out: list[str] = []
        self._marked_row: int | None = None
        self.name_on_enter = True
        """Enter shows the row's full name; off where enter does something else (a toast would
        cover what it opened)."""

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
        cells = [column.cells(self.shown[column.key].to_list()) for column in self.columns_spec]
        labels = []
        for column in self.columns_spec:
            arrow = ""
            if column.key == self.sort_key:
                arrow = " ▼" if self.descending else " ▲"
            labels.append(Text(column.label + arrow, justify="right" if column.numeric else "left"))
        widths = [
            fitted_width(column, column_cells) or max([label.cell_len, *(c.cell_len for c in column_cells)])
            for column, column_cells, label in zip(self.columns_spec, cells, labels, strict=True)
        ]
        columns = list(self.columns_spec)
        self._fitted_for = self.scrollable_content_region.width
        if self._fitted_for > 0:
            self._shrink_text_columns(columns, widths, cells)
        kept = self._columns_that_fit(widths)
        if self._fitted_for > 0:
            self._cut_answer_to_fit(kept, columns, widths, cells)
            self._widen_text_columns(kept, columns, widths, cells)
        self.left_out = [c.label for i, c in enumerate(self.columns_spec) if i not in kept]
        for index in kept:
            column = columns[index]
            self.add_column(labels[index], key=column.key, width=fitted_width(column, cells[index]))
        for row_index in range(self.shown.height):
            self.add_row(*(cells[index][row_index] for index in kept), label=Text(" "))
        # The gutter is one cell wide from the first frame: Textual measures row labels only when
        # idle, and a screen drawn before that (a busy machine, a snapshot) had its header and rows
        # one cell apart.
        self._label_column.content_width = max(self._label_column.content_width, 1)
        self._marked_row = None
        if self.row_count:
            self.move_cursor(row=min(row, self.row_count - 1), animate=False)
        self._mark_cursor_row()
        self._update_title(matching.height)
        # Sent as the table's own: posted from the pane's filter handler, it would otherwise stop
        # bubbling at the pane (Textual does not bubble a message back to its sender).
        self.post_message(self.Changed(self).set_sender(self))

    # ---- the cursor mark: the focused table's cursor row reads without colour ---------------
    def _mark_cursor_row(self) -> None:
        """Put CURSOR_MARK in the row-label gutter of the cursor row while the table has focus."""
        wanted = self.cursor_row if self.has_focus and self.row_count else None
        if wanted == self._marked_row:
            return
        for index, mark in ((self._marked_row, " "), (wanted, CURSOR_MARK)):
            if index is not None and index < self.row_count:
                self.rows[self.ordered_rows[index].key].label = Text(mark, style="bold")
        self._marked_row = wanted
        # Textual caches rendered rows by this count; a changed label must invalidate them.
        self._update_count += 1
        self.refresh()

    def watch_cursor_coordinate(self, old_coordinate: Coordinate, new_coordinate: Coordinate) -> None:
        super().watch_cursor_coordinate(old_coordinate, new_coordinate)
        self._mark_cursor_row()

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self._mark_cursor_row()

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self._mark_cursor_row()

    def _update_title(self, matching: int) -> None:
        parts: list[str] = []
        total, shown = self.source.height, self.shown.height
        if self.filter_text:
            parts.append(f"/{self.filter_text}: {matching:,} of {total:,} match")
            if shown < matching:
                parts.append(f"showing {shown:,}")
        elif shown < total:
            parts.append(f"showing {shown:,} of {total:,}")
        if self.left_out:
            parts.append(f"{len(self.left_out)} more column{'s' if len(self.left_out) > 1 else ''} (w)")
        hidden = self.hidden_columns()
        if hidden:
            parts.append(f"→ {hidden} more column{'s' if hidden > 1 else ''}")
        self.border_title = fitted_title(self.title, self.note, parts, self.size.width - TITLE_EDGES)
        self._matching = matching

    def _columns_that_fit(self, widths: list[int]) -> list[int]:
        """Indexes of the columns to show: all with `w`, else as many as fit, by priority."""
        self._fitted_for = self.scrollable_content_region.width
        kept = list(range(len(widths)))
        available = self._fitted_for - MARK_COLUMN_WIDTH
        if self.show_all_columns or available <= 0:
            return kept
        padding = 2 * self.cell_padding
        droppable = sorted(
            (i for i in kept[1:] if self.columns_spec[i].priority > 0),
            key=lambda i: (self.columns_spec[i].priority, i),
            reverse=True,
        )
        total = sum(width + padding for width in widths)
        for index in droppable:
            if total <= available:
                break
            kept.remove(index)
            total -= widths[index] + padding
        return kept

    def _spare_width(self, kept: list[int], widths: list[int]) -> int:
        """Cells the kept columns leave free in the table (negative: they overflow it)."""
        padding = 2 * self.cell_padding
        return self._fitted_for - MARK_COLUMN_WIDTH - sum(widths[i] + padding for i in kept)

    def _shrink_text_columns(self, columns: list[Column], widths: list[int], cells: list[list[Text]]) -> None:
        """When not every column fits, cut text columns down to MIN_NAME_WIDTH first: a name
        shortened a little beats a number column left out (the room left goes back to them after)."""
        if self.show_all_columns or self._spare_width(list(range(len(columns))), widths) >= 0:
            return
        for index, column in enumerate(columns):
            if not column.numeric and widths[index] > MIN_NAME_WIDTH and not _answer_in_words(column):
                self._set_text_width(index, MIN_NAME_WIDTH, columns, widths, cells)

    def _cut_answer_to_fit(
        self, kept: list[int], columns: list[Column], widths: list[int], cells: list[list[Text]]
    ) -> None:
        """An answer in words (a straggler's cause) kept whole while other columns went is cut at
        its end to the width left, once nothing else can go."""
        spare = self._spare_width(kept, widths)
        for index in kept:
            if spare >= 0 or self.show_all_columns:
                return
            if _answer_in_words(columns[index]):
                before = widths[index]
                self._set_text_width(index, max(MIN_NAME_WIDTH, before + spare), columns, widths, cells)
                spare += before - widths[index]

    def _widen_text_columns(
        self, kept: list[int], columns: list[Column], widths: list[int], cells: list[list[Text]]
    ) -> None:
        """Text columns cut to their width get the room the kept columns leave free (a wide
        terminal shows longer names), left to right."""
        spare = self._spare_width(kept, widths)
        for index in kept:
            if spare <= 0 or self.show_all_columns:
                break
            if columns[index].numeric:
                continue
            values = self.shown[columns[index].key].to_list()
            longest = max((len(v if isinstance(v, str) else cell_text(v)) for v in values if v is not None), default=0)
            if longest > widths[index]:
                before = widths[index]
                self._set_text_width(index, before + min(spare, longest - before), columns, widths, cells)
                spare -= widths[index] - before

    def _set_text_width(
        self, index: int, width: int, columns: list[Column], widths: list[int], cells: list[list[Text]]
    ) -> None:
        """Shorten a text column's cells to `width` again; its width becomes what they take."""
        column = replace(columns[index], width=width)
        cells[index] = column.cells(self.shown[column.key].to_list())
        label = len(column.label) + 2  # room for the sort arrow
        natural = max([min(label, width), *(c.cell_len for c in cells[index])])
        columns[index] = replace(column, width=natural)
        widths[index] = natural

    def action_toggle_columns(self) -> None:
        self.show_all_columns = not self.show_all_columns
        self._rebuild(keep_cursor=True)

    def hidden_columns(self) -> int:
        """Columns not wholly in sight right of the visible part (→ or l scrolls to them)."""
        visible = self.scrollable_content_region.width
        if visible <= 0:
            return 0
        right = self.scroll_x + visible
        x = 0
        hidden = 0
        for column in self.ordered_columns:
            x += column.get_render_width(self)
            if x > right:
                hidden += 1
        return hidden

    def _on_resize(self, event: events.Resize) -> None:
        super()._on_resize(event)
        if self.columns_spec and self.scrollable_content_region.width != self._fitted_for:
            self._rebuild(keep_cursor=True)
        else:
            self._update_title(self._matching)

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_x(old_value, new_value)
        self._update_title(self._matching)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter shows the row's full name (tables shorten names to fit)."""
        row = self.selected_row()
        names = [c for c in self.columns_spec if not c.numeric]
        if row is None or not names or not self.name_on_enter:
            return
        full = _plain(row[names[0].key])
        self.notify(full, title=names[0].label, timeout=8, markup=False)

    def selected_row(self) -> dict[str, Any] | None:
        """The full (untruncated) values of the highlighted row."""
        if not self.row_count or self.shown.height == 0:
            return None
        index = min(self.cursor_row, self.shown.height - 1)
        return self.shown.row(index, named=True)

    # ---- actions ------------------------------------------------------------------------
    def action_cycle_sort(self) -> None:
        shown = {str(column.key.value) for column in self.ordered_columns}
        sortable = [c.key for c in self.columns_spec if c.sortable and c.key in shown]
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
        names = [c for c in self.columns_spec if not c.numeric] or self.columns_spec
        text = _plain(row[names[0].key])
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied {middle_cut(text, 40)}", timeout=2)

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


TITLE_EDGES = 4
"""Cells of a border title's frame: the rule's ends and a space each side."""


def fitted_title(title: str, note: str, counts: Sequence[str], width: int) -> str:
    """`title · note · counts…` in `width` cells: the note is cut at its end first, then left out,
    so what the table holds and how much of it shows (`showing 200 of 5,000`, `3 more columns (w)`)
    are never cut (issue 38 #5)."""
    head = [title] if title else []
    whole = " · ".join([*head, *([note] if note else []), *counts])
    if len(whole) <= width or not note or width <= 0:
        return whole
    bare = " · ".join([*head, *counts])
    room = width - len(bare) - 3
    if room < 12:
        return bare
    cut = note[: room - 1].rstrip() + "…"
    return " · ".join([*head, cut, *counts])


def _answer_in_words(column: Column) -> bool:
    """A sentence the table exists for: never left out, and cut only when nothing else can go."""
    return column.cut_end and column.priority == 0 and not column.numeric


def _plain(value: Any) -> str:
    return "" if value is None else str(value)
