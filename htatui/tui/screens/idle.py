"""2 Idle: GPU idle time per rank and stream, split into host wait, kernel wait and other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis import idle
from htatui.analysis.common import CommonOptions, tables_rank_by_rank
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import BarRows, Chart, Series
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import Column
from htatui.tui.widgets.table_pane import TablePane

CATEGORY_COLORS = {
    idle.HOST_WAIT: "hta-host-wait",
    idle.KERNEL_WAIT: "hta-kernel-wait",
    idle.OTHER: "hta-idle",
}
CATEGORY_LABELS = {idle.HOST_WAIT: "host wait", idle.KERNEL_WAIT: "kernel wait", idle.OTHER: "other"}

STATS_COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("stream", "stream", "int", width=6),
    Column("category", "category", "text", width=11),
    Column("count", "gaps", "int"),
    Column("mean_us", "mean (µs)", "us"),
    Column("std_us", "std (µs)", "us"),
    Column("min_us", "min (µs)", "us"),
    Column("p25_us", "p25 (µs)", "us"),
    Column("p50_us", "p50 (µs)", "us"),
    Column("p75_us", "p75 (µs)", "us"),
    Column("max_us", "max (µs)", "us"),
]

NO_IDLE = "No GPU idle time found on the chosen ranks (no GPU activity, or streams that never wait)."


@dataclass(frozen=True)
class IdleResult:
    breakdown: pl.DataFrame
    """idle.compute as returned: rank, stream, category, idle_us, idle_pct."""
    stats: pl.DataFrame
    """idle.interval_stats as returned."""


class IdleScreen(ViewScreen):
    VIEW_TITLE: ClassVar[str] = "Idle"
    HELP: ClassVar[str] = (
        "For every stream, each gap before a GPU operation is **host wait** when the operation's "
        "launch call started after the stream had gone empty (the CPU was too slow), **kernel "
        "wait** when the gap is shorter than the consecutive kernel delay (launch overhead between "
        "back-to-back kernels), and **other** otherwise. `a` switches the table and bars between "
        "shares of the stream's idle time and absolute µs."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "a",
            "toggle_absolute",
            "%/µs",
            tooltip="Show shares (%) or absolute time (µs)",
            id="idle.absolute",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.absolute = False
        self.options: idle.IdleOptions = idle.IdleOptions()
        self._result: IdleResult | None = None

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("consecutive_kernel_delay_us")
        yield TablePane("Idle time per stream", id="idle-table")
        yield Chart("Idle time per stream", id="idle-chart")
        yield TablePane("Idle intervals", id="idle-stats")

    def analyse(self, traces: TraceSet, common: CommonOptions) -> IdleResult:
        options = self.view_options(common)
        # Over a dataset, a rank at a time: the view's memory is one rank's, not the job's.
        breakdown, stats = tables_rank_by_rank(
            traces, options, lambda part, opts: [idle.compute(part, opts), idle.interval_stats(part, opts)]
        )
        return IdleResult(breakdown, stats)

    def show_result(self, result: IdleResult) -> None:
        self._result = result
        self._draw()

    def _draw(self) -> None:
        result = self._result
        if result is None:
            return
        wide = idle.widen(result.breakdown)
        suffix, fmt, unit = ("_us", "us", "µs") if self.absolute else ("_pct", "pct", "%")
        columns = [
            Column("rank", "rank", "int", width=4),
            Column("stream", "stream", "int", width=6),
            *(Column(f"{c}{suffix}", f"{CATEGORY_LABELS[c]} ({unit})", fmt) for c in idle.CATEGORIES),
            Column("total_us", "idle (µs)", "us"),
        ]
        self.query_one("#idle-table", TablePane).show(wide, columns, empty=NO_IDLE)
        stats = result.stats.with_columns(pl.col("category").replace(CATEGORY_LABELS))
        self.query_one("#idle-stats", TablePane).show(stats, STATS_COLUMNS, empty="")
        chart = self.query_one("#idle-chart", Chart)
        if wide.height == 0:
            chart.show(None, "")
            return
        # One row per stream, most idle first: 32 streams stay readable, and in % mode each row
        # shows its own mix with its idle time printed beside it.
        ordered = wide.sort(["total_us", "rank", "stream"], descending=[True, False, False])
        chart.show(
            BarRows(
                [f"r{r} s{s}" for r, s in zip(ordered["rank"], ordered["stream"], strict=True)],
                [
                    Series(CATEGORY_LABELS[c], ordered[f"{c}{suffix}"].to_list(), CATEGORY_COLORS[c])
                    for c in idle.CATEGORIES
                ],
                unit=unit,
                notes=[f"{value:,.1f} µs" for value in ordered["total_us"].fill_null(0.0)],
            )
        )

    def action_toggle_absolute(self) -> None:
        self.absolute = not self.absolute
        self._draw()
