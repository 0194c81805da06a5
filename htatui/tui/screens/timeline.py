"""Timeline: CPU threads, GPU streams and counters of the chosen ranks over a time window.

The first draw builds each rank's index on the worker (htatui.analysis.timeline.index); every redraw
after that bins only the rows on screen into the canvas's cells, so it costs the same whatever
the trace size. Cells carry a type letter (upper case: at least half busy), coloured by type
where the terminal has colours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl
from rich.color import Color as RichColor
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.color import Color as TextualColor
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Label, Static

from htatui.analysis.core.names import readable_name, shorten_name
from htatui.analysis.core.scope import Scope
from htatui.analysis.timeline import events as tle
from htatui.analysis.timeline import index as tl
from htatui.text import timeline as timeline_text
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.table import CURSOR_MARK

MAX_RANKS = 8
MAX_LABEL = 22
TYPE_COLORS = {
    tl.COMPUTE: "hta-compute",
    tl.COMM: "hta-comm",
    tl.MEMCPY: "hta-memory",
    tl.MEMSET: "hta-memory",
    tl.OTHER: "hta-other",
    tl.OP: "hta-series-1",
    tl.ANNOTATION: "hta-series-2",
    tl.RUNTIME: "hta-series-3",
}
LEGEND = "C compute N comm M memcpy S memset · O op A annotation R runtime · c: <½ busy"


@dataclass(frozen=True)
class TimelineData:
    """The worker's result: one index per drawn rank, and ranks left out."""

    indexes: list[tl.RankIndex]
    left_out: int


def parse_window(text: str, span_us: float) -> tuple[float, float]:
    """'START' (keeps the span) or 'START END' / 'START..END' / 'START,END' in µs."""
    parts = text.replace("..", " ").replace(",", " ").split()
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"{text!r}: give a time in µs, or a start and an end") from None
    if len(numbers) == 1 and math.isfinite(numbers[0]):
        return numbers[0], numbers[0] + span_us
    if len(numbers) == 2 and all(map(math.isfinite, numbers)) and numbers[1] > numbers[0]:
        return numbers[0], numbers[1]
    raise ValueError(f"{text!r}: give a time in µs, or a start and a larger end")


class TimePrompt(ModalScreen[tuple[float, float] | None]):
    """Ask for a time (or a window) to go to."""

    DEFAULT_CSS = """
    TimePrompt { align: center middle; }
    TimePrompt > Vertical {
        width: 60; max-width: 100%; height: auto; padding: 0 1;
        border: round $primary; background: $surface;
    }
    TimePrompt #error { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without moving", id="timeline.prompt.cancel"),
    ]

    def __init__(self, span_us: float) -> None:
        super().__init__()
        self.span_us = span_us

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Go to µs: START, or START END")
            yield Input(placeholder="e.g. 1250 or 1000 2000", id="time")
            yield Label("", id="error")

    @on(Input.Submitted, "#time")
    def submit(self, event: Input.Submitted) -> None:
        try:
            self.dismiss(parse_window(event.value, self.span_us))
        except ValueError as exc:
            self.query_one("#error", Label).update(str(exc))

    def action_cancel(self) -> None:
        self.dismiss(None)


LEGEND_NAMES = {
    tl.COMPUTE: ("compute", "comp"),
    tl.COMM: ("comm", "comm"),
    tl.MEMCPY: ("memcpy", "cpy"),
    tl.MEMSET: ("memset", "set"),
    tl.OP: ("op", "op"),
    tl.ANNOTATION: ("annot", "ann"),
    tl.RUNTIME: ("runtime", "rt"),
}
"""What the legend calls each cell type, long and short (the rare X other last)."""


def legend_text(width: int = 80) -> str:
    """The letters the canvas draws, on one line of `width`: the types, idle, what lower case
    means; shorter names where the long ones do not fit (91 cells did not fit 80, issue 38 #5)."""
    for short in (False, True):
        kinds = " ".join(f"{tl.GLYPHS[kind]} {names[short]}" for kind, names in LEGEND_NAMES.items())
        text = f" {kinds} {tl.STREAM_IDLE} idle · lower <½ busy · {tl.GLYPHS[tl.OTHER]} other"
        if len(text) <= width:
            break
    return text


class TimelineCanvas(Widget, can_focus=True):
    """The rows; it asks its screen for the lines at its current size on every refresh."""

    DEFAULT_CSS = """
    TimelineCanvas { height: 1fr; min-height: 4; }
    """

    def render(self) -> Text:
        screen = self.screen
        if isinstance(screen, TimelineScreen):
            return screen.draw(self.size.width, self.size.height)
        return Text()


class TimelineScreen(ViewScreen["TimelineData"]):
    VIEW_TITLE: ClassVar[str] = "Timeline"
    HELP: ClassVar[str] = (
        "The chosen ranks' CPU threads (top-level ops and annotations, one row per nesting depth) "
        "and GPU streams over a time window, on the time base of the views' `start_us` columns. "
        "Each cell shows the type that covers most of it: **C** compute, **N** communication, "
        "**M** memcpy, **S** memset, **O** CPU op, **A** annotation, **R** runtime call; upper "
        "case when at least half the cell is busy, `.` an idle stream, **X** any other GPU work; the line "
        "under the rows repeats this legend. `c` adds queue-length "
        "and memory-bandwidth sparklines. The cursor selects the event under it; `f` follows a launch to its kernel "
        "and back. `t` in any table opens this view at the highlighted row's time."
    )
    AUTO_FOCUS = "TimelineCanvas"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "w,plus,equals_sign",
            "scale_time(0.5)",
            "Zoom",
            key_display="w/+",
            tooltip="Zoom in around the cursor",
            id="timeline.zoom_in",
        ),
        Binding(
            "s,minus",
            "scale_time(2)",
            "Out",
            key_display="s/-",
            tooltip="Zoom out around the cursor",
            id="timeline.zoom_out",
        ),
        Binding("a,h", "pan(-0.25)", "Pan", key_display="a/d", tooltip="Pan left by a quarter", id="timeline.pan_left"),
        Binding("d,l", "pan(0.25)", "Pan right", show=False, tooltip="Pan right by a quarter", id="timeline.pan_right"),
        Binding("left", "move(-1)", "Cursor left", show=False, tooltip="Cursor one cell left", id="timeline.left"),
        Binding("right", "move(1)", "Cursor right", show=False, tooltip="Cursor one cell right", id="timeline.right"),
        Binding("up,k", "row(-1)", "Row up", show=False, tooltip="Cursor one row up", id="timeline.up"),
        Binding("down,j", "row(1)", "Row down", show=False, tooltip="Cursor one row down", id="timeline.down"),
        Binding("n", "step(1)", "Step", key_display="n/p", tooltip="Next ProfilerStep", id="timeline.next_step"),
        Binding("p", "step(-1)", "Previous step", show=False, tooltip="Previous ProfilerStep", id="timeline.prev_step"),
        Binding("g", "go_to", "Go to", tooltip="Go to a time (µs) or a window", id="timeline.go_to"),
        Binding("f,enter", "follow", "Follow", tooltip="Follow a launch to its kernel and back", id="timeline.follow"),
        Binding("o", "overview", "All", show=False, tooltip="Show the whole trace", id="timeline.overview"),
        Binding(
            "c",
            "counters",
            "Counters",
            show=False,
            tooltip="Show or hide queue lengths and memory bandwidth",
            id="timeline.counters",
        ),
        Binding("v", "depth", "Depth", show=False, tooltip="Show more CPU nesting rows", id="timeline.depth"),
        Binding("escape", "back", "Back", tooltip="Back to the table (or cancel)", id="timeline.back"),
    ]

    def __init__(
        self,
        rank: int | None = None,
        start_us: float | None = None,
        end_us: float | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__()
        self.target = (rank, start_us, end_us)
        self.target_name = name
        """The event the opening table row named: its own row is selected (a kernel's stream)."""
        self.data: TimelineData | None = None
        self.start_us = 0.0
        self.end_us = 1.0
        self.cursor_us = 0.5
        self.cursor_row = 0
        self.row_offset = 0
        self.depth = 2
        self.counters = False
        self.rows: list[tuple[tl.RankIndex, int]] = []
        self._cells = 1
        self._selected: tuple[tl.RankIndex, dict[str, Any]] | None = None
        self._followed: tuple[tl.RankIndex, dict[str, Any]] | None = None

    def compose_body(self) -> ComposeResult:
        yield TimelineCanvas(id="timeline-canvas")
        yield Static(legend_text(), id="timeline-legend")
        yield Static("", id="timeline-details")

    DEFAULT_CSS = """
    TimelineScreen #body { overflow-y: hidden; }
    TimelineScreen #timeline-legend {
        height: 1; background: $surface; color: $foreground-muted; text-wrap: nowrap; text-overflow: ellipsis;
    }
    TimelineScreen #timeline-details {
        height: 4; background: $surface; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    # ---- analysis -----------------------------------------------------------------------
    def option_values(self) -> tuple[bool]:
        return (self.counters,)

    def analyse(self, traces: TraceSet, scope: Scope) -> TimelineData:
        ranks = list(scope.ranks) if scope.ranks is not None else traces.rank_ids
        wanted = self.target[0]
        if wanted in traces.ranks and wanted not in ranks:
            ranks = [wanted, *ranks]
        indexes = [tl.build_index(traces, r, scope.rules) for r in ranks[:MAX_RANKS]]
        if self.counters:
            for index in indexes:
                for kind in tl.COUNTER_KINDS:
                    tl.counter_rows(traces, index, kind)
        return TimelineData(indexes, max(0, len(ranks) - MAX_RANKS))

    def on_unmount(self) -> None:
        super().on_unmount()
        # What else refers to a closed screen (a finished worker, a pending callback) then holds no index.
        held = self.data is not None
        self.data, self.rows, self._selected, self._followed = None, [], None, None
        if held:
            self.release_later()

    def show_result(self, result: TimelineData) -> None:
        first = self.data is None
        self.data = result
        self._layout_rows()
        if first:
            self._initial_window()
        if result.left_out:
            self.notify(f"Showing the first {MAX_RANKS} ranks; pick fewer with the rank picker.", timeout=5)
        self.redraw()

    def _layout_rows(self) -> None:
        if self.data is None or self.hta.traces is None:
            return
        options = tl.TimelineOptions(
            max_depth=self.depth,
            rows=(*tl.DEFAULT_ROWS, *tl.COUNTER_KINDS) if self.counters else tl.DEFAULT_ROWS,
            rules=self.hta.scope().rules,
        )
        self.rows = [
            (index, row) for index in self.data.indexes for row in tl.visible_rows(self.hta.traces, index, options)
        ]
        self.cursor_row = min(self.cursor_row, max(len(self.rows) - 1, 0))

    def _initial_window(self) -> None:
        assert self.data is not None
        rank, start, end = self.target
        indexes = self.data.indexes
        first = min((i.first_us for i in indexes), default=0.0)
        last = max((i.last_us for i in indexes), default=1.0)
        if start is None:
            self._set_window(first, last if last > first else first + 1.0)
            self.cursor_us = (self.start_us + self.end_us) / 2
        else:
            span = (end - start) if end is not None and end > start else 0.0
            pad = max(span * 0.1, 10.0)
            self._set_window(start - pad, start + span + pad)
            self.cursor_us = start + span / 2 if span else start
        if rank is not None:
            rows = [i for i, (index, row) in enumerate(self.rows) if index.rank == rank]
            streams = [i for i in rows if self.rows[i][0].rows[self.rows[i][1]].kind == tl.STREAM]
            ordered = streams + [i for i in rows if i not in streams]
            # The row whose event under the cursor is the one the table row named (issue 38 #3:
            # a kernel's own stream, not another stream busy then), else any row busy there,
            # else the rank's first stream.
            probe = (self.cursor_us, self.cursor_us + 1e-6)
            under = {i: tle.event_at(*self.rows[i], *probe) for i in ordered} if start is not None else {}
            named = [i for i, event in under.items() if event is not None and self._names_target(event)]
            busy = [i for i, event in under.items() if event is not None]
            self.cursor_row = (named or busy or ordered or [0])[0]

    def _names_target(self, event: dict[str, Any]) -> bool:
        wanted = self.target_name
        if wanted is None:
            return False
        name = str(event.get("name", ""))
        return wanted in (name, shorten_name(name), readable_name(name))

    # ---- drawing ------------------------------------------------------------------------
    def _label(self, index: tl.RankIndex, row: int) -> str:
        spec = index.rows[row]
        many = self.data is not None and len(self.data.indexes) > 1
        return (f"r{spec.rank} {spec.label}" if many else spec.label)[:MAX_LABEL]

    def draw(self, width: int, height: int) -> Text:
        """The axis line and the rows that fit, `width` × `height` cells."""
        text = Text(no_wrap=True, overflow="crop")
        if self.data is None:
            return text
        if not self.rows:
            text.append("No CPU or GPU events on the chosen ranks.")
            return text
        label_width = max(len(self._label(index, row)) for index, row in self.rows)
        cells = max(1, width - label_width - 1)
        self._cells = cells
        shown = max(1, height - 1)
        self.row_offset = min(max(self.row_offset, self.cursor_row - shown + 1), self.cursor_row)
        edges = tl.cell_edges(self.start_us, self.end_us, cells)
        cursor_cell = self._cursor_cell()
        colors = self._theme_colors()
        background = colors["background"]
        muted = Style(color=colors["foreground-muted"])
        text.append(self._axis(label_width, cells), style=muted)
        positions = range(self.row_offset, min(len(self.rows), self.row_offset + shown))
        binned_rows: dict[int, tl.TimelineRow] = {}
        for index in {id(self.rows[p][0]): self.rows[p][0] for p in positions}.values():
            mine = [p for p in positions if self.rows[p][0] is index]
            for p, binned in zip(mine, tl.bin_rows(index, [self.rows[p][1] for p in mine], edges), strict=True):
                binned_rows[p] = binned
        styles: dict[tuple[str | None, bool, bool], Style] = {}

        def style_of(kind: str | None, full: bool, counter: bool) -> Style:
            key = (kind, full, counter)
            if key not in styles:
                color = colors.get(TYPE_COLORS.get(kind or "", ""))
                if kind is None:
                    styles[key] = Style(color=colors["hta-series-4"]) if counter else muted
                elif full:
                    styles[key] = Style(color=background, bgcolor=color, bold=True)
                else:
                    styles[key] = Style(color=color)
            return styles[key]

        for position in positions:
            index, row = self.rows[position]
            binned = binned_rows[position]
            is_cursor = position == self.cursor_row
            counter = binned.spec.kind == tl.COUNTER
            text.append("\n")
            text.append(f"{self._label(index, row):<{label_width}}", style="reverse" if is_cursor else "bold")
            # The cursor row is marked in text too (its cell and event are named below the rows).
            text.append(CURSOR_MARK if is_cursor else " ", style="bold")
            scale = timeline_text.counter_scale(binned) if counter else None
            glyphs = [timeline_text.cell_glyph(binned, cell, scale) for cell in range(cells)]
            # One span per run of cells that look the same (a screen has few runs per row).
            run_start = 0
            for cell in range(1, cells + 1):
                kind = None if counter else binned.types[run_start]
                full = glyphs[run_start].isupper()
                at_cursor = is_cursor and cursor_cell in (run_start, cell)
                if (
                    cell < cells
                    and not at_cursor
                    and (None if counter else binned.types[cell]) == kind
                    and glyphs[cell].isupper() == full
                ):
                    continue
                style = style_of(kind, full, counter)
                if is_cursor and run_start == cursor_cell:
                    style = style + Style(reverse=True, underline=True)
                text.append("".join(glyphs[run_start:cell]), style=style)
                run_start = cell
        return text

    def _theme_colors(self) -> dict[str, RichColor]:
        """The theme's colours this view uses, with alpha blended onto the background."""
        variables = self.app.theme_variables
        base = TextualColor.parse(variables.get("background", "#000000"))
        names = ["background", "foreground-muted", "hta-series-4", *TYPE_COLORS.values()]
        out: dict[str, RichColor] = {}
        for name in names:
            try:
                out[name] = (base + TextualColor.parse(variables.get(name, "#808080"))).rich_color
            except Exception:  # noqa: BLE001 - a theme without the colour falls back to grey
                out[name] = TextualColor(128, 128, 128).rich_color
        return out

    def _axis(self, label_width: int, cells: int) -> str:
        left = timeline_text.fmt_us(self.start_us)
        right = timeline_text.fmt_us(self.end_us)
        middle = f"{timeline_text.fmt_us((self.end_us - self.start_us) / cells)} µs/cell"
        room = cells - len(left) - len(right)
        if room >= len(middle) + 2:
            pad = room - len(middle)
            body = left + " " * (pad // 2) + middle + " " * (pad - pad // 2) + right
        else:
            body = (left + " " * max(room, 1) + right)[:cells]
        return f"{'µs':<{label_width}} {body}"

    def _cursor_cell(self) -> int:
        step = (self.end_us - self.start_us) / self._cells
        return min(self._cells - 1, max(0, math.floor((self.cursor_us - self.start_us) / step)))

    def redraw(self) -> None:
        canvas = self.query_one(TimelineCanvas)
        canvas.refresh()
        self.call_after_refresh(self._update_details)

    def _update_details(self) -> None:
        details = self.query_one("#timeline-details", Static)
        self._selected = None
        if not self.rows or self.data is None:
            details.update("")
            return
        index, row = self.rows[self.cursor_row]
        step = (self.end_us - self.start_us) / self._cells
        cell_start = self.start_us + self._cursor_cell() * step
        event = self._followed_at(index, row, cell_start, cell_start + step)
        if event is None:
            event = tle.event_at(index, row, cell_start, cell_start + step)
        if event is None:
            where = f"{index.rows[row].label} · {timeline_text.fmt_us(self.cursor_us)} µs: nothing here"
            details.update(Text(f"{where}\n{LEGEND}", no_wrap=True, overflow="ellipsis"))
            return
        self._selected = (index, event)
        details.update(
            Text("\n".join(timeline_text.details_lines(tle.details(index, event))), no_wrap=True, overflow="ellipsis")
        )

    def _followed_at(self, index: tl.RankIndex, row: int, start_us: float, end_us: float) -> dict[str, Any] | None:
        """The event `f` jumped to while it is still under the cursor, else None (and forgotten):
        a coarse cell holds many events, and the busiest of them need not be the one followed."""
        if self._followed is not None:
            followed_index, event = self._followed
            if followed_index is index and tle.overlaps_cell(event, row, start_us, end_us):
                return event
        self._followed = None
        return None

    # ---- moving around ------------------------------------------------------------------
    def _set_window(self, start: float, end: float) -> None:
        span = max(end - start, 1e-3)
        self.start_us, self.end_us = start, start + span
        if not self.start_us <= self.cursor_us < self.end_us:
            self.cursor_us = min(max(self.cursor_us, self.start_us), self.end_us - span / (2 * self._cells))

    def action_scale_time(self, factor: float) -> None:
        span = (self.end_us - self.start_us) * factor
        anchor = self.cursor_us
        ratio = (anchor - self.start_us) / (self.end_us - self.start_us)
        self._set_window(anchor - ratio * span, anchor - ratio * span + span)
        self.redraw()

    def action_pan(self, fraction: float) -> None:
        shift = (self.end_us - self.start_us) * fraction
        self.cursor_us += shift
        self._set_window(self.start_us + shift, self.end_us + shift)
        self.redraw()

    def action_move(self, cells: int) -> None:
        step = (self.end_us - self.start_us) / self._cells
        self.cursor_us = self.start_us + (self._cursor_cell() + cells + 0.5) * step
        if not self.start_us <= self.cursor_us < self.end_us:
            self._set_window(self.start_us + cells * step, self.end_us + cells * step)
        self.redraw()

    def action_row(self, delta: int) -> None:
        if self.rows:
            self.cursor_row = min(max(self.cursor_row + delta, 0), len(self.rows) - 1)
            self.redraw()

    def action_step(self, direction: int) -> None:
        if not self.rows:
            return
        steps = self.rows[self.cursor_row][0].steps
        if direction > 0:
            found = steps.filter(pl.col("start_us") > self.start_us + 1e-6).head(1)
        else:
            found = steps.filter(pl.col("start_us") < self.start_us - 1e-6).tail(1)
        if found.height == 0:
            self.notify("No further ProfilerStep this way.", timeout=3)
            return
        step, start, end = found.row(0)
        self._set_window(float(start), float(end))
        self.cursor_us = float(start) + (float(end) - float(start)) / (2 * self._cells)
        self.set_state(f"step {step}")
        self.redraw()

    def action_go_to(self) -> None:
        def arrive(window: tuple[float, float] | None) -> None:
            if window is not None:
                self.cursor_us = window[0]
                self._set_window(*window)
                self.redraw()

        self.app.push_screen(TimePrompt(self.end_us - self.start_us), arrive)

    def action_follow(self) -> None:
        if self._selected is None:
            self.notify("No event under the cursor.", timeout=3)
            return
        index, event = self._selected
        linked = tle.linked_event(index, event)
        if linked is None:
            what = "launch" if event.get("kind") == tl.STREAM else "kernel"
            self.notify(f"No {what} linked to {event['name']}.", timeout=3)
            return
        if int(linked["depth"]) >= self.depth:
            self.depth = int(linked["depth"]) + 1
            self._layout_rows()
        target = next(i for i, (ix, row) in enumerate(self.rows) if ix is index and row == linked["row"])
        self.cursor_row = target
        span = self.end_us - self.start_us
        if linked["dur"] > span:
            span = float(linked["dur"]) * 1.2
        center = float(linked["ts"]) + float(linked["dur"]) / 2
        if not self.start_us <= center < self.end_us or span != self.end_us - self.start_us:
            self._set_window(center - span / 2, center + span / 2)
        self.cursor_us = center
        self._followed = (index, linked)
        self.redraw()

    def action_overview(self) -> None:
        if self.data is not None:
            self.target = (None, None, None)
            self._initial_window()
            self.redraw()

    def action_counters(self) -> None:
        self.counters = not self.counters
        self.request_analysis()

    def action_depth(self) -> None:
        self.depth = self.depth % 4 + 1
        self._layout_rows()
        self.set_state(f"CPU depth {self.depth}")
        self.redraw()

    def action_back(self) -> None:
        if self.analysis_running:
            self.action_cancel_analysis()
        elif len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    def action_open_timeline(self) -> None:
        """Already here."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # No tables to filter here, and `t` would open this view again.
        return action not in ("filter", "open_timeline")

    def on_resize(self) -> None:
        self.query_one("#timeline-legend", Static).update(legend_text(self.size.width))
        self.call_after_refresh(self._update_details)
