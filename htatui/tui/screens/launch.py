"""5 Launch: CPU launch call → GPU start statistics, outliers beyond cutoffs, histograms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual_plotext.plot import Plot

from htatui.analysis import launch
from htatui.analysis.common import CommonOptions, rank_by_rank
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import Chart
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import Column
from htatui.tui.widgets.table_pane import TablePane

SUMMARY_COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("count", "launches", "int"),
    Column("short_count", "short", "int"),
    Column("runtime_outlier_count", "runtime out", "int"),
    Column("delay_outlier_count", "delay out", "int"),
    Column("cpu_mean_us", "cpu mean (µs)", "us"),
    Column("cpu_p50_us", "cpu p50", "us"),
    Column("cpu_p90_us", "cpu p90", "us"),
    Column("cpu_p99_us", "cpu p99", "us"),
    Column("gpu_mean_us", "gpu mean (µs)", "us"),
    Column("gpu_p50_us", "gpu p50", "us"),
    Column("gpu_p90_us", "gpu p90", "us"),
    Column("gpu_p99_us", "gpu p99", "us"),
    Column("delay_mean_us", "delay mean (µs)", "us"),
    Column("delay_p50_us", "delay p50", "us"),
    Column("delay_p90_us", "delay p90", "us"),
    Column("delay_p99_us", "delay p99", "us"),
]

OUTLIER_COLUMNS = [
    Column("kernel", "kernel", "text", width=30, short_names=True),
    Column("rank", "rank", "int", width=4),
    Column("cpu_duration_us", "cpu (µs)", "us"),
    Column("gpu_duration_us", "gpu (µs)", "us"),
    Column("launch_delay_us", "delay (µs)", "us"),
    Column("correlation", "correlation", "int"),
]

OUTLIER_TITLES = {
    "short": ("Short kernels: gpu < cpu ≤ runtime cutoff", "gpu_duration_us", False),
    "runtime": ("Runtime outliers: cpu > runtime cutoff", "cpu_duration_us", True),
    "delay": ("Launch-delay outliers: delay > delay cutoff", "launch_delay_us", True),
}

METRICS = (
    ("launch_delay_us", "launch delay (µs)"),
    ("cpu_duration_us", "launch call on the CPU (µs)"),
    ("gpu_duration_us", "GPU duration (µs)"),
)

NO_LAUNCHES = "No kernel launches on the chosen ranks (a CPU-only trace, or no launch calls recorded)."


@dataclass(frozen=True)
class LaunchResult:
    summary: pl.DataFrame
    """launch.summarize of the launch frame."""
    outliers: dict[str, pl.DataFrame]
    """launch.select_outliers per kind."""
    histograms: pl.DataFrame
    """launch.histograms_of the launch frame: metric, bin, bin_center_us, count."""


class LaunchScreen(ViewScreen):
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
        self.options: launch.LaunchOptions = launch.LaunchOptions()
        self.metric = 0
        self._result: LaunchResult | None = None

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("runtime_cutoff_us", "launch_delay_cutoff_us")
        yield TablePane("Launch statistics per rank", id="launch-summary")
        for kind in launch.OUTLIER_KINDS:
            yield TablePane(OUTLIER_TITLES[kind][0], id=f"launch-{kind}")
        yield Chart("Histogram", id="launch-histogram")

    def analyse(self, traces: TraceSet, common: CommonOptions) -> LaunchResult:
        options = self.view_options(common)
        frame = rank_by_rank(traces, options, launch.compute)  # over a dataset, one rank in memory at a time
        return LaunchResult(
            summary=launch.summarize(frame, options),
            outliers={kind: launch.select_outliers(frame, options, kind) for kind in launch.OUTLIER_KINDS},
            histograms=launch.histograms_of(frame),
        )

    def show_result(self, result: LaunchResult) -> None:
        self._result = result
        self.query_one("#launch-summary", TablePane).show(result.summary, SUMMARY_COLUMNS, empty=NO_LAUNCHES)
        for kind in launch.OUTLIER_KINDS:
            _title, sort, descending = OUTLIER_TITLES[kind]
            frame = result.outliers[kind]
            empty = "" if result.summary.height == 0 else "None with these cutoffs."
            self.query_one(f"#launch-{kind}", TablePane).show(
                frame, OUTLIER_COLUMNS, empty=empty, sort=sort, descending=descending
            )
        self._draw_histogram()

    def _draw_histogram(self) -> None:
        chart = self.query_one("#launch-histogram", Chart)
        result = self._result
        column, label = METRICS[self.metric]
        chart.title = f"Histogram of {label} · m: next metric"
        bins = None if result is None else result.histograms.filter(pl.col("metric") == column)
        if bins is None or bins.height == 0:
            chart.show(None, "")
            return
        centres, counts = bins["bin_center_us"].to_list(), bins["count"].to_list()

        def draw(chart: Chart, plt: Plot) -> None:
            plt.bar(centres, counts, color=chart.rgb("hta-series-1"), width=0.9)
            plt.xlabel(label)
            plt.ylabel("launches")

        chart.show(draw)

    def action_next_metric(self) -> None:
        self.metric = (self.metric + 1) % len(METRICS)
        self._draw_histogram()
