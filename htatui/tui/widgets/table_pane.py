"""A table with its `/` filter bar and a sentence shown instead when there is nothing to list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from htatui.tui.widgets.filter_bar import FilterBar
from htatui.tui.widgets.table import ROW_LIMIT, Column, ViewTable, auto_columns

if TYPE_CHECKING:
    from htatui.analysis.core.columns import TableColumns
    from htatui.analysis.core.options import NotedTable
    from htatui.tui.screens.page import Pane


def sentence(text: str) -> str:
    """An analysis' lower-case message as a sentence: 'no rows' → 'No rows.'"""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


class TablePane(Vertical):
    """Owns one ViewTable and, once `/` is pressed, its FilterBar; `show()` fills the table or
    replaces it by a sentence."""

    DEFAULT_CSS = """
    TablePane {
        height: 1fr;
        & > .empty-note {
            display: none;
            height: auto;
            padding: 0 1 1 1;
            color: $foreground-muted;
            border-top: solid $panel-lighten-2;
            border-title-color: $foreground-muted;
        }
        &.-empty > .empty-note { display: block; }
        &.-empty > ViewTable { display: none; }
        &.-hidden { display: none; }
    }
    """

    def __init__(
        self,
        title: str,
        *,
        row_limit: int = ROW_LIMIT,
        id: str | None = None,  # noqa: A002 - Textual's name
        name_on_enter: bool = True,
    ) -> None:
        super().__init__(id=id)
        self._title = title
        self._row_limit = row_limit
        self._name_on_enter = name_on_enter

    def compose(self) -> ComposeResult:
        yield Static("", classes="empty-note")
        table = ViewTable(self._title, row_limit=self._row_limit)
        table.name_on_enter = self._name_on_enter
        yield table

    @property
    def table(self) -> ViewTable:
        return self.query_one(ViewTable)

    def show(
        self,
        frame: pl.DataFrame,
        columns: Sequence[Column] | None = None,
        *,
        empty: str = "Nothing to show.",
        sort: str | None = None,
        descending: bool = True,
    ) -> None:
        """Fill the table, or say `empty` in a sentence when `frame` has no rows.

        With no rows and an empty sentence the pane hides (another pane already says why).
        """
        self.set_class(frame.height == 0 and not empty, "-hidden")
        self.set_class(frame.height == 0, "-empty")
        note = self.query_one(".empty-note", Static)
        note.update(empty)
        self.table.set_frame(frame, columns, sort=sort, descending=descending)
        note.border_title = self.table.title

    def show_table(self, output: NotedTable, pane: Pane, declared: TableColumns | None = None) -> None:
        """Show a registered table: every column, labelled and ranked as `declared` (its columns'
        specs); its sentence says why it is empty, or stands in the title beside it."""
        self.table.title = pane.title
        self.table.note = output.message or "" if output.frame.height else ""
        empty = sentence(output.message) if output.message else pane.empty
        if pane.hint and output.frame.height == 0:
            empty = f"{empty} {pane.hint}"
        self.show(
            output.frame,
            auto_columns(output.frame, pane.columns, declared),
            empty=empty,
            sort=pane.sort,
            descending=pane.descending,
        )

    def open_filter(self) -> None:
        if self.has_class("-empty"):
            return
        # The bar is mounted on first use: most tables are never filtered, and an Input costs a
        # page switch ~10 ms of CSS matching.
        bars = self.query_children(FilterBar)
        if bars:
            bars.first().open()
            return
        bar = FilterBar()
        self.mount(bar)
        bar.open()

    @on(FilterBar.FilterChanged)
    def _apply_filter(self, event: FilterBar.FilterChanged) -> None:
        event.stop()
        self.table.set_filter(event.text)

    @on(FilterBar.Closed)
    def _refocus_table(self, event: FilterBar.Closed) -> None:
        event.stop()
        self.table.focus()
