"""5 Launch: CPU launch call → GPU start statistics, outliers beyond cutoffs, histograms."""

from __future__ import annotations

from typing import ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual_plotext.plot import Plot

from htatui.analysis.registry import PageTable
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.chart import Chart, tick_labels
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import ColumnHint

SUMMARY = PageTable("launch", "summary")
OUTLIER_COLUMNS = {"kernel": ColumnHint(width=30, short_names=True)}
OUTLIERS = {
    PageTable("launch", "short-kernels"): Pane(
        "Short kernels: gpu < cpu ≤ runtime cutoff",
        "None with these cutoffs.",
        sort="gpu_duration_us",
        descending=False,
        columns=OUTLIER_COLUMNS,
    ),
    PageTable("launch", "runtime-outliers"): Pane(
        "Runtime outliers: cpu > runtime cutoff", "None with these cutoffs.", "cpu_duration_us", columns=OUTLIER_COLUMNS
    ),
    PageTable("launch", "delay-outliers"): Pane(
        "Launch-delay outliers: delay > delay cutoff",
        "None with these cutoffs.",
        "launch_delay_us",
        columns=OUTLIER_COLUMNS,
    ),
}

METRICS = (
    ("launch_delay_us", "launch delay (µs)"),
    ("cpu_duration_us", "launch call on the CPU (µs)"),
    ("gpu_duration_us", "GPU duration (µs)"),
)

NO_LAUNCHES = "No kernel launches on the chosen ranks (a CPU-only trace, or no launch calls recorded)."


class LaunchScreen(PageScreen):
    PAGE: ClassVar[str] = "launch"
    PANES: ClassVar[dict[PageTable, Pane]] = {SUMMARY: Pane("Launch statistics per rank", NO_LAUNCHES), **OUTLIERS}
    VIEW_TITLE: ClassVar[str] = "Launch"
    HELP: ClassVar[str] = (
        "One row per kernel launch: how long the launch call ran on the CPU, how long the work "
        "ran on the GPU, and the **launch delay** from the end of the call to the start of the "
        "work. *Short kernels* ran shorter on the GPU than their launch took on the CPU (batch "
        "them, or use CUDA graphs); *runtime outliers* are launch calls longer than the runtime "
        "cutoff; *launch-delay outliers* waited longer than the delay cutoff. `m` picks the metric "
        "the histogram shows."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "next_metric", "Histogram", tooltip="Show the next metric's histogram", id="launch.metric"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.metric = 0

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("launch", "runtime_cutoff_us", "launch_delay_cutoff_us")
        yield self.pane(SUMMARY)
        for table in OUTLIERS:
            yield self.pane(table)
        yield Chart("Histogram", id="launch-histogram")

    def draw(self, result: PageResult) -> None:
        self._draw_histogram()

    def _draw_histogram(self) -> None:
        chart = self.query_one("#launch-histogram", Chart)
        result = self.result
        column, label = METRICS[self.metric]
        chart.title = f"Histogram of {label} · m: next metric"
        bins = None if result is None else result.frame("launch", "histograms").filter(pl.col("metric") == column)
        if bins is None or bins.height == 0:
            chart.show(None, "")
            return
        centres, counts = bins["bin_center_us"].to_list(), bins["count"].to_list()

        ticks, tick_text = tick_labels(centres)

        def draw(chart: Chart, plt: Plot) -> None:
            plt.bar(centres, counts, color=chart.rgb("hta-series-1"), width=0.9)
            plt.xticks(ticks, tick_text)
            plt.xlabel(label)
            plt.ylabel("launches")

        chart.show(draw)

    def action_next_metric(self) -> None:
        self.metric = (self.metric + 1) % len(METRICS)
        self._draw_histogram()
        # The histogram sits below the tables: bring it into sight, or m would seem to do nothing.
        chart = self.query_one("#launch-histogram", Chart)
        chart.focus(scroll_visible=False)
        chart.scroll_visible(animate=False, top=True)
