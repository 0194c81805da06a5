"""6 Counters: launch-queue length and memory bandwidth over time, and their summaries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis import membw, queue
from htatui.analysis.common import CommonOptions, tables_rank_by_rank
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import Chart, lines, step_points
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import Column, ViewTable
from htatui.tui.widgets.table_pane import TablePane

POINTS = 400
"""A series is reduced to at most this many time buckets (keeping each bucket's peak)."""

QUEUE_COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("stream", "stream", "int", width=6),
    Column("count", "points", "int"),
    Column("mean", "mean", "float"),
    Column("time_weighted_mean", "time-wtd mean", "float"),
    Column("max", "max", "float"),
    Column("p50", "p50", "float"),
    Column("p75", "p75", "float"),
    Column("std", "std", "float"),
    Column("min", "min", "float"),
    Column("p25", "p25", "float"),
    Column("blocked_us", "blocked (µs)", "us"),
    Column("blocked_pct", "blocked %", "pct"),
]

MEMBW_COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("copy_kind", "copy kind", "text", width=14),
    Column("count", "points", "int"),
    Column("mean_gbps", "mean (GB/s)", "float"),
    Column("max_gbps", "max (GB/s)", "float"),
    Column("p50_gbps", "p50 (GB/s)", "float"),
    Column("p75_gbps", "p75 (GB/s)", "float"),
    Column("std_gbps", "std (GB/s)", "float"),
    Column("min_gbps", "min (GB/s)", "float"),
    Column("p25_gbps", "p25 (GB/s)", "float"),
]

NO_QUEUE = "No kernel launches on the chosen ranks, so there is no launch queue to show."
NO_MEMBW = "No memory copies or memsets with a bandwidth on the chosen ranks."


@dataclass(frozen=True)
class CountersResult:
    queue_summary: pl.DataFrame
    """queue.summarize joined with queue.blocked_from_series (blocked_us, blocked_pct)."""
    membw_summary: pl.DataFrame
    """membw.summarize of the bandwidth series."""
    queue_series: pl.DataFrame
    """rank, stream, t_ms (since the rank's first point), value: bucket peaks for the chart."""
    membw_series: pl.DataFrame
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


class CountersScreen(ViewScreen):
    VIEW_TITLE: ClassVar[str] = "Counters"
    HELP: ClassVar[str] = (
        "**Queue length**: per stream, how many launched operations wait to start on the GPU; a "
        "queue that stays near the limit means the CPU runs far ahead (the stream is *blocked*), "
        "one near zero that the GPU starves. **Memory bandwidth**: GB/s in use per copy kind. "
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

    def __init__(self) -> None:
        super().__init__()
        self.options: queue.QueueOptions = queue.QueueOptions()
        self._result: CountersResult | None = None

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("max_queue_length")
        yield TablePane("Launch queue per stream", id="counters-queue")
        yield Chart("Queue length", id="counters-queue-chart")
        yield TablePane("Memory bandwidth per copy kind", id="counters-membw")
        yield Chart("Memory bandwidth", id="counters-membw-chart")

    def analyse(self, traces: TraceSet, common: CommonOptions) -> CountersResult:
        queue_options = self.view_options(common)

        def per_rank(part: TraceSet, options: queue.QueueOptions) -> list[pl.DataFrame]:
            bandwidth = membw.MemoryBandwidthOptions(options.scope)
            return [queue.series(part, options), queue.blocked(part, options), membw.series(part, bandwidth)]

        # Over a dataset, a rank at a time: the view's memory is one rank's, not the job's.
        queue_series, blocked, membw_series = tables_rank_by_rank(traces, queue_options, per_rank)
        queue_summary = queue.with_blocked(queue.summarize(queue_series), blocked)
        return CountersResult(
            queue_summary=queue_summary,
            membw_summary=membw.summarize(membw_series),
            queue_series=reduce_series(queue_series, ["rank", "stream"], "queue_length"),
            membw_series=reduce_series(membw_series, ["rank", "copy_kind"], "memory_bw_gbps"),
        )

    def show_result(self, result: CountersResult) -> None:
        self._result = result
        self.query_one("#counters-queue", TablePane).show(
            result.queue_summary, QUEUE_COLUMNS, empty=NO_QUEUE, sort="rank", descending=False
        )
        self.query_one("#counters-membw", TablePane).show(
            result.membw_summary, MEMBW_COLUMNS, empty=NO_MEMBW, sort="rank", descending=False
        )
        self._plot_queue()
        self._plot_membw()

    @on(ViewTable.RowHighlighted, "#counters-queue ViewTable")
    def _plot_queue(self) -> None:
        chart = self.query_one("#counters-queue-chart", Chart)
        row = self.query_one("#counters-queue", TablePane).table.selected_row()
        if self._result is None or row is None:
            chart.show(None, "")
            return
        rank, stream = row["rank"], row["stream"]
        points = self._result.queue_series.filter((pl.col("rank") == rank) & (pl.col("stream") == stream))
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

    @on(ViewTable.RowHighlighted, "#counters-membw ViewTable")
    def _plot_membw(self) -> None:
        chart = self.query_one("#counters-membw-chart", Chart)
        row = self.query_one("#counters-membw", TablePane).table.selected_row()
        if self._result is None or row is None:
            chart.show(None, "")
            return
        rank, kind = row["rank"], row["copy_kind"]
        points = self._result.membw_series.filter((pl.col("rank") == rank) & (pl.col("copy_kind") == kind))
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
