"""Ranks: the rank × step heat map, the stragglers, and the collectives across ranks."""

from __future__ import annotations

from typing import ClassVar

import polars as pl
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from htatui.analysis import ranks
from htatui.analysis.common import CommonOptions
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.table import Column, ViewTable
from htatui.tui.widgets.table_pane import TablePane

STRAGGLER_COLUMNS = [
    Column("rank", "rank", "int", width=4),
    Column("steps", "steps", "text", width=10),
    Column("delay_us", "others waited (µs)", "us"),
    Column("cause", "cause", "text", width=60, cut_end=True),
]

COLLECTIVE_COLUMNS = [
    Column("kind", "kind", "text", width=14),
    Column("pg", "pg", "text", width=4),
    Column("ranks", "ranks", "int", width=5),
    Column("calls", "calls", "int", width=5),
    Column("dur_us", "mean (µs)", "us"),
    Column("skew_mean_us", "skew mean (µs)", "us"),
    Column("skew_max_us", "skew max (µs)", "us"),
    Column("msg_bytes", "msg (B)", "int"),
    Column("algbw_gbps", "algbw (GB/s)", "float"),
    Column("busbw_gbps", "busbw (GB/s)", "float"),
    Column("total_dur_us", "total (µs)", "us"),
]

PHASE_COLUMNS = [
    Column("phase", "phase", "text", width=32),
    Column("rank_us", "this rank (µs)", "us"),
    Column("others_median_us", "others' median (µs)", "us"),
    Column("excess_us", "longer by (µs)", "us"),
]

METRIC_LABELS = {
    "step_us": "step time",
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
PHASES_HINT = "Press Enter on a straggler to compare its phases with the other ranks' median."


def heat_level(value: float, low: float, high: float) -> int:
    """0..4: where value lies between the matrix's low and high (all 0 when they are equal)."""
    if high <= low:
        return 0
    return min(len(GLYPHS) - 1, int((value - low) / (high - low) * len(GLYPHS)))


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


def _sentence(text: str) -> str:
    """The analysis' lower-case message as the sentence the empty notes use."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


class RanksScreen(ViewScreen):
    VIEW_TITLE: ClassVar[str] = "Ranks"
    HELP: ClassVar[str] = (
        "Ranks side by side. The heat map shows one number per rank and step (`m` picks step "
        "time, GPU busy, GPU idle, communication, wait at collectives, or a CPU phase such as "
        "data_loader or forward). **Stragglers**: where ranks meet (communication kernels, else "
        "the gloo:/nccl: CPU ops), the rank that arrived last made the others wait; its cause is "
        "the phase longer on it than the other ranks' median. Enter on a straggler compares its "
        "phases with the others'. **Collectives** per process group and kind: calls, duration, "
        "cross-rank skew (the longest wait per call), message size and algorithm/bus bandwidth."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "next_metric", "Metric", tooltip="Show the next metric in the heat map", id="ranks.metric"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.metric = "step_us"
        self._result: ranks.RanksResult | None = None

    def compose_body(self) -> ComposeResult:
        yield Static("", id="ranks-heat")
        yield TablePane("Stragglers", id="ranks-stragglers")
        yield TablePane("Phases", id="ranks-phases")
        yield TablePane("Collectives", id="ranks-collectives")

    def analyse(self, traces: TraceSet, common: CommonOptions) -> ranks.RanksResult:
        return ranks.analyse(traces, ranks.RanksOptions(common.scope))

    def metrics(self) -> list[str]:
        if self._result is None:
            return list(METRIC_LABELS)
        return [c for c in self._result.matrix.columns if c.endswith("_us")]

    def show_result(self, result: ranks.RanksResult) -> None:
        self._result = result
        if self.metric not in self.metrics():
            self.metric = "step_us"
        self._draw_heat()
        empty = _sentence(result.message) if result.message else "No rank made the others wait."
        stragglers = self.query_one("#ranks-stragglers", TablePane)
        stragglers.table.title = f"Stragglers (meeting points: {result.source})" if result.source else "Stragglers"
        stragglers.show(result.stragglers, STRAGGLER_COLUMNS, empty=empty)
        self.query_one("#ranks-collectives", TablePane).show(
            result.collectives,
            COLLECTIVE_COLUMNS,
            empty="No collectives on the chosen ranks (no communication kernels, no gloo:/nccl:/c10d ops).",
            sort="total_dur_us",
        )
        self._show_phases(None)

    def _draw_heat(self) -> None:
        result = self._result
        if result is None:
            return
        heat = self.query_one("#ranks-heat", Static)
        if result.matrix.height == 0:
            heat.update("No ProfilerStep markers on the chosen ranks: the rank × step map needs steps.")
            return
        colors = self.app.get_css_variables()
        leaders = frozenset((int(r), int(s)) for s, r in result.step_stragglers.select("step", "rank").iter_rows())
        heat.update(heat_map_text(result.matrix, self.metric, colors, self.size.width or 80, leaders))

    def on_resize(self) -> None:
        # The heat map shows as many steps as fit the width.
        self._draw_heat()

    def action_next_metric(self) -> None:
        choices = self.metrics()
        position = choices.index(self.metric) if self.metric in choices else -1
        self.metric = choices[(position + 1) % len(choices)]
        self._draw_heat()

    @on(DataTable.RowSelected, "#ranks-stragglers ViewTable")
    def _straggler_chosen(self, event: DataTable.RowSelected) -> None:
        table = event.data_table
        assert isinstance(table, ViewTable)
        row = table.selected_row()
        self._show_phases(None if row is None else int(row["rank"]))

    def _show_phases(self, rank: int | None) -> None:
        pane = self.query_one("#ranks-phases", TablePane)
        result = self._result
        empty_frame = pl.DataFrame(schema=ranks.PHASE_COLUMNS)
        if result is None or result.stragglers.height == 0:
            pane.show(empty_frame, PHASE_COLUMNS, empty="")
            return
        if rank is None:
            pane.table.title = "Phases"
            pane.show(empty_frame, PHASE_COLUMNS, empty=PHASES_HINT)
            return
        row = result.stragglers.filter(pl.col("rank") == rank).to_dicts()[0]
        steps = [int(s) for s in (row["steps"] or "").split(",") if s] or sorted(
            s for s in result.matrix["step"].unique().to_list() if s is not None
        )
        frame = ranks.phase_excess(result.phases, rank, steps)
        pane.table.title = f"Phases of rank {rank} vs the other ranks' median (steps {','.join(map(str, steps))})"
        pane.show(frame, PHASE_COLUMNS, empty="No phases recorded in those steps.", sort="excess_us")
