"""Memory: GPU memory over time, what is live at the peak by allocation site, and the allocator state.

Two ways in: `htatui snapshot.pickle` opens `SnapshotScreen` straight away (htatui/tui/memory_app.py),
and a trace folder whose traces hold `[memory]` events shows `MemoryScreen` among the views. Both
draw the same `MemoryBody` from a `MemoryResult` computed on a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

from htatui.analysis.core.scope import Scope
from htatui.analysis.core.stored import stored_memory_events
from htatui.analysis.memory import usage as memory
from htatui.trace import TraceSet
from htatui.trace.memory_inputs import MemoryInputError, read_memory, read_rank_traces
from htatui.tui.base.jobs import JobRunner
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import Chart, lines, step_points
from htatui.tui.widgets.footer import FitFooter
from htatui.tui.widgets.table import Column
from htatui.tui.widgets.table_pane import TablePane

CHART_POINTS = 400
"""The series is reduced to this many time buckets, keeping each bucket's highest point."""

MIB = 1024.0 * 1024.0

SITE_COLUMNS = [
    Column("site", "allocation site", "text", width=44),
    Column("mib", "MiB", "float"),
    Column("count", "blocks", "int"),
    Column("share_pct", "share %", "pct"),
]

ALLOCATOR_COLUMNS = [
    Column("device", "device", "text", width=7),
    Column("stream", "stream", "int", width=6),
    Column("segments", "segments", "int"),
    Column("reserved_mib", "reserved MiB", "float"),
    Column("allocated_mib", "allocated MiB", "float"),
    Column("inactive_mib", "inactive MiB", "float"),
    Column("largest_free_mib", "largest free MiB", "float"),
    Column("fragmentation_pct", "inactive %", "pct"),
]

EVENT_COLUMNS = [
    Column("what", "what", "text", width=24),
    Column("name", "where", "text", width=30),
    Column("mib", "MiB", "float"),
    Column("detail", "detail", "text", width=40, cut_end=True),
]

NO_MEMORY_EVENTS = (
    "No [memory] events in this trace: record with torch.profiler.profile(profile_memory=True), "
    "or open a CUDA memory snapshot (htatui snapshot.pickle)."
)


@dataclass(frozen=True)
class MemoryResult:
    """What the memory screens draw, for one recording (all devices)."""

    source: str
    kind: str
    devices: tuple[str, ...]
    headline: dict[str, str]
    """Per device: one line with peak, end, reserved and the leak verdict."""
    chart: dict[str, tuple[list[float], list[float], list[float], str]]
    """Per device: x (ms from the first event, or event number), allocated MiB, reserved MiB (nan
    when unknown), the x label."""
    sites: dict[str, pl.DataFrame]
    allocator: pl.DataFrame
    events: dict[str, pl.DataFrame]
    """Per device: OOMs, growth points and per-step peaks as rows of one table."""
    stacks: dict[str, tuple[str, ...]]
    """The full frames of one allocation per site (innermost first)."""


def human_bytes(value: float | None) -> str:
    """1536 → '1.5 KiB': binary units, as PyTorch's allocator reports them."""
    if value is None:
        return "–"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.2f} {unit}"
        size /= 1024
    return f"{size:,.2f} TiB"  # pragma: no cover - the loop returns at GiB


def memory_result(path: Path | list[tuple[int, Path]]) -> MemoryResult:
    """Read and analyse a recording, or a job's rank files (worker thread); MemoryInputError when
    it cannot be read."""
    recording = read_memory(path) if isinstance(path, Path) else read_rank_traces(path)
    analysis = memory.analyse(recording)
    growth = memory.growth(analysis)
    ooms = memory.ooms(analysis)
    spans = memory.span_peaks(analysis)
    devices = tuple(analysis.summary["device"].to_list())
    headline: dict[str, str] = {}
    chart: dict[str, tuple[list[float], list[float], list[float], str]] = {}
    sites: dict[str, pl.DataFrame] = {}
    events: dict[str, pl.DataFrame] = {}
    for row in analysis.summary.iter_rows(named=True):
        device = row["device"]
        verdict = ""
        if device in growth.leaking:
            verdict = " · grows every step: probable leak" if growth.leaking[device] else " · no steady growth"
        reserved = row["reserved_peak_bytes"]
        headline[device] = oom_lines(ooms.filter(pl.col("device") == device)) + (
            f"{device}: peak {human_bytes(row['peak_bytes'])} ({row['live_blocks_at_peak']} blocks live) · "
            f"end {human_bytes(row['end_bytes'])}"
            + (f" · reserved peak {human_bytes(reserved)}" if reserved is not None else "")
            + verdict
        )
        chart[device] = _chart_series(analysis.series.filter(pl.col("device") == device))
        sites[device] = analysis.sites_at_peak(device).with_columns(mib=pl.col("bytes") / MIB)
        events[device] = _event_rows(device, ooms, growth, spans)
    allocator = memory.allocator_state(analysis.recording).with_columns(
        [
            (pl.col(f"{name}_bytes") / MIB).alias(f"{name}_mib")
            for name in ("reserved", "allocated", "inactive", "largest_free")
        ]
    )
    return MemoryResult(
        str(recording.path),
        analysis.recording.kind,
        devices,
        headline,
        chart,
        sites,
        allocator,
        events,
        analysis.recording.stacks,
    )


def oom_lines(device_ooms: pl.DataFrame) -> str:
    """The first out-of-memory error of a device as the screen's opening lines (empty without one):
    what was asked, what the device had free, what was live and where most of it was allocated."""
    if device_ooms.height == 0:
        return ""
    oom = device_ooms.row(0, named=True)
    more = f" (1st of {device_ooms.height}, all in the table below)" if device_ooms.height > 1 else ""
    asked, free = oom["requested_bytes"], oom["device_free_bytes"]
    line = (
        f"[b]⚠ OUT OF MEMORY{more}[/b]: asked {human_bytes(asked)}, device free {human_bytes(free)}, "
        f"live {human_bytes(oom['live_bytes'])}"
    )
    if oom["reserved_bytes"] is not None:
        line += f", reserved {human_bytes(oom['reserved_bytes'])}"
    if free is not None and asked is not None and free >= asked:
        line += " · free ≥ asked: a memory-fraction cap or fragmentation, not the device's size"
    if oom["top_site"]:
        line += f"\n  most live at: {escape(oom['top_site'])}"
    return line + "\n"


def _chart_series(series: pl.DataFrame) -> tuple[list[float], list[float], list[float], str]:
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


def _event_rows(device: str, ooms: pl.DataFrame, growth: memory.Growth, spans: pl.DataFrame) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    for oom in ooms.filter(pl.col("device") == device).iter_rows(named=True):
        rows.append(
            {
                "what": "OUT OF MEMORY",
                "name": oom["top_site"] or "",
                "mib": oom["requested_bytes"] / MIB,
                "detail": f"{human_bytes(oom['requested_bytes'])} asked; device free "
                f"{human_bytes(oom['device_free_bytes'])}, live {human_bytes(oom['live_bytes'])}",
            }
        )
    for point in growth.points.filter(pl.col("device") == device).iter_rows(named=True):
        change = point["growth_bytes"]
        rows.append(
            {
                "what": "live at step start",
                "name": point["point"],
                "mib": point["live_bytes"] / MIB,
                "detail": ""
                if change is None
                else f"{'+' if change >= 0 else '-'}{human_bytes(abs(change))} since the step before",
            }
        )
    for span in spans.filter(pl.col("device") == device).iter_rows(named=True):
        rows.append(
            {
                "what": f"peak in {span['kind']}",
                "name": span["name"],
                "mib": span["peak_bytes"] / MIB,
                "detail": f"{human_bytes(span['start_bytes'])} → {human_bytes(span['end_bytes'])}",
            }
        )
    return pl.DataFrame(rows, schema={"what": pl.Utf8(), "name": pl.Utf8(), "mib": pl.Float64(), "detail": pl.Utf8()})


class MemoryBody(VerticalScroll, can_focus=False):
    """The chart, the sites at the peak, step events and the allocator state for one device."""

    DEFAULT_CSS = """
    MemoryBody {
        & > .memory-headline { height: auto; padding: 0 1; color: $foreground; }
        & > Chart { height: 12; min-height: 8; }
        & > TablePane { height: auto; max-height: 16; }
    }
    """

    def __init__(self) -> None:
        super().__init__(id="memory-body")
        self.result: MemoryResult | None = None
        self.device_index = 0

    def compose(self) -> ComposeResult:
        yield Static("", classes="memory-headline", id="memory-headline")
        yield Chart("Allocated and reserved memory (MiB)", id="memory-chart")
        yield TablePane("Live at the peak, by allocation site", id="memory-sites", name_on_enter=False)
        yield TablePane("OOMs, steps and peaks", id="memory-events")
        yield TablePane("Allocator state at the snapshot", id="memory-allocator")

    @property
    def device(self) -> str | None:
        if self.result is None or not self.result.devices:
            return None
        return self.result.devices[self.device_index % len(self.result.devices)]

    def show(self, result: MemoryResult) -> None:
        self.result = result
        self.device_index = next((i for i, d in enumerate(result.devices) if d.startswith("cuda")), 0)
        self.redraw()

    def show_message(self, text: str) -> None:
        self.result = None
        self.query_one("#memory-headline", Static).update(text)
        self.query_one("#memory-chart", Chart).show(None, "")
        for pane in self.query(TablePane):
            pane.show(pl.DataFrame(), None, empty="")

    @on(DataTable.RowSelected, "#memory-sites ViewTable")
    def _site_chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.query_one("#memory-sites", TablePane).table.selected_row()
        if self.result is None or row is None:
            return
        frames = self.result.stacks.get(row["site"])
        if not frames:
            self.notify("No stack was recorded for this site.", title=row["site"], timeout=5)
            return
        self.app.push_screen(FramesScreen(row["site"], frames))

    def next_device(self) -> None:
        if self.result is not None and len(self.result.devices) > 1:
            self.device_index = (self.device_index + 1) % len(self.result.devices)
            self.redraw()

    def redraw(self) -> None:
        result, device = self.result, self.device
        if result is None or device is None:
            self.show_message("Nothing recorded.")
            return
        others = f" · d: next of {len(result.devices)} devices" if len(result.devices) > 1 else ""
        self.query_one("#memory-headline", Static).update(result.headline[device] + others)
        xs, allocated, reserved, xlabel = result.chart[device]
        series = [("allocated", *step_points(xs, allocated), "hta-memory")]
        markers = ["•"]
        if any(value == value for value in reserved):
            series.append(("reserved", *step_points(xs, reserved), "hta-series-1"))
            markers.append("+")
        if allocated:
            # The peak as its own one-point series drawn last, so it is marked on top and named.
            top = max(range(len(allocated)), key=allocated.__getitem__)
            series.append(("peak", [xs[top]], [allocated[top]], "hta-series-2"))
            markers.append("▲")
        chart = self.query_one("#memory-chart", Chart)
        chart.title = f"Memory over time · {device}"
        chart.show(lines(series, xlabel=xlabel, ylabel="MiB", markers=markers) if xs else None, "No history recorded.")
        self.query_one("#memory-sites", TablePane).show(
            result.sites[device], SITE_COLUMNS, empty="Nothing live at the peak.", sort="mib"
        )
        self.query_one("#memory-events", TablePane).show(result.events[device], EVENT_COLUMNS, empty="", sort=None)
        allocator = result.allocator.filter(pl.col("device") == device)
        self.query_one("#memory-allocator", TablePane).show(allocator, ALLOCATOR_COLUMNS, empty="", sort=None)


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
                lines = "\n".join(escape(frame) for frame in self.frames)
                yield Static(f"[b]{escape(self.site)}[/b]\n{lines}", id="frames-text")
            yield Static("innermost frame first · esc closes", classes="frames-hint")

    def on_mount(self) -> None:
        self.query_one("#frames-scroll", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


def memory_rank_files(traces: TraceSet, scope: Scope) -> list[tuple[int, Path]]:
    """The chosen ranks' trace files that hold [memory] events (local files only)."""
    files = []
    for rank in scope.ranks or tuple(sorted(traces.ranks)):
        trace = traces.ranks.get(rank)
        if trace is not None and has_memory_rows(trace.events):
            if not isinstance(trace.path, Path):
                raise MemoryInputError(f"{trace.path}: the memory view reads local files only")
            files.append((rank, trace.path))
    if not files:
        raise MemoryInputError(NO_MEMORY_EVENTS)
    return files


def has_memory_rows(events: pl.DataFrame) -> bool:
    return bool((events["name"].cast(pl.Utf8) == "[memory]").any())


def memory_page_shown(traces: TraceSet | None) -> bool:
    """Whether the Memory page belongs among the views: some rank's trace holds [memory] events."""
    if traces is None:
        return False
    # Kept on the loaded job, as prepare() keeps its results: view_order() asks on every redraw.
    shown = traces.derived.get("memory_page_shown")
    if shown is None:
        stored = stored_memory_events(traces)
        shown = stored > 0 if stored is not None else any(has_memory_rows(r.events) for r in traces.ranks.values())
        traces.derived["memory_page_shown"] = shown
    return bool(shown)


MEMORY_HELP = (
    "GPU memory over time from the trace's `[memory]` events (or a CUDA memory snapshot: "
    "`htatui snapshot.pickle`): allocated and reserved bytes with the peak, what was live at "
    "the peak grouped by allocation site (for traces, the top-level annotation it was "
    "allocated in), live memory at each step start (rising at every step: a probable leak) "
    "and the peak per step and annotation. A snapshot taken at an out-of-memory error leads "
    "with it: what was asked, what the device had free, what was live and the top site. "
    "Enter on a site shows its full stack; `d` switches device. Headless: `htatui memory PATH`."
)


class MemoryScreen(ViewScreen["MemoryResult | str"]):
    """The Memory page of a trace folder recorded with profile_memory=True."""

    VIEW_TITLE: ClassVar[str] = "Memory"
    HELP: ClassVar[str] = MEMORY_HELP

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "next_device", "Device", tooltip="Show the next device", id="memory.device"),
    ]

    def compose_body(self) -> ComposeResult:
        yield MemoryBody()

    def analyse(self, traces: TraceSet, scope: Scope) -> MemoryResult | str:
        try:
            return memory_result(memory_rank_files(traces, scope))
        except MemoryInputError as exc:
            return str(exc)

    def show_result(self, result: MemoryResult | str) -> None:
        body = self.query_one(MemoryBody)
        if isinstance(result, str):
            body.show_message(result)
        else:
            body.show(result)

    def action_next_device(self) -> None:
        self.query_one(MemoryBody).next_device()


class SnapshotScreen(JobRunner, Screen[None]):
    """The whole app for `htatui snapshot.pickle`: one recording, no trace views."""

    AUTO_FOCUS = "ViewTable"
    VIEW_TITLE: ClassVar[str] = "Memory"
    HELP: ClassVar[str] = MEMORY_HELP

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "next_device", "Device", tooltip="Show the next device", id="snapshot.device"),
        Binding("r", "reload", "Reload", tooltip="Read the file again", id="snapshot.reload"),
    ]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f" htatui · memory · {self.path.name}", id="snapshot-title")
            yield MemoryBody()
        yield FitFooter()

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        body = self.query_one(MemoryBody)
        body.show_message(f"Reading {self.path.name}…")
        self.start_job("memory", lambda _cancel: memory_result(self.path), "read memory snapshot")

    def job_title(self) -> str:
        return "Memory"

    def job_done(self, job: str, result: Any) -> None:
        self.error = None
        self.query_one(MemoryBody).show(result)

    def job_failed(self, job: str, error: BaseException) -> None:
        self.error = str(error) if isinstance(error, MemoryInputError) else f"{type(error).__name__}: {error}"
        self.query_one(MemoryBody).show_message(self.error)
        self.notify(self.error, title="Cannot read the memory recording", severity="error", timeout=10)

    def action_next_device(self) -> None:
        self.query_one(MemoryBody).next_device()
