"""What a rule finds: the problem in one line, where, the numbers and the row that shows them,
the change to make, and the what-if that models it in the step model's replay."""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

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


FINDING_COLUMNS: dict[str, pl.DataType] = {
    "what": pl.Utf8(),
    "saved_pct": pl.Float64(),
    "saved_us": pl.Float64(),
    "estimate_pct": pl.Float64(),
    "estimate_us": pl.Float64(),
    "what_if": pl.Utf8(),
    "rule": pl.Utf8(),
    "where": pl.Utf8(),
    "evidence": pl.Utf8(),
    "change": pl.Utf8(),
    "page": pl.Utf8(),
    "table": pl.Utf8(),
    "row": pl.Utf8(),
    "rank": pl.Int32(),
}
"""The findings table, best first: `saved_us`/`saved_pct` is the step time the step model's replay
saves per step with the change (null: not modelled, `what_if` says so), `estimate_*` the rule's
own estimate from its evidence: the time its change acts on per step (what ranks the findings no
replay models); `page`, `table` and `row` (its key values as a JSON
object) name the row of the evidence."""

NOT_MODELLED = "not modelled"
