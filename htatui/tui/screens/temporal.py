"""1 Temporal: idle, compute and non-compute time of each rank's GPU."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult

from htatui.analysis.registry import PageTable
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.chart import BarRows, Chart, Series

BREAKDOWN = PageTable("temporal")

NO_GPU = (
    "No GPU kernels, copies or memsets on the chosen ranks (CPU-only and MTIA traces have none), "
    "so there is no temporal breakdown."
)


class TemporalScreen(PageScreen):
    PAGE: ClassVar[str] = "temporal"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        BREAKDOWN: Pane(
            "Time per rank",
            NO_GPU,
            sort="rank",
            descending=False,
        ),
    }
    VIEW_TITLE: ClassVar[str] = "Temporal"
    HELP: ClassVar[str] = (
        "Per rank, over the span from its first to its last GPU activity in the scope's steps: "
        "**idle** is time with nothing running on any stream, **compute** the time covered by "
        "computation kernels, **non-compute** the remaining busy time (communication, copies, "
        "memsets). The three add up to the span. A straggler is the rank with the *least* idle "
        "time: the others sit idle waiting for it at each collective. The Ranks view (9) says which "
        "rank held the others up, and why."
    )

    def compose_body(self) -> ComposeResult:
        yield self.pane(BREAKDOWN)
        yield Chart("Share of the span (%)", id="temporal-chart")

    def draw(self, result: PageResult) -> None:
        frame = result.frame("temporal")
        chart = self.query_one("#temporal-chart", Chart)
        if frame.height == 0:
            chart.show(None, "")
            return
        # One row per rank, as wide as the pane, so a small idle share still shows (and is printed).
        chart.show(
            BarRows(
                [f"r{rank}" for rank in frame["rank"]],
                [
                    Series("compute", frame["compute_pct"].to_list(), "hta-compute"),
                    Series("non-compute", frame["non_compute_pct"].to_list(), "hta-noncompute"),
                    Series("idle", frame["idle_pct"].to_list(), "hta-idle"),
                ],
                unit="%",
                notes=[f"idle {value:.1f}%" for value in frame["idle_pct"].fill_null(0.0)],
            )
        )
