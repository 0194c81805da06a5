"""Memory: GPU memory over time, what is live at the peak by allocation site, steps, OOMs.

Two ways in: a job whose traces hold `[memory]` events shows the Memory page (`MemoryScreen`, a
`PageScreen` of the registry's `memory` tables, as `report --view memory` prints them, for the
app's scope), and `htatui snapshot.pickle` opens `SnapshotScreen` straight away
(htatui/tui/memory_app.py), whose tables are made from the snapshot by the same functions
(analysis/memory/tables.py) plus the allocator's state. Both draw the same panes, and a headline
and a chart of the device `d` picks, from those tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import polars as pl
from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

from htatui.analysis.core.options import NotedTable
from htatui.analysis.core.units import byte_size
from htatui.analysis.memory import tables
from htatui.analysis.memory.job import has_memory_events
from htatui.analysis.memory.usage import analyse
from htatui.analysis.registry import PageTable
from htatui.trace import TraceSet
from htatui.trace.memory_inputs import MemoryInputError, read_memory
from htatui.tui.base.jobs import JobRunner
from htatui.tui.screens.page import PageResult, PageScreen, Pane, pane_id
from htatui.tui.widgets.chart import Chart, lines, step_points
from htatui.tui.widgets.footer import FitFooter
from htatui.tui.widgets.table import ColumnHint
from htatui.tui.widgets.table_pane import TablePane

CHART_POINTS = 400
"""The series is reduced to this many time buckets, keeping each bucket's highest point."""

MIB = 1024.0 * 1024.0

SUMMARY = PageTable("memory")
SITES = PageTable("memory", "sites")
OOM = PageTable("memory", "oom")
GROWTH = PageTable("memory", "growth")
SPANS = PageTable("memory", "spans")
SERIES = PageTable("memory", "series")
ALLOCATOR = PageTable("memory", "allocator")
"""Not registered: a snapshot's allocator state, shown by SnapshotScreen only."""

PANES: dict[PageTable, Pane] = {
    SUMMARY: Pane("Memory per device", sort="device", descending=False, columns={"peak_bytes": ColumnHint(priority=0)}),
    SITES: Pane("Live at the peak, by allocation site", sort="bytes", columns={"site": ColumnHint(width=40)}),
    OOM: Pane("Out of memory", columns={"why": ColumnHint(width=40)}),
    GROWTH: Pane("Live at each step start", sort=None),
    SPANS: Pane("Peak per step and annotation", sort=None),
}

SNAPSHOT_PANES: dict[PageTable, Pane] = {**PANES, ALLOCATOR: Pane("Allocator state at the snapshot", sort=None)}

MEMORY_HELP = (
    "GPU memory over time from the trace's `[memory]` events in the scope's steps (or a CUDA memory "
    "snapshot: `htatui snapshot.pickle`): allocated and reserved bytes with the peak, what was live "
    "at the peak grouped by allocation site (for traces, the top-level annotation it was allocated "
    "in), live memory at each step start (rising at every step: a probable leak) and the peak per "
    "step and annotation. A snapshot taken at an out-of-memory error leads with it: what was asked, "
    "what the device had free, what was live and the top site. `d` switches the device the headline "
    "and chart show; on a snapshot, enter on a site shows its full stack. Headless: `htatui memory "
    "PATH` or `htatui report PATH --view memory`."
)


def memory_page_shown(traces: TraceSet | None) -> bool:
    """Whether the Memory page belongs among the views: some rank's trace holds [memory] events."""
    return traces is not None and has_memory_events(traces)


def oom_lines(device_ooms: pl.DataFrame) -> str:
    """The first out-of-memory error of a device as the screen's opening lines (empty without one):
    what was asked, what the device had free, what was live and where most of it was allocated."""
    if device_ooms.height == 0:
        return ""
    oom = device_ooms.row(0, named=True)
    more = f" (1st of {device_ooms.height}, all in the table below)" if device_ooms.height > 1 else ""
    asked, free = oom["requested_bytes"], oom["device_free_bytes"]
    line = (
        f"[b]⚠ OUT OF MEMORY{more}[/b]: asked {byte_size(asked)}, device free {byte_size(free)}, "
        f"live {byte_size(oom['live_bytes'])}"
    )
    if oom["reserved_bytes"] is not None:
        line += f", reserved {byte_size(oom['reserved_bytes'])}"
    if free is not None and asked is not None and free >= asked:
        line += " · free ≥ asked: a memory-fraction cap or fragmentation, not the device's size"
    if oom["top_site"]:
        line += f"\n  most live at: {escape(oom['top_site'])}"
    return line + "\n"


def headline(summary: pl.DataFrame, ooms: pl.DataFrame, device: str) -> str:
    """One device's first OOM, then its peak, end, reserved peak and leak verdict."""
    rows = summary.filter(pl.col("device") == device)
    if rows.height == 0:
        return ""
    row = rows.row(0, named=True)
    verdict = {True: " · grows every step: probable leak", False: " · no steady growth"}.get(row["leak_suspected"], "")
    reserved = row["reserved_peak_bytes"]
    return oom_lines(ooms.filter(pl.col("device") == device)) + (
        f"{device}: peak {byte_size(row['peak_bytes'])} ({row['live_blocks_at_peak']} blocks live) · "
        f"end {byte_size(row['end_bytes'])}"
        + (f" · reserved peak {byte_size(reserved)}" if reserved is not None else "")
        + verdict
    )


def chart_series(series: pl.DataFrame) -> tuple[list[float], list[float], list[float], str]:
    """x (ms from the first event, or the event number), allocated MiB, reserved MiB (nan when
    unknown) and the x label, the highest point of each of CHART_POINTS buckets."""
    timed = series.filter(pl.col("time_us").is_not_null() & (pl.col("seq") >= 0)).sort("seq")
    xlabel, scale = "time (ms)", 1000.0
    if timed.height == 0:
        # Snapshots from before PyTorch recorded times: the x axis is the event number.
        timed = series.filter(pl.col("seq") >= 0).sort("seq").with_columns(time_us=pl.col("seq").cast(pl.Float64))
        xlabel, scale = "event", 1.0
    if timed.height == 0:
        return [], [], [], xlabel
    start = float(timed["time_us"][0])
    span = float(timed["time_us"][-1]) - start
    bucket = ((pl.col("time_us") - start) / span * (CHART_POINTS - 1)).floor() if span > 0 else pl.lit(0.0)
    reduced = (
        timed.with_columns(_bucket=bucket)
        .group_by("_bucket", maintain_order=True)
        .agg(
            t_ms=(pl.col("time_us").first() - start) / scale,
            allocated=pl.col("allocated_bytes").max() / MIB,
            reserved=pl.col("reserved_bytes").max().cast(pl.Float64) / MIB,
        )
    )
    return (
        reduced["t_ms"].to_list(),
        reduced["allocated"].to_list(),
        reduced["reserved"].fill_null(float("nan")).to_list(),
        xlabel,
    )


class MemoryHead(Vertical):
    """The headline and chart of one device (`d` picks the next), drawn from the memory tables."""

    DEFAULT_CSS = """
    MemoryHead {
        height: auto;
        & > .memory-headline { height: auto; padding: 0 1; color: $foreground; }
    }
    """

    def __init__(self) -> None:
        super().__init__(id="memory-head")
        self.memory_tables: Mapping[PageTable, NotedTable] | None = None
        self.device_index = 0

    def compose(self) -> ComposeResult:
        yield Static("", classes="memory-headline", id="memory-headline")
        chart = Chart("Allocated and reserved memory (MiB)", id="memory-chart")
        chart.styles.height = 12  # not the pages' 1fr: the tables below stay in sight
        chart.styles.min_height = 8
        yield chart

    def devices(self) -> list[str]:
        return [] if self.memory_tables is None else self.memory_tables[SUMMARY].frame["device"].to_list()

    @property
    def device(self) -> str | None:
        devices = self.devices()
        return devices[self.device_index % len(devices)] if devices else None

    def say(self, text: str) -> None:
        self.query_one("#memory-headline", Static).update(text)

    def show(self, found: Mapping[PageTable, NotedTable]) -> None:
        """Keep the tables and draw the first CUDA device (else the first)."""
        self.memory_tables = found
        self.device_index = next((i for i, d in enumerate(self.devices()) if "cuda" in d), 0)
        self.redraw()

    def next_device(self) -> None:
        if len(self.devices()) > 1:
            self.device_index = (self.device_index + 1) % len(self.devices())
            self.redraw()

    def redraw(self) -> None:
        found, device, chart = self.memory_tables, self.device, self.query_one("#memory-chart", Chart)
        if found is None or device is None:
            message = None if found is None else found[SUMMARY].message
            self.say(f"{message[:1].upper()}{message[1:]}." if message else "Nothing recorded.")
            chart.show(None, "")
            return
        others = f" · d: next of {len(self.devices())} devices" if len(self.devices()) > 1 else ""
        self.say(headline(found[SUMMARY].frame, found[OOM].frame, device) + others)
        xs, allocated, reserved, xlabel = chart_series(found[SERIES].frame.filter(pl.col("device") == device))
        series = [("allocated", *step_points(xs, allocated), "hta-memory")]
        markers = ["•"]
        if any(not math.isnan(value) for value in reserved):
            series.append(("reserved", *step_points(xs, reserved), "hta-series-1"))
            markers.append("+")
        if allocated:
            # The peak as its own one-point series drawn last, so it is marked on top and named.
            top = max(range(len(allocated)), key=allocated.__getitem__)
            series.append(("peak", [xs[top]], [allocated[top]], "hta-series-2"))
            markers.append("▲")
        chart.title = f"Memory over time · {device}"
        chart.show(lines(series, xlabel=xlabel, ylabel="MiB", markers=markers) if xs else None, "No history recorded.")


class MemoryScreen(PageScreen):
    """The Memory page of a job recorded with profile_memory=True: the registry's memory tables."""

    PAGE: ClassVar[str] = "memory"
    PANES: ClassVar[dict[PageTable, Pane]] = PANES
    VIEW_TITLE: ClassVar[str] = "Memory"
    HELP: ClassVar[str] = MEMORY_HELP

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "next_device", "Device", tooltip="Show the next device", id="memory.device"),
    ]

    def compose_body(self) -> ComposeResult:
        yield MemoryHead()
        for table in PANES:
            yield self.pane(table)

    def draw(self, result: PageResult) -> None:
        self.query_one(MemoryHead).show(result.tables)

    def action_next_device(self) -> None:
        self.query_one(MemoryHead).next_device()


class FramesScreen(ModalScreen[None]):
    """The full stack of one allocation of a site, innermost frame first; esc closes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "close", "Close", id="frames.close"),
    ]

    DEFAULT_CSS = """
    FramesScreen {
        align: center middle;
        & > Vertical { width: 100%; height: 100%; border: round $primary; background: $surface; }
        & .frames-hint { dock: bottom; color: $foreground-muted; padding: 0 1; }
    }
    """

    def __init__(self, site: str, frames: tuple[str, ...]) -> None:
        super().__init__()
        self.site = site
        self.frames = frames

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll(id="frames-scroll"):
                text = "\n".join(escape(frame) for frame in self.frames)
                yield Static(f"[b]{escape(self.site)}[/b]\n{text}", id="frames-text")
            yield Static("innermost frame first · esc closes", classes="frames-hint")

    def on_mount(self) -> None:
        self.query_one("#frames-scroll", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


SnapshotTables = tuple[dict[PageTable, NotedTable], dict[str, tuple[str, ...]]]
"""A snapshot's tables by pane, and the full frames of one allocation per site."""


def snapshot_tables(path: Path) -> SnapshotTables:
    """A recording's tables, as the Memory page shows a job's, plus the allocator's state, and the
    full frames of one allocation per site (worker thread; MemoryInputError when unreadable)."""
    analysis = analyse(read_memory(path))
    made = {
        SUMMARY: tables.summary_table(analysis),
        SITES: tables.sites_table(analysis, None),
        OOM: tables.oom_table(analysis),
        GROWTH: tables.growth_table(analysis),
        SPANS: tables.spans_table(analysis),
        SERIES: tables.series_table(analysis),
        ALLOCATOR: tables.allocator_table(analysis),
    }
    return {table: NotedTable(frame, None) for table, frame in made.items()}, analysis.recording.stacks


class SnapshotScreen(JobRunner["SnapshotTables"], Screen[None]):
    """The whole app for `htatui snapshot.pickle`: one recording, no trace views."""

    AUTO_FOCUS = "ViewTable"
    VIEW_TITLE: ClassVar[str] = "Memory"
    HELP: ClassVar[str] = MEMORY_HELP

    DEFAULT_CSS = """
    SnapshotScreen {
        & TablePane { height: auto; }
        & ViewTable { height: auto; max-height: 12; }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "next_device", "Device", tooltip="Show the next device", id="snapshot.device"),
        Binding("r", "reload", "Reload", tooltip="Read the file again", id="snapshot.reload"),
    ]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.error: str | None = None
        self.stacks: dict[str, tuple[str, ...]] = {}

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f" htatui · memory · {self.path.name}", id="snapshot-title")
            with VerticalScroll(id="memory-body", can_focus=False):
                yield MemoryHead()
                for table, pane in SNAPSHOT_PANES.items():
                    yield TablePane(pane.title, id=pane_id(table), name_on_enter=table != SITES)
        yield FitFooter()

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        self.query_one(MemoryHead).say(f"Reading {self.path.name}…")
        self.start_job("memory", lambda _cancel: snapshot_tables(self.path), "read memory snapshot")

    def job_title(self) -> str:
        return "Memory"

    def job_done(self, job: str, result: SnapshotTables) -> None:
        self.error = None
        found, self.stacks = result
        for table, pane in SNAPSHOT_PANES.items():
            self.query_one(f"#{pane_id(table)}", TablePane).show_table(found[table], pane)
        self.query_one(MemoryHead).show(found)

    def job_failed(self, job: str, error: BaseException) -> None:
        self.error = str(error) if isinstance(error, MemoryInputError) else f"{type(error).__name__}: {error}"
        self.query_one(MemoryHead).say(escape(self.error))
        self.notify(self.error, title="Cannot read the memory recording", severity="error", timeout=10)

    @on(DataTable.RowSelected, f"#{pane_id(SITES)} ViewTable")
    def _site_chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.query_one(f"#{pane_id(SITES)}", TablePane).table.selected_row()
        if row is None:
            return
        frames = self.stacks.get(row["site"])
        if not frames:
            self.notify("No stack was recorded for this site.", title=row["site"], timeout=5)
            return
        self.app.push_screen(FramesScreen(row["site"], frames))

    def action_next_device(self) -> None:
        self.query_one(MemoryHead).next_device()
