"""6 Counters: launch-queue length and memory bandwidth over time, their summaries, and CUPTI
range-profiler counters per kernel and per op."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis.core.scope import Scope
from htatui.analysis.registry import PageTable
from htatui.trace import TraceSet
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.chart import Chart, lines, step_points
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import ViewTable
from htatui.tui.widgets.table_pane import TablePane

POINTS = 400
"""A series is reduced to at most this many time buckets (keeping each bucket's peak)."""

QUEUE = PageTable("queue", "overview")
MEMBW = PageTable("membw")
QUEUE_SERIES = PageTable("queue", "series")
MEMBW_SERIES = PageTable("membw", "series")
CUPTI = PageTable("cupti")
CUPTI_BY_OP = PageTable("cupti", "by-op")

NO_QUEUE = "No kernel launches on the chosen ranks, so there is no launch queue to show."
NO_MEMBW = "No memory copies or memsets with a bandwidth on the chosen ranks."
NO_CUPTI = "No CUPTI counters: the trace was not recorded with the CUPTI range profiler."


@dataclass(frozen=True)
class CountersResult(PageResult):
    """The page's tables and the series reduced for the charts (bucket peaks, ms from the rank's first point)."""

    queue_chart: pl.DataFrame = field(default_factory=pl.DataFrame)
    """rank, stream, t_ms, value."""
    membw_chart: pl.DataFrame = field(default_factory=pl.DataFrame)
    """rank, copy_kind, t_ms, value."""


def reduce_series(frame: pl.DataFrame, keys: list[str], value: str, points: int = POINTS) -> pl.DataFrame:
    """Per group, the peak of `value` in each of `points` equal time buckets; time in ms from the
    rank's first point."""
    if frame.height == 0:
        return pl.DataFrame(schema={**{k: frame.schema[k] for k in keys}, "t_ms": pl.Float64(), "value": pl.Float64()})
    start = pl.col("ts_us").min().over("rank")
    span = (pl.col("ts_us").max() - pl.col("ts_us").min()).over(keys)
    bucket = pl.when(span > 0).then(
        ((pl.col("ts_us") - pl.col("ts_us").min().over(keys)) / span * (points - 1)).floor()
    )
    return (
        frame.with_columns(t_ms=(pl.col("ts_us") - start) / 1000.0, _bucket=bucket.fill_null(0))
        .group_by([*keys, "_bucket"])
        .agg(t_ms=pl.col("t_ms").first(), value=pl.col(value).max().cast(pl.Float64))
        .sort([*keys, "t_ms"])
        .drop("_bucket")
    )


class CountersScreen(PageScreen):
    PAGE: ClassVar[str] = "counters"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        QUEUE: Pane("Launch queue per stream", NO_QUEUE, sort="rank", descending=False),
        MEMBW: Pane("Memory bandwidth per copy kind", NO_MEMBW, sort="rank", descending=False),
        CUPTI_BY_OP: Pane("CUPTI counters per op", NO_CUPTI, sort="flop"),
        CUPTI: Pane("CUPTI counters per kernel", NO_CUPTI, sort="flop"),
    }
    VIEW_TITLE: ClassVar[str] = "Counters"
    HELP: ClassVar[str] = (
        "**Queue length**: per stream, how many launched operations wait to start on the GPU; a "
        "queue that stays near the limit means the CPU runs far ahead (the stream is *blocked*), "
        "one near zero that the GPU starves. **Memory bandwidth**: GB/s in use per copy kind. "
        "**CUPTI counters** (traces recorded with the CUPTI range profiler): each counted kernel "
        "with the ops that launched it and its counters; FLOPs from the SASS instruction counts. "
        "Highlight a row to plot that rank's series. `e` writes a trace with these counters added, "
        "to open in Perfetto or chrome://tracing."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "e",
            "app.export_counters",
            "Export",
            tooltip="Write counters-augmented traces",
            id="counters.export",
        ),
    ]

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("queue", "max_queue_length")
        yield self.pane(QUEUE)
        yield Chart("Queue length", id="counters-queue-chart")
        yield self.pane(MEMBW)
        yield Chart("Memory bandwidth", id="counters-membw-chart")
        yield self.pane(CUPTI_BY_OP)
        yield self.pane(CUPTI)

    def analyse(self, traces: TraceSet, scope: Scope) -> CountersResult:
        tables = super().analyse(traces, scope).tables
        # Reduced on the worker: a series can hold millions of points.
        return CountersResult(
            tables,
            queue_chart=reduce_series(tables[QUEUE_SERIES].frame, ["rank", "stream"], "queue_length"),
            membw_chart=reduce_series(tables[MEMBW_SERIES].frame, ["rank", "copy_kind"], "memory_bw_gbps"),
        )

    def draw(self, result: PageResult) -> None:
        self._plot_queue()
        self._plot_membw()

    @on(ViewTable.RowHighlighted, "#queue-overview ViewTable")
    def _plot_queue(self) -> None:
        chart = self.query_one("#counters-queue-chart", Chart)
        row = self.query_one("#queue-overview", TablePane).table.selected_row()
        if not isinstance(self.result, CountersResult) or row is None:
            chart.show(None, "")
            return
        rank, stream = row["rank"], row["stream"]
        points = self.result.queue_chart.filter((pl.col("rank") == rank) & (pl.col("stream") == stream))
        chart.title = f"Queue length · rank {rank} stream {stream}"
        xs, ys = step_points(points["t_ms"].to_list(), points["value"].to_list())
        chart.show(
            lines(
                [(f"stream {stream}", xs, ys, "hta-series-1")],
                xlabel="time (ms)",
                ylabel="queued ops",
            ),
            NO_QUEUE,
        )

    @on(ViewTable.RowHighlighted, "#membw-main ViewTable")
    def _plot_membw(self) -> None:
        chart = self.query_one("#counters-membw-chart", Chart)
        row = self.query_one("#membw-main", TablePane).table.selected_row()
        if not isinstance(self.result, CountersResult) or row is None:
            chart.show(None, "")
            return
        rank, kind = row["rank"], row["copy_kind"]
        points = self.result.membw_chart.filter((pl.col("rank") == rank) & (pl.col("copy_kind") == kind))
        chart.title = f"Memory bandwidth · rank {rank} {kind}"
        xs, ys = step_points(points["t_ms"].to_list(), points["value"].to_list())
        chart.show(
            lines(
                [(kind, xs, ys, "hta-memory")],
                xlabel="time (ms)",
                ylabel="GB/s",
            ),
            NO_MEMBW,
        )
