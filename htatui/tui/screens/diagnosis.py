"""Diagnosis: what to fix first, the page the app opens on.

The step the findings are shares of and what bounds it (`report --view diagnosis --summary`), then
the findings ranked by the step time each fix would save (`report --view diagnosis`); the
highlighted finding's where, evidence and change below; enter goes to the page and row that show
its evidence.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from htatui.analysis.registry import PAGE_BY_ID, PageTable
from htatui.text.numbers import cell_text
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.table import ColumnHint, ViewTable

SUMMARY = PageTable("diagnosis", "summary")
FINDINGS = PageTable("diagnosis")

FINDING_COLUMNS = {
    "what": ColumnHint(width=56, cut_end=True, priority=0),
    "rule": ColumnHint(width=13, cut_end=True, priority=3),
    "saved_pct": ColumnHint(priority=0),
    "at_most_pct": ColumnHint(priority=0),
    **{name: ColumnHint(priority=3) for name in ("saved_us", "at_most_us", "what_if", "rank")},
    **{name: ColumnHint(width=30, cut_end=True, priority=4) for name in ("where", "evidence", "change")},
    **{name: ColumnHint(width=16, cut_end=True, priority=5) for name in ("page", "table", "row")},
}


def step_line(summary: pl.DataFrame) -> str:
    """'step 16,115.47 µs · ranks 4 · steps 10-13 · GPU busy 92.1 % · bound by: not modelled'."""
    if summary.height == 0:
        return ""
    row = summary.row(0, named=True)
    parts = [f"step {cell_text(row['step_us'])} µs", f"ranks {row['ranks']}"]
    if row["steps"]:
        parts.append(f"steps {row['steps']}")
    if row["gpu_busy_pct"] is not None:
        parts.append(f"GPU busy {cell_text(row['gpu_busy_pct'])} %")
    parts.append(f"bound by: {row['bound_by']}")
    return " · ".join(parts)


def finding_text(row: dict[str, Any]) -> str:
    """The highlighted finding in full: what, where, evidence, the change, its saving and where to see it."""
    if row["saved_us"] is not None:
        saving = f"saves {cell_text(row['saved_us'])} µs a step ({cell_text(row['saved_pct'])} %): {row['what_if']}"
    else:
        at_most = f"{cell_text(row['at_most_us'])} µs a step ({cell_text(row['at_most_pct'])} %)"
        saving = f"{row['what_if']}; at most {at_most}"
    page = PAGE_BY_ID[row["page"]].title if row["page"] in PAGE_BY_ID else row["page"]
    shown = f"{page} › {row['table']}" if row["table"] else page
    return "\n".join(
        [
            f"[b]{row['what']}[/b]",
            f"where: {row['where']}",
            f"evidence: {row['evidence']}",
            f"change: {row['change']}",
            f"saving: {saving}",
            f"enter: {shown} {row['row']}",
        ]
    )


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
        "comes after the others, by the most its change could save (*at most*, the time it acts on). "
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
