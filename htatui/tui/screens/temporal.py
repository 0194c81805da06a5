"""1 Temporal: idle, compute and non-compute time of each rank's GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis import steps, temporal
from htatui.analysis.common import CommonOptions
from htatui.analysis.stored import summary_rows
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import BarRows, Chart, Series
from htatui.tui.widgets.table import Column
from htatui.tui.widgets.table_pane import TablePane

COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("idle_us", "idle (µs)", "us"),
    Column("compute_us", "compute (µs)", "us"),
    Column("non_compute_us", "non-comp (µs)", "us"),
    Column("idle_pct", "idle %", "pct", priority=0),
    Column("compute_pct", "comp %", "pct"),
    Column("non_compute_pct", "non-comp %", "pct"),
    Column("span_us", "span (µs)", "us", priority=0),
]

STRAGGLER_COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("straggler_score", "late starts", "int"),
    Column("is_straggler", "straggler", "text", width=9),
]

NO_GPU = (
    "No GPU kernels, copies or memsets on the chosen ranks (CPU-only and MTIA traces have none), "
    "so there is no temporal breakdown."
)


@dataclass(frozen=True)
class TemporalResult:
    breakdown: pl.DataFrame
    """temporal.compute as returned."""
    stragglers: steps.StragglerResult | None
    """steps.stragglers: per rank, how often it started the chosen collective last; None when the
    breakdown came from a dataset's summary and the ranks' events are not read yet (`L` reads them)."""


def deferred_stragglers(traces: TraceSet, common: CommonOptions) -> bool:
    """Whether detecting stragglers waits to be asked: it would read ranks that the breakdown did not need."""
    chosen = common.ranks if common.ranks is not None else traces.rank_ids
    answered = summary_rows(traces, temporal.TemporalOptions(common.scope)) is not None
    return answered and not all(traces.ranks[rank].loaded for rank in chosen if rank in traces.ranks)


class TemporalScreen(ViewScreen):
    VIEW_TITLE: ClassVar[str] = "Temporal"
    HELP: ClassVar[str] = (
        "Per rank, over the span from its first to its last GPU activity: **idle** is time with "
        "nothing running on any stream, **compute** the time covered by computation kernels, "
        "**non-compute** the remaining busy time (communication, copies, memsets). The three add "
        "up to the span. A rank with much more idle time than the others is the one to look at. "
        "**Stragglers**: in each step, the ranks that start the most variable collective last; "
        "the others wait for them."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "L",
            "stragglers",
            "Stragglers",
            show=False,
            tooltip="Detect stragglers (reads every rank)",
            id="temporal.late",
        ),
    ]

    def compose_body(self) -> ComposeResult:
        yield TablePane("Time per rank", id="temporal-table")
        yield Chart("Share of the span (%)", id="temporal-chart")
        yield TablePane("Stragglers", id="temporal-stragglers")

    def analyse(self, traces: TraceSet, common: CommonOptions) -> TemporalResult:
        deferred = deferred_stragglers(traces, common)
        return TemporalResult(
            breakdown=temporal.compute(traces, temporal.TemporalOptions(common.scope)),
            stragglers=None if deferred else steps.stragglers(traces, steps.StragglerOptions(common.scope)),
        )

    def action_stragglers(self) -> None:
        """Read the chosen ranks and detect stragglers (the breakdown alone came from the summary)."""
        traces = self.hta.traces
        if traces is None:
            return
        common = CommonOptions(self.hta.scope())
        self.set_state("reading every chosen rank for stragglers… (esc cancels)")
        self.start_job(
            "stragglers", lambda _cancel: steps.stragglers(traces, steps.StragglerOptions(common.scope)), "stragglers"
        )

    def job_done(self, job: str, result: Any) -> None:
        if job == "stragglers":
            self.set_state("")
            self._show_stragglers(result)
            return
        super().job_done(job, result)

    def _show_stragglers(self, found: steps.StragglerResult | None) -> None:
        pane = self.query_one("#temporal-stragglers", TablePane)
        if found is None:
            traces = self.hta.traces
            ranks = len(CommonOptions(self.hta.scope()).ranks or (traces.rank_ids if traces is not None else ()))
            pane.show(
                pl.DataFrame(schema={c.key: pl.Utf8 for c in STRAGGLER_COLUMNS}),
                STRAGGLER_COLUMNS,
                empty=f"The breakdown came from the dataset's summary. Stragglers read every chosen rank's "
                f"events ({ranks} ranks): press L to detect them.",
            )
            return
        stragglers = found.frame.with_columns(
            pl.when(pl.col("is_straggler")).then(pl.lit("▲ yes")).otherwise(pl.lit("no")).alias("is_straggler")
        )
        reason = found.message or "no straggler scores"
        pane.show(
            stragglers,
            STRAGGLER_COLUMNS,
            empty=f"No straggler detection by HTA's method: {reason}. The Ranks view works on every backend.",
            sort="straggler_score",
        )

    def show_result(self, outcome: TemporalResult) -> None:
        result = outcome.breakdown
        self._show_stragglers(outcome.stragglers)
        self.query_one("#temporal-table", TablePane).show(result, COLUMNS, empty=NO_GPU, sort="rank", descending=False)
        chart = self.query_one("#temporal-chart", Chart)
        if result.height == 0:
            chart.show(None, "")
            return
        # One row per rank, as wide as the pane, so a small idle share still shows (and is printed).
        chart.show(
            BarRows(
                [f"r{rank}" for rank in result["rank"]],
                [
                    Series("compute", result["compute_pct"].to_list(), "hta-compute"),
                    Series("non-compute", result["non_compute_pct"].to_list(), "hta-noncompute"),
                    Series("idle", result["idle_pct"].to_list(), "hta-idle"),
                ],
                unit="%",
                notes=[f"idle {value:.1f}%" for value in result["idle_pct"].fill_null(0.0)],
            )
        )
