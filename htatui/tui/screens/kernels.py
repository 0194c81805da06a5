"""3 Kernels: time by kernel type, the top kernels, and the selected kernel across ranks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult

from htatui.analysis import kernels
from htatui.analysis.common import CommonOptions
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import BarRows, Chart, Series, grouped_bars
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import Column, ViewTable, short_kernel_name
from htatui.tui.widgets.table_pane import TablePane

TYPE_SHORT = {"COMPUTATION": "comp", "COMMUNICATION": "comm", "MEMORY": "mem"}

KERNEL_COLUMNS = [
    Column("name", "kernel", "text", width=32, short_names=True),
    Column("rank", "rank", "int", width=4),
    Column("type", "type", "text", width=4),
    Column("count", "count", "int"),
    Column("sum_us", "total (µs)", "us"),
    Column("mean_us", "mean (µs)", "us"),
    Column("min_us", "min (µs)", "us"),
    Column("max_us", "max (µs)", "us"),
    Column("std_us", "std (µs)", "us"),
]

SPREAD_COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("mean_us", "mean (µs)", "us"),
    Column("min_us", "min (µs)", "us"),
    Column("max_us", "max (µs)", "us"),
]

TYPE_COLUMNS = [
    Column("rank", "rank", "text", width=4),
    Column("kernel_type", "state", "text", width=40),
    Column("duration_us", "time (µs)", "us"),
    Column("pct", "%", "pct"),
]

NO_KERNELS = "No GPU kernels, copies or memsets on the chosen ranks (CPU-only and MTIA traces have none)."


def short_type(label: str) -> str:
    """'COMPUTATION overlapping COMMUNICATION' → 'comp+comm'."""
    return "+".join(TYPE_SHORT.get(part, part.lower()) for part in label.split(" overlapping "))


@dataclass(frozen=True)
class KernelsResult:
    types: pl.DataFrame
    """kernels.compute_types: rank ('all' first), kernel_type state, duration_us, pct."""
    top: pl.DataFrame
    """kernels.compute with the chosen top-k and duration ratio."""
    spread: pl.DataFrame
    """kernels.spread over every kernel: name, kernel_type, rank, mean/min/max µs."""


class KernelsScreen(ViewScreen):
    VIEW_TITLE: ClassVar[str] = "Kernels"
    HELP: ClassVar[str] = (
        "The bars give the share of GPU time in each kernel-type state over the chosen ranks "
        "(computation, communication, memory, and the times they overlap). The table lists each "
        "rank's kernels with launch count and duration statistics; per rank and type only the "
        "**top-k** kernels are named and the tail beyond the **duration ratio** of the cumulative "
        "time is folded into `others` (HTA's rule). Highlight a kernel to see its mean, min and "
        "max duration on every rank below."
    )

    def __init__(self) -> None:
        super().__init__()
        self.options: kernels.KernelsOptions = kernels.KernelsOptions()
        self._result: KernelsResult | None = None

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("top_k", "duration_ratio")
        yield TablePane("Top kernels", id="kernels-table", row_limit=500)
        yield TablePane("Selected kernel across ranks", id="kernels-spread")
        yield Chart("Selected kernel across ranks", id="kernels-spread-chart")
        yield Chart("GPU time by kernel type (%)", id="kernels-types-chart")
        yield TablePane("Kernel-type states", id="kernels-types")

    def analyse(self, traces: TraceSet, common: CommonOptions) -> KernelsResult:
        return KernelsResult(
            types=kernels.compute_types(traces, kernels.KernelTypesOptions(common.scope)),
            top=kernels.compute(traces, self.view_options(common)),
            spread=kernels.spread(traces, kernels.KernelSpreadOptions(common.scope, top_k=None)),
        )

    def show_result(self, result: KernelsResult) -> None:
        self._result = result
        top = result.top.with_columns(type=pl.col("kernel_type").replace(TYPE_SHORT))
        self.query_one("#kernels-table", TablePane).show(top, KERNEL_COLUMNS, empty=NO_KERNELS, sort="sum_us")
        self.query_one("#kernels-types", TablePane).show(result.types, TYPE_COLUMNS, empty="")
        overall = result.types.filter(pl.col("rank") == kernels.ALL_RANKS)
        chart = self.query_one("#kernels-types-chart", Chart)
        if overall.height == 0:
            chart.show(None, "")
        else:
            ordered = overall.sort("pct", descending=True)
            chart.show(
                BarRows(
                    [short_type(label) for label in ordered["kernel_type"]],
                    [Series("% of kernel time", ordered["pct"].to_list(), "hta-compute")],
                    unit="%",
                )
            )
        self._show_spread()

    @on(ViewTable.RowHighlighted, "#kernels-table ViewTable")
    @on(ViewTable.Changed, "#kernels-table ViewTable")
    def _kernel_highlighted(self) -> None:
        """The pane follows the highlighted kernel, also when a filter or sort changes the rows."""
        self._show_spread()

    def _show_spread(self) -> None:
        result = self._result
        pane = self.query_one("#kernels-spread", TablePane)
        chart = self.query_one("#kernels-spread-chart", Chart)
        row = self.query_one("#kernels-table", TablePane).table.selected_row()
        if result is None or row is None:
            hint = "Highlight a kernel above." if result is not None and result.top.height else ""
            pane.show(pl.DataFrame(schema=kernels.SPREAD_SCHEMA), SPREAD_COLUMNS, empty=hint)
            chart.show(None, "")
            return
        name = row["name"]
        if name == kernels.OTHERS:
            message = "'others' folds many kernels together; highlight a named kernel to see it across ranks."
            pane.show(pl.DataFrame(schema=kernels.SPREAD_SCHEMA), SPREAD_COLUMNS, empty=message)
            chart.show(None, "")
            return
        rows = result.spread.filter((pl.col("name") == name) & (pl.col("kernel_type") == row["kernel_type"]))
        pane.table.title = f"{short_kernel_name(name)} across ranks"
        pane.show(
            rows,
            SPREAD_COLUMNS,
            empty="This kernel has no per-rank statistics.",
            sort="rank",
            descending=False,
        )
        if rows.height == 0:
            chart.show(None, "")
            return
        chart.show(
            grouped_bars(
                [f"r{rank}" for rank in rows["rank"]],
                [
                    Series("min", rows["min_us"].to_list(), "hta-series-4"),
                    Series("mean", rows["mean_us"].to_list(), "hta-series-1"),
                    Series("max", rows["max_us"].to_list(), "hta-series-2"),
                ],
                ylabel="duration (µs)",
            )
        )
