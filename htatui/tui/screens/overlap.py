"""4 Overlap: how much of each rank's communication time overlaps computation."""

from __future__ import annotations

from typing import ClassVar

import polars as pl
from textual.app import ComposeResult

from htatui.analysis.registry import PageTable
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.chart import Chart, Series, grouped_bars
from htatui.tui.widgets.table_pane import sentence

OVERLAP = PageTable("overlap")

NO_GPU = "No GPU kernels on the chosen ranks (CPU-only and MTIA traces have none), so there is nothing to overlap."


class OverlapScreen(PageScreen):
    PAGE: ClassVar[str] = "overlap"
    PANES: ClassVar[dict[PageTable, Pane]] = {OVERLAP: Pane("Overlap per rank", NO_GPU, sort="rank", descending=False)}
    VIEW_TITLE: ClassVar[str] = "Overlap"
    HELP: ClassVar[str] = (
        "Per rank: the time when a communication kernel and a computation kernel run at once, as "
        "a share of the rank's communication time. Low overlap means the GPU waits for "
        "collectives; a rank without communication kernels shows `–`."
    )

    def compose_body(self) -> ComposeResult:
        yield self.pane(OVERLAP)
        yield Chart("Communication overlapped by computation (%)", id="overlap-chart")

    def draw(self, result: PageResult) -> None:
        output = result.output("overlap")
        frame = output.frame
        chart = self.query_one("#overlap-chart", Chart)
        defined = frame.filter(pl.col("overlap_pct").is_not_null())
        if frame.height == 0:
            chart.show(None, "")
        elif defined.height == 0:
            chart.show(None, sentence(output.message or "no communication kernels on the chosen ranks"))
        else:
            chart.show(
                grouped_bars(
                    [f"r{rank}" for rank in defined["rank"]],
                    [Series("overlap", defined["overlap_pct"].to_list(), "hta-comm")],
                    ylabel="% of communication time",
                )
            )
