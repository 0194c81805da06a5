"""3 Kernels: time by kernel type, the top kernels, and the selected kernel across ranks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult

from htatui.analysis.registry import PageTable
from htatui.analysis.views import kernels
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.chart import BarRows, Chart, Series, grouped_bars
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import ColumnHint, ViewTable, short_kernel_name
from htatui.tui.widgets.table_pane import TablePane

TOP = PageTable("kernels")
SPREAD = PageTable("kernel-spread")
TYPES = PageTable("kernel-types")

TYPE_SHORT = {"COMPUTATION": "comp", "COMMUNICATION": "comm", "MEMORY": "mem"}

NO_KERNELS = "No GPU kernels, copies or memsets on the chosen ranks (CPU-only and MTIA traces have none)."


def short_type(label: str) -> str:
    """'COMPUTATION overlapping COMMUNICATION' → 'comp+comm'."""
    return "+".join(TYPE_SHORT.get(part, part.lower()) for part in label.split(" overlapping "))


class KernelsScreen(PageScreen):
    PAGE: ClassVar[str] = "kernels"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        TOP: Pane(
            "Top kernels",
            NO_KERNELS,
            sort="sum_us",
            row_limit=500,
            columns={
                "name": ColumnHint(width=32, short_names=True),
                "kernel_type": ColumnHint(width=4, transform=short_type),
            },
        ),
        TYPES: Pane("Kernel-type states", "", columns={"kernel_type": ColumnHint(width=40)}),
    }
    KNOBS: ClassVar[dict[str, dict[str, object]]] = {"kernel-spread": {"top_k": None}}
    """Every kernel's spread, so the highlighted one is always there (`report --view kernel-spread --top all`)."""
    VIEW_TITLE: ClassVar[str] = "Kernels"
    HELP: ClassVar[str] = (
        "The bars give the share of GPU time in each kernel-type state over the chosen ranks "
        "(computation, communication, memory, and the times they overlap). The table lists each "
        "rank's kernels with launch count and duration statistics; per rank and type only the "
        "**top-k** kernels are named and the tail beyond the **duration ratio** of the cumulative "
        "time is folded into `others` (HTA's rule). Highlight a kernel to see its mean, min and "
        "max duration on every rank below (the rows of `report --view kernel-spread --top all`)."
    )

    def __init__(self) -> None:
        super().__init__()
        self._spread_shown: tuple[int, tuple[object, object] | None] | None = None
        """The result and the kernel the spread pane shows."""

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("kernels", "top_k", "duration_ratio")
        yield self.pane(TOP)
        yield TablePane("Selected kernel across ranks", id="kernel-spread-main")
        yield Chart("Selected kernel across ranks", id="kernels-spread-chart")
        yield Chart("GPU time by kernel type (%)", id="kernels-types-chart")
        yield self.pane(TYPES)

    def set_knob(self, name: str, value: Any) -> None:
        # The top-k and ratio inputs shape the kernels table; the spread keeps every kernel.
        self.view_options["kernels"] = replace(self.view_options["kernels"], **{name: value})

    def draw(self, result: PageResult) -> None:
        overall = result.frame("kernel-types").filter(pl.col("rank") == kernels.ALL_RANKS)
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

    @on(ViewTable.RowHighlighted, "#kernels-main ViewTable")
    @on(ViewTable.Changed, "#kernels-main ViewTable")
    def _kernel_highlighted(self) -> None:
        """The pane follows the highlighted kernel, also when a filter or sort changes the rows."""
        self._show_spread()

    def _show_spread(self) -> None:
        """The highlighted kernel's rows of the spread table (a filter of it, as `/` filters)."""
        result = self.result
        row = self.query_one("#kernels-main", TablePane).table.selected_row()
        # A page switch highlights the same row ~7 times (focus, sort, resize): draw it once.
        shown = (id(result), None if row is None else (row["name"], row["kernel_type"]))
        if shown == self._spread_shown:
            return
        self._spread_shown = shown
        pane = self.query_one("#kernel-spread-main", TablePane)
        chart = self.query_one("#kernels-spread-chart", Chart)
        spread = result.frame("kernel-spread") if result is not None else pl.DataFrame(schema=kernels.SPREAD_SCHEMA)
        if result is None or row is None:
            hint = "Highlight a kernel above." if result is not None and result.frame("kernels").height else ""
            pane.show(spread.clear(), empty=hint)
            chart.show(None, "")
            return
        name = row["name"]
        if name == kernels.OTHERS:
            message = "'others' folds many kernels together; highlight a named kernel to see it across ranks."
            pane.show(spread.clear(), empty=message)
            chart.show(None, "")
            return
        rows = spread.filter((pl.col("name") == name) & (pl.col("kernel_type") == row["kernel_type"]))
        pane.table.title = f"{short_kernel_name(name)} across ranks"
        pane.show(
            rows.drop("name", "kernel_type"),
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
