"""PageScreen: a registry page (`analysis/registry.py` PAGES) drawn from registered tables only.

Each table is made as `report` makes it, for the app's scope and the page's knob values
(`make_page_tables`), and shown with every column, labelled from its name, numbers written as
`report` writes them (`htatui/text/numbers.py`); charts are drawn from the same tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl
from textual import on

from htatui.analysis.core.knobs import knobs_of
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.scope import Scope
from htatui.analysis.registry import PageTable, make_page_tables, page, view
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.options import Kind as OptionKind
from htatui.tui.widgets.options import OptionField
from htatui.tui.widgets.table import ROW_LIMIT, ColumnHint
from htatui.tui.widgets.table_pane import TablePane


@dataclass(frozen=True)
class PageResult:
    """A page's registered tables as `report` makes them for the page's scope and knobs."""

    tables: dict[PageTable, NotedTable]
    scope: Scope | None = None
    """The scope the tables were made for (a page may narrow the app's: Critical path's one step)."""

    def output(self, view: str, table: str = "main") -> NotedTable:
        return self.tables[PageTable(view, table)]

    def frame(self, view: str, table: str = "main") -> pl.DataFrame:
        return self.output(view, table).frame


@dataclass(frozen=True)
class Pane:
    """How a screen shows one of its page's tables: title, the sentence when it is empty, the
    initial sort, and display hints per column (the columns and values are the table's own)."""

    title: str
    empty: str = "Nothing to show."
    sort: str | None = None
    descending: bool = True
    columns: Mapping[str, ColumnHint] = field(default_factory=dict)
    row_limit: int = ROW_LIMIT
    hint: str = ""
    """What the user can do about an empty table, after the table's own sentence."""


def pane_id(table: PageTable) -> str:
    """The id of the pane that shows a page table: 'launch-short-kernels', 'temporal-main'."""
    return f"{table.view}-{table.table}"


class PageScreen(ViewScreen["PageResult"]):
    """A page: its registered tables, its knobs and its analysis worker; follows the app's scope."""

    PAGE: ClassVar[str] = ""
    """The registry page this screen shows (`analysis/registry.py` PAGES)."""
    PANES: ClassVar[dict[PageTable, Pane]] = {}
    """How each table of the page is shown; a table without a pane feeds a chart only."""
    KNOBS: ClassVar[dict[str, dict[str, Any]]] = {}
    """Knob values the page uses instead of the view's defaults, by view id (`report` takes the
    same as flags; the page says so in its help)."""

    def __init__(self) -> None:
        super().__init__()
        self.page = page(self.PAGE)
        self.view_options: dict[str, CommonOptions] = {
            view_id: view(view_id).options(**self.KNOBS.get(view_id, {})) for view_id in self.page.views
        }
        self.result: PageResult | None = None
        self._wanted_row: tuple[PageTable, Mapping[str, object]] | None = None
        """A row to highlight once its table shows (`highlight_row` before the result came)."""

    # ---- what to compute ----------------------------------------------------------------
    def options_of(self, view_id: str) -> Any:
        """The page's options of one view (its knob values; the scope is set when it runs)."""
        return self.view_options[view_id]

    def option_values(self) -> Hashable:
        """The page's knob values; a change means the tables must be made again."""
        return tuple(sorted(self.view_options.items()))

    def option_fields(self, view_id: str, *names: str) -> list[OptionField]:
        """Inputs for these knob fields of a view's options, labelled and bounded as the knobs say."""
        options = self.view_options[view_id]
        specs = knobs_of(options)
        fields = []
        for name in names:
            spec = specs[name]
            kind: OptionKind = "int" if spec.kind == "int" else "float" if spec.kind == "float" else "text"
            value = getattr(options, name)
            fields.append(
                OptionField(
                    name,
                    spec.label,
                    "" if value is None else value,
                    kind=kind,
                    minimum=spec.minimum,
                    maximum=spec.maximum,
                    wide=kind == "text",
                )
            )
        return fields

    def set_knob(self, name: str, value: Any) -> None:
        """Set a knob on every view of the page that has it (the Counters page's views share theirs)."""
        for view_id, options in self.view_options.items():
            if name in {f.name for f in dataclasses.fields(options)}:
                self.view_options[view_id] = dataclasses.replace(options, **{name: value})

    def analyse(self, traces: TraceSet, scope: Scope) -> PageResult:
        """The page's tables for `scope` (on a worker thread, so no widget access here)."""
        options = {view_id: dataclasses.replace(o, scope=scope) for view_id, o in self.view_options.items()}
        return PageResult(make_page_tables(traces, self.page.tables, options), scope)

    def show_result(self, result: PageResult) -> None:
        """Fill each table's pane, then `draw` what else the page shows (main thread)."""
        self.result = result
        for table in self.PANES:
            self.show_table(table)
        self.draw(result)
        if self._wanted_row is not None:
            self.call_after_refresh(self._highlight_wanted)

    def highlight_row(self, table: PageTable, row: Mapping[str, object]) -> None:
        """Focus `table` at the row whose columns hold `row`'s values (now, or when the page's
        result shows); a row the pane does not show is said in a notification."""
        self._wanted_row = (table, row)
        if self.result is not None and not self.analysis_running:
            self.call_after_refresh(self._highlight_wanted)

    def table_drawn_as(self, table: PageTable) -> str:
        """Where a page table without a pane shows (`highlight_row` says so)."""
        return "in this page's chart"

    def _highlight_wanted(self) -> None:
        if self._wanted_row is None or self.result is None:
            return
        table, row = self._wanted_row
        self._wanted_row = None
        if table not in self.PANES:
            # A table drawn as a chart (the Ranks page's heat map): say which cell to look at.
            where = ", ".join(f"{key} {value}" for key, value in row.items())
            self.notify(f"{where}: {self.table_drawn_as(table)}", title=str(table))
            return
        pane = self.query_one(f"#{pane_id(table)}", TablePane)
        view_table = pane.table
        if view_table.filter_text:
            view_table.set_filter("")
        shown = view_table.shown
        matches = pl.lit(True)
        for column, value in row.items():
            if column not in shown.columns:
                self.notify(f"{table}: no column {column}", severity="warning")
                return
            matches = matches & (pl.col(column).cast(pl.Utf8) == str(value))
        found = shown.with_row_index("_at").filter(matches)["_at"]
        if found.len() == 0:
            where = ", ".join(f"{key} {value}" for key, value in row.items())
            self.notify(f"{where}: not among the rows shown here", severity="warning")
            return
        view_table.focus()
        view_table.move_cursor(row=int(found[0]), animate=False)
        pane.scroll_visible()

    def show_table(self, table: PageTable) -> None:
        """(Re)fill one table's pane from the last result."""
        if self.result is not None:
            declared = view(table.view).table(table.table).columns
            pane = self.query_one(f"#{pane_id(table)}", TablePane)
            pane.show_table(self.result.tables[table], self.pane_spec(table), declared)

    def pane_spec(self, table: PageTable) -> Pane:
        """How the table is shown now (a screen with a display toggle gives other hints)."""
        return self.PANES[table]

    def draw(self, result: PageResult) -> None:
        """Charts and other widgets drawn from the page's tables."""

    def pane(self, table: PageTable, *, name_on_enter: bool = True) -> TablePane:
        """The pane a PANES table is shown in, for compose_body (name_on_enter: see ViewTable)."""
        spec = self.PANES[table]
        return TablePane(spec.title, row_limit=spec.row_limit, id=pane_id(table), name_on_enter=name_on_enter)

    @on(OptionField.Applied)
    def _option_applied(self, event: OptionField.Applied) -> None:
        event.stop()
        self.set_knob(event.name, event.value)
        self.set_focus(None)
        self.request_analysis()
