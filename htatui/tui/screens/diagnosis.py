"""Diagnosis: what to fix first, the page the app opens on.

The step the findings are shares of and what bounds it (`report --view diagnosis --summary`), then
the findings ranked by the step time each fix would save (`report --view diagnosis`); the
highlighted finding's where, evidence and change below; enter goes to the page and row that show
its evidence.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from htatui.analysis.registry import PAGE_BY_ID, PageTable
from htatui.text.diagnosis import finding_lines, step_line
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.table import ColumnHint, ViewTable

SUMMARY = PageTable("diagnosis", "summary")
FINDINGS = PageTable("diagnosis")

FINDING_COLUMNS = {
    "what": ColumnHint(width=56, cut_end=True, priority=0),
    "rule": ColumnHint(width=13, cut_end=True, priority=3),
    "saved_pct": ColumnHint(priority=0),
    "estimate_pct": ColumnHint(priority=0),
    **{name: ColumnHint(priority=3) for name in ("saved_us", "estimate_us", "rank")},
    "what_if": ColumnHint(width=28, cut_end=True, priority=3),
    **{name: ColumnHint(width=30, cut_end=True, priority=4) for name in ("where", "evidence", "change")},
    **{name: ColumnHint(width=16, cut_end=True, priority=5) for name in ("page", "table", "row")},
}


def finding_text(row: dict[str, Any]) -> str:
    """The highlighted finding in full (markup): what in bold, then `finding_lines`."""
    page = PAGE_BY_ID[row["page"]].title if row["page"] in PAGE_BY_ID else str(row["page"])
    lines = finding_lines(row, page)
    lines[-1] = lines[-1].replace("see:", "enter:", 1)
    return "\n".join([f"[b]{escape(str(row['what']))}[/b]", *(escape(line) for line in lines)])


class DiagnosisScreen(PageScreen):
    PAGE: ClassVar[str] = "diagnosis"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        FINDINGS: Pane(
            "What to fix first",
            "Nothing found: no rule's threshold is crossed in the chosen steps.",
            columns=FINDING_COLUMNS,
            hint="The thresholds are in rules.toml (--diagnosis-rules adds your own).",
        ),
    }
    VIEW_TITLE: ClassVar[str] = "Diagnosis"
    HELP: ClassVar[str] = (
        "What to fix first. The top line is the step the findings are shares of: its mean time over "
        "the chosen ranks and steps and what bounds it (the step model's summary). Each finding is one "
        "rule's: **what** is wrong, **where** (rank, steps, op, kernel or phase), the **evidence** and "
        "the page and row that show it, the **change** to make, and the step time it would save, from "
        "a what-if replay of the step model; a finding that no replay models says *not modelled* and "
        "comes after the others, by the rule's own *estimate* (the time its change acts on). "
        "Enter on a finding opens its evidence's page at its row. Rules and thresholds: "
        "docs/diagnosis/; headless: `htatui diagnose PATH`."
    )

    def compose_body(self) -> ComposeResult:
        yield Static("", id="diagnosis-step")
        # Enter opens the evidence: no name toast over it.
        yield self.pane(FINDINGS, name_on_enter=False)
        yield Static("", id="diagnosis-detail")

    def draw(self, result: PageResult) -> None:
        summary = result.output(*_parts(SUMMARY))
        line = step_line(summary.frame) or (summary.message or "")
        self.query_one("#diagnosis-step", Static).update(line)
        self._show_detail()

    def _table(self) -> ViewTable:
        return self.query_one("#diagnosis-main ViewTable", ViewTable)

    def _show_detail(self) -> None:
        row = self._table().selected_row()
        self.query_one("#diagnosis-detail", Static).update(finding_text(row) if row is not None else "")

    @on(ViewTable.RowHighlighted, "#diagnosis-main ViewTable")
    def _highlighted(self, event: ViewTable.RowHighlighted) -> None:
        self._show_detail()

    @on(ViewTable.Changed, "#diagnosis-main ViewTable")
    def _changed(self, event: ViewTable.Changed) -> None:
        self._show_detail()

    @on(DataTable.RowSelected, "#diagnosis-main ViewTable")
    async def _open_evidence(self, event: DataTable.RowSelected) -> None:
        """Enter: the page and row that show the highlighted finding's evidence."""
        row = self._table().selected_row()
        if row is None:
            return
        table = None
        if row["table"]:
            view, _, name = str(row["table"]).partition(" --")
            table = PageTable(view, name or "main")
        await self.hta.show_evidence(str(row["page"]), table, json.loads(row["row"] or "{}"))


def _parts(table: PageTable) -> tuple[str, str]:
    return table.view, table.table
