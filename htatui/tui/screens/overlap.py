"""4 Overlap: how much of each rank's communication time overlaps computation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from textual.app import ComposeResult

from htatui.analysis import overlap, ranks
from htatui.analysis.common import CommonOptions
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import Chart, Series, grouped_bars
from htatui.tui.widgets.table import Column
from htatui.tui.widgets.table_pane import TablePane

COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("overlap_pct", "comm overlapped by compute (%)", "pct"),
]

NO_GPU = "No GPU kernels on the chosen ranks (CPU-only and MTIA traces have none), so there is nothing to overlap."
NO_COMM = "No communication kernels on the chosen ranks: overlap is undefined (a single-GPU job?)."
CPU_COLLECTIVES = (
    "No communication kernels on the chosen ranks: the collectives run on the CPU (gloo:/c10d ops), "
    "so there is no GPU communication to overlap. The Ranks view shows their cost and waits."
)


@dataclass(frozen=True)
class OverlapResult:
    frame: pl.DataFrame
    """overlap.compute as returned."""
    cpu_collectives: bool
    """Whether the ranks run collectives as CPU ops (gloo), which explains no communication kernels."""


class OverlapScreen(ViewScreen):
    VIEW_TITLE: ClassVar[str] = "Overlap"
    HELP: ClassVar[str] = (
        "Per rank: the time when a communication kernel and a computation kernel run at once, as "
        "a share of the rank's communication time. Low overlap means the GPU waits for "
        "collectives; a rank without communication kernels shows `–`."
    )

    def compose_body(self) -> ComposeResult:
        yield TablePane("Overlap per rank", id="overlap-table")
        yield Chart("Communication overlapped by computation (%)", id="overlap-chart")

    def analyse(self, traces: TraceSet, common: CommonOptions) -> OverlapResult:
        frame = overlap.compute(traces, overlap.OverlapOptions(common.scope))
        no_comm = frame.height > 0 and frame["overlap_pct"].null_count() == frame.height
        return OverlapResult(frame, no_comm and ranks.has_cpu_collectives(traces, common))

    def show_result(self, outcome: OverlapResult) -> None:
        result = outcome.frame
        self.query_one("#overlap-table", TablePane).show(result, COLUMNS, empty=NO_GPU, sort="rank", descending=False)
        chart = self.query_one("#overlap-chart", Chart)
        defined = result.filter(pl.col("overlap_pct").is_not_null())
        if result.height == 0:
            chart.show(None, "")
        elif defined.height == 0:
            chart.show(None, CPU_COLLECTIVES if outcome.cpu_collectives else NO_COMM)
        else:
            chart.show(
                grouped_bars(
                    [f"r{rank}" for rank in defined["rank"]],
                    [Series("overlap", defined["overlap_pct"].to_list(), "hta-comm")],
                    ylabel="% of communication time",
                )
            )
