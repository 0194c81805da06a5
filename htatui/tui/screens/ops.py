"""7 Ops: the operator table (as `prof.key_averages()`), sortable by self GPU time."""

from __future__ import annotations

from typing import ClassVar

import polars as pl
from textual.app import ComposeResult

from htatui.analysis import ops
from htatui.analysis.common import CommonOptions
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import BarRows, Chart, Series
from htatui.tui.widgets.table import Column
from htatui.tui.widgets.table_pane import TablePane

COLUMNS = [
    Column("name", "operator", "text", width=30),
    Column("rank", "rank", "int", width=4),
    Column("count", "calls", "int"),
    Column("gpu_self_us", "gpu self (µs)", "us"),
    Column("gpu_total_us", "gpu total (µs)", "us"),
    Column("cpu_self_us", "cpu self (µs)", "us"),
    Column("cpu_total_us", "cpu total (µs)", "us"),
]

TOP_BARS = 10
NO_OPS = "No CPU operators (cpu_op events) on the chosen ranks; was the profiler's CPU activity recorded?"


class OpsScreen(ViewScreen):
    VIEW_TITLE: ClassVar[str] = "Ops"
    HELP: ClassVar[str] = (
        "Per rank and operator, as `prof.key_averages()` prints it: calls, CPU time with and "
        "without the operators it calls (*self*), and the GPU time of the kernels, copies and "
        "memsets it launched itself (*gpu self*) or through the operators beneath it (*gpu total*). "
        "Sorted by self GPU time; `s` picks another column. The bars show the operators with the "
        "most self GPU time over the chosen ranks."
    )

    def compose_body(self) -> ComposeResult:
        yield TablePane("Operators", id="ops-table", row_limit=300)
        yield Chart(f"Top {TOP_BARS} operators by self GPU time (µs, all chosen ranks)", id="ops-chart")

    def analyse(self, traces: TraceSet, common: CommonOptions) -> pl.DataFrame:
        return ops.compute(traces, ops.OpsOptions(**vars(common)))

    def show_result(self, result: pl.DataFrame) -> None:
        self.query_one("#ops-table", TablePane).show(result, COLUMNS, empty=NO_OPS, sort="gpu_self_us")
        chart = self.query_one("#ops-chart", Chart)
        top = (
            result.group_by("name")
            .agg(pl.col("gpu_self_us").sum())
            .filter(pl.col("gpu_self_us") > 0)
            .sort(["gpu_self_us", "name"], descending=[True, False])
            .head(TOP_BARS)
        )
        if top.height == 0:
            chart.show(None, "" if result.height == 0 else "None of these operators launched GPU work.")
            return
        chart.show(BarRows(top["name"].to_list(), [Series("gpu self", top["gpu_self_us"].to_list(), "hta-compute")]))
