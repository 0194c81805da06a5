"""2 Idle: GPU idle time per rank and stream, split into host wait, kernel wait and other."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis.registry import PageTable
from htatui.analysis.views import idle
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.chart import BarRows, Chart, Series
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import ColumnHint

BY_STREAM = PageTable("idle", "by-stream")
INTERVALS = PageTable("idle", "interval-stats")

CATEGORY_COLORS = {
    idle.HOST_WAIT: "hta-host-wait",
    idle.KERNEL_WAIT: "hta-kernel-wait",
    idle.OTHER: "hta-idle",
}
CATEGORY_LABELS = {idle.HOST_WAIT: "host wait", idle.KERNEL_WAIT: "kernel wait", idle.OTHER: "other"}

NO_IDLE = "No GPU idle time found on the chosen ranks (no GPU activity, or streams that never wait)."


def _leading(suffix: str) -> dict[str, ColumnHint]:
    """The category columns with `suffix` kept at any width, the others left out first."""
    other = "_us" if suffix == "_pct" else "_pct"
    hints = {f"{c}{suffix}": ColumnHint(priority=0) for c in idle.CATEGORIES}
    hints |= {f"{c}{other}": ColumnHint(priority=2) for c in idle.CATEGORIES}
    return hints


class IdleScreen(PageScreen):
    PAGE: ClassVar[str] = "idle"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        BY_STREAM: Pane("Idle time per stream", NO_IDLE, sort="total_us", columns=_leading("_pct")),
        INTERVALS: Pane("Idle intervals", ""),
    }
    VIEW_TITLE: ClassVar[str] = "Idle"
    HELP: ClassVar[str] = (
        "For every stream, each gap before a GPU operation is **host wait** when the operation's "
        "launch call started after the stream had gone empty (the CPU was too slow), **kernel "
        "wait** when the gap is shorter than the consecutive kernel delay (launch overhead between "
        "back-to-back kernels), and **other** otherwise. `a` puts the shares of the stream's idle "
        "time (%) or the absolute µs first in the table and the bars (`w` shows every column)."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "a",
            "toggle_absolute",
            "%/µs",
            tooltip="Show shares (%) or absolute time (µs) first",
            id="idle.absolute",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.absolute = False

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("idle", "consecutive_kernel_delay_us")
        yield self.pane(BY_STREAM)
        yield Chart("Idle time per stream", id="idle-chart")
        yield self.pane(INTERVALS)

    def pane_spec(self, table: PageTable) -> Pane:
        spec = super().pane_spec(table)
        return replace(spec, columns=_leading("_us")) if table == BY_STREAM and self.absolute else spec

    def draw(self, result: PageResult) -> None:
        wide = result.frame("idle", "by-stream")
        suffix, unit = ("_us", "µs") if self.absolute else ("_pct", "%")
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
        self.show_table(BY_STREAM)
        if self.result is not None:
            self.draw(self.result)
