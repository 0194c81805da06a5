"""Ranks: the rank × step heat map, the stragglers, and the collectives across ranks."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import polars as pl
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from htatui.analysis.registry import PageTable
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.table import ColumnHint, ViewTable

MATRIX = PageTable("rank-steps")
STRAGGLERS = PageTable("stragglers")
PER_STEP = PageTable("stragglers", "per-step")
PHASES = PageTable("stragglers", "phases")
COLLECTIVES = PageTable("collectives")

METRIC_LABELS = {
    "step_us": "host step time",
    "gpu_busy_us": "GPU busy",
    "gpu_idle_us": "GPU idle",
    "comm_us": "communication",
    "wait_us": "wait at collectives",
}

GLYPHS = "·░▒▓█"
"""Low to high: the heat map reads without colour."""
LEVEL_COLORS = ("success", "success", "warning", "warning", "error")

LEADER = "▲"
CELL_WIDTH = 11
MAX_HEAT_RANKS = 64


MIN_SPREAD = 0.10
"""The scale spans at least this share of the matrix's largest value: 16.37 and 16.38 ms are one
level, not the two ends of it (issue 38 #6)."""


def heat_level(value: float, low: float, high: float) -> int:
    """0..4: where value lies between the matrix's low and high, the range at least MIN_SPREAD of
    the high (all 0 when every value is equal)."""
    if high <= low:
        return 0
    low = min(low, high - MIN_SPREAD * abs(high))
    return max(0, min(len(GLYPHS) - 1, int((value - low) / (high - low) * len(GLYPHS))))


def heat_map_text(
    matrix: pl.DataFrame,
    metric: str,
    colors: dict[str, str],
    width: int,
    leaders: frozenset[tuple[int, int]] = frozenset(),
) -> Text:
    """Ranks down, steps across: a glyph for the level (·░▒▓█) and the value in ms per cell;
    ▲ marks the (rank, step) cells in `leaders`, each step's straggler."""
    steps = sorted(matrix["step"].unique().to_list())
    rank_ids = sorted(matrix["rank"].unique().to_list())
    fit = max(1, (width - 6) // CELL_WIDTH)
    shown_steps, shown_ranks = steps[:fit], rank_ids[:MAX_HEAT_RANKS]
    values = {(r, s): v for r, s, v in matrix.select("rank", "step", metric).iter_rows()}
    column = matrix[metric].drop_nulls()
    low, high = (float(column.min()), float(column.max())) if column.len() else (0.0, 0.0)  # type: ignore[arg-type]
    text = Text()
    text.append("rank".ljust(6), style="bold")
    for s in shown_steps:
        text.append(f"step {s}".rjust(CELL_WIDTH), style="bold")
    text.append("\n")
    for r in shown_ranks:
        text.append(f"r{r}".ljust(6))
        for s in shown_steps:
            value = values.get((r, s))
            if value is None:
                text.append("–".rjust(CELL_WIDTH), style="dim")
                continue
            level = heat_level(value, low, high)
            mark = LEADER if (r, s) in leaders else " "
            cell = f"{mark}{GLYPHS[level]} {value / 1000:,.2f}"
            style = colors.get(LEVEL_COLORS[level], "")
            text.append(cell.rjust(CELL_WIDTH), style=f"bold {style}" if mark == LEADER else style)
        text.append("\n")
    hidden = [f"{len(steps) - len(shown_steps)} more steps"] if len(steps) > len(shown_steps) else []
    hidden += [f"{len(rank_ids) - len(shown_ranks)} more ranks"] if len(rank_ids) > len(shown_ranks) else []
    label = METRIC_LABELS.get(metric, metric.removesuffix("_us"))
    text.append(f"{label} (ms) · {GLYPHS} low → high", style="dim")
    if leaders:
        text.append(f" · {LEADER} the step's straggler", style="dim")
    if hidden:
        text.append(" · " + ", ".join(hidden) + " (report --view rank-steps lists all)", style="dim")
    return text


class RanksScreen(PageScreen):
    PAGE: ClassVar[str] = "ranks"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        STRAGGLERS: Pane(
            "Stragglers",
            "No rank made the others wait.",
            columns={"steps": ColumnHint(width=10)},
        ),
        PHASES: Pane("Phases", "", sort="excess_us", columns={"phase": ColumnHint(width=32)}),
        COLLECTIVES: Pane(
            "Collectives",
            "No collectives on the chosen ranks (no communication kernels, no CPU collectives by the rules).",
            sort="total_dur_us",
            columns={"kind": ColumnHint(width=14)},
        ),
    }
    VIEW_TITLE: ClassVar[str] = "Ranks"
    HELP: ClassVar[str] = (
        "Ranks side by side. The heat map shows one number per rank and step (`m` picks step "
        "time, GPU busy, GPU idle, communication, wait at collectives, or a CPU phase such as "
        "data_loader or forward). **Stragglers**, htatui's one answer to who is slow: where ranks "
        "meet (communication kernels, else the CPU collectives of the communication rules: gloo:/nccl: "
        "ranges, vLLM's _C::shm_* ops, c10d ops), the rank that arrived last "
        "made the others wait; its *delay* is the time their GPUs sat idle waiting for it, and its "
        "cause the phase longer on it than the other ranks' median, with the share of the delay "
        "that explains (under half: no phase explains it). *hta late starts* is HTA's own score "
        "beside it. Enter on a straggler compares its phases with the others'. **Collectives** per "
        "process group and kind: calls, duration, cross-rank skew (the longest wait per call), "
        "message size and algorithm/bus bandwidth."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "next_metric", "Metric", tooltip="Show the next metric in the heat map", id="ranks.metric"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.metric = "step_us"

    def compose_body(self) -> ComposeResult:
        yield Static("", id="ranks-heat")
        # Enter compares the straggler's phases below: no name toast over them.
        yield self.pane(STRAGGLERS, name_on_enter=False)
        yield self.pane(PHASES)
        yield self.pane(COLLECTIVES)

    def metrics(self) -> list[str]:
        if self.result is None:
            return list(METRIC_LABELS)
        return [c for c in self.result.frame("rank-steps").columns if c.endswith("_us")]

    def pane_spec(self, table: PageTable) -> Pane:
        spec = super().pane_spec(table)
        if table == PHASES and self.view_options["stragglers"].straggler is None:  # type: ignore[attr-defined]
            return replace(spec, title="Phases of the top straggler (enter on another to compare it)")
        return spec

    def table_drawn_as(self, table: PageTable) -> str:
        return "in the heat map above (m picks its metric)" if table == MATRIX else super().table_drawn_as(table)

    def draw(self, result: PageResult) -> None:
        if self.metric not in self.metrics():
            self.metric = "step_us"
        self._draw_heat()

    def _draw_heat(self) -> None:
        result = self.result
        if result is None:
            return
        heat = self.query_one("#ranks-heat", Static)
        matrix = result.frame("rank-steps")
        if matrix.height == 0:
            heat.update("No ProfilerStep markers on the chosen ranks: the rank × step map needs steps.")
            return
        colors = self.app.get_css_variables()
        leaders = frozenset(
            (int(r), int(s)) for s, r in result.frame("stragglers", "per-step").select("step", "rank").iter_rows()
        )
        heat.update(heat_map_text(matrix, self.metric, colors, self.size.width or 80, leaders))

    def on_resize(self) -> None:
        # The heat map shows as many steps as fit the width.
        self._draw_heat()

    def action_next_metric(self) -> None:
        choices = self.metrics()
        position = choices.index(self.metric) if self.metric in choices else -1
        self.metric = choices[(position + 1) % len(choices)]
        self._draw_heat()

    @on(DataTable.RowSelected, "#stragglers-main ViewTable")
    def _straggler_chosen(self, event: DataTable.RowSelected) -> None:
        """Compare the chosen straggler's phases (`report --view stragglers --phases --straggler R`)."""
        table = event.data_table
        assert isinstance(table, ViewTable)
        row = table.selected_row()
        if row is not None:
            self.set_knob("straggler", int(row["rank"]))
            self.request_analysis()
