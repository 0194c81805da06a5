"""What a rule finds: the problem in one line, where, the numbers and the row that shows them,
the change to make, and the what-if that models it in the step model's replay."""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.diagnosis.change import Change

RowKey = tuple[tuple[str, str | int | float], ...]
"""The values that find a table's row: (("rank", 2),) or (("rank", 0), ("name", "aten::item"))."""


@dataclass(frozen=True)
class Evidence:
    """The page, registered table and row that show a finding's numbers."""

    page: str
    view: str
    """'' on a page drawn from no registered table (Memory)."""
    table: str = "main"
    row: RowKey = ()

    @property
    def table_text(self) -> str:
        """The table as `report` names it: 'stragglers', 'launch --summary' ('' on a page of no table)."""
        if not self.view:
            return ""
        return self.view if self.table == "main" else f"{self.view} --{self.table}"

    @property
    def row_text(self) -> str:
        """The row's key values as a JSON object ('{"rank": 2}'): readable, and parsed back by the app."""
        return json.dumps(dict(self.row), ensure_ascii=False)


@dataclass(frozen=True)
class Finding:
    """One problem a rule found, with the rule's estimate of what a fix saves per step
    (`estimate_us`: the time its change acts on, from the evidence) and the `what_if` that models
    the fix in the step model's replay."""

    rule: str
    what: str
    where: str
    evidence: str
    change: str
    estimate_us: float
    see: Evidence
    rank: int | None = None
    what_if: Change | None = None


FINDING_SPEC = TableColumns(
    ColumnSpec("what", pl.Utf8(), "the finding, in words: what to fix", "id", sentence=True),
    ColumnSpec("saved_pct", pl.Float64(), "saved_us as a share of the step", "key"),
    ColumnSpec("saved_us", pl.Float64(), "step time the step model's replay saves per step with the change", "key"),
    ColumnSpec("estimate_pct", pl.Float64(), "estimate_us as a share of the step", "key"),
    ColumnSpec("estimate_us", pl.Float64(), "the rule's own estimate: the time per step its change acts on"),
    ColumnSpec("what_if", pl.Utf8(), "the replayed change, or why none is modelled", "low", sentence=True),
    ColumnSpec("rule", pl.Utf8(), "the rule that found it (diagnosis rules TOML)", "low"),
    ColumnSpec("where", pl.Utf8(), "ranks, steps, op or stream it is on"),
    ColumnSpec("evidence", pl.Utf8(), "the figures the rule read", "low", sentence=True),
    ColumnSpec("change", pl.Utf8(), "what to change to save the time", "low", sentence=True),
    ColumnSpec("page", pl.Utf8(), "the page that shows the evidence", "low"),
    ColumnSpec("table", pl.Utf8(), "its table", "low"),
    ColumnSpec("row", pl.Utf8(), "the evidence row's key values (JSON)", "low"),
    RANK,
)
FINDING_COLUMNS = FINDING_SPEC.schema
"""The findings table, best first: `saved_us`/`saved_pct` is the step time the step model's replay
saves per step with the change (null: not modelled, `what_if` says so), `estimate_*` the rule's
own estimate from its evidence: the time its change acts on per step (what ranks the findings no
replay models); `page`, `table` and `row` (its key values as a JSON
object) name the row of the evidence."""

NOT_MODELLED = "not modelled"
