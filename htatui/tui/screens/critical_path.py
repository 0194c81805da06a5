"""Critical path: what bounds the step, on one rank's path or on the job's path across ranks.

The bars are the time on the path by what bounds it (`report --view critical-path`), the path is
its edges in order (`--edges`), and the events are the path's events by their time on it
(`--top-events`); `m` shows the job's path instead (`--job-edges`, `--job`), and `e` writes the
rank's trace with its path marked (`htatui export critical-path`).

The page follows one step, as HTA's analysis follows one iteration: the scope's last complete
step at first (`report --steps N` for that step), `,` and `.` the step before or after, `a` every
step of the scope (`report`'s default; slow and large on a long trace, a graph of every event).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis.core.prepare import rank_steps_of
from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.scope import Scope, Steps, last_complete_step
from htatui.analysis.export.critical_path import export_critical_path, overlay_file_name
from htatui.analysis.registry import PageTable
from htatui.analysis.views import critical_path
from htatui.trace import TraceSet
from htatui.tui.screens.export_modal import ExportModal
from htatui.tui.screens.page import PageResult, PageScreen, Pane, pane_id
from htatui.tui.widgets.chart import BarRows, Chart, Series
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.status_bar import StatusBar
from htatui.tui.widgets.table import ColumnHint
from htatui.tui.widgets.table_pane import TablePane, sentence

SUMMARY = PageTable("critical-path")
EDGES = PageTable("critical-path", "edges")
TOP = PageTable("critical-path", "top-events")
JOB_TOP = PageTable("critical-path", "job")
JOB_EDGES = PageTable("critical-path", "job-edges")
WHAT_IF = PageTable("critical-path", "what-if")
JOB_WHAT_IF = PageTable("critical-path", "job-what-if")

RANK_PANES = (TOP, WHAT_IF, EDGES)
JOB_PANES = (JOB_TOP, JOB_WHAT_IF, JOB_EDGES)


def edge_kind(edge_type: str) -> str:
    """'critical_path_kernel_launch_delay' → 'kernel_launch_delay'."""
    return edge_type.removeprefix("critical_path_")


PATH_COLUMNS = {
    "name": ColumnHint(width=22, short_names=True, priority=0),
    "edge_type": ColumnHint(width=12, transform=edge_kind, priority=0),
    "duration_us": ColumnHint(priority=0),
    "bound_by": ColumnHint(width=18, priority=0),
    "end_us": ColumnHint(priority=2),
    "index": ColumnHint(priority=3),
}
EVENT_COLUMNS = {
    "name": ColumnHint(width=24, short_names=True, priority=0),
    "time_us": ColumnHint(priority=0),
    "bound_by": ColumnHint(width=23, priority=0),
    "index": ColumnHint(priority=3),
}
WHAT_IF_COLUMNS = {
    "group": ColumnHint(width=10, priority=0),
    "key": ColumnHint(width=24, short_names=True, priority=0),
    "rank": ColumnHint(priority=1),
    "saved_us": ColumnHint(priority=0),
    "saved_pct": ColumnHint(priority=0),
    "detail": ColumnHint(width=30, cut_end=True, priority=2),
}
NO_PATH = "No critical path on this rank."
PICK = "Change the rank, annotation or instance above, or the step (, . a)."


@dataclass(frozen=True)
class StepResult(PageResult):
    """The page's tables for one step of the scope, and the steps it can move between."""

    step: int | None = None
    """The step followed; None: every step of the app's scope (or an annotation's window)."""
    steps: tuple[int, ...] = ()
    """The scope's steps on the followed rank."""


PATH_ROWS = 1000
"""Edges drawn in a path pane (sorting and `/` still reach every edge): on the real 541 MB trace
5,000 drawn rows took 2.3 s of the page's 3.4 s and ~60 MiB held while the app runs."""


def _path_pane(title: str) -> Pane:
    return Pane(title, NO_PATH, sort="step", descending=False, columns=PATH_COLUMNS, row_limit=PATH_ROWS, hint=PICK)


def _events_pane(title: str) -> Pane:
    return Pane(title, NO_PATH, sort="time_us", columns=EVENT_COLUMNS, hint=PICK)


def _what_if_pane(title: str) -> Pane:
    # The table's own order: the ranks at the median's pace first, then by the time saved.
    return Pane(title, NO_PATH, columns=WHAT_IF_COLUMNS, hint=PICK)


class CriticalPathScreen(PageScreen):
    PAGE: ClassVar[str] = "critical-path"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        TOP: _events_pane("Events on the path by their time on it (t: timeline)"),
        WHAT_IF: _what_if_pane("What if: the step replayed with each faster"),
        EDGES: _path_pane("The path, edge by edge (t: timeline)"),
        JOB_TOP: _events_pane("The job's path by rank and name (t: the first instance)"),
        JOB_WHAT_IF: _what_if_pane("What if: the job's step replayed with each faster, each rank at the median"),
        JOB_EDGES: _path_pane("The job's path across ranks, edge by edge (t: timeline)"),
    }
    VIEW_TITLE: ClassVar[str] = "Critical path"
    HELP: ClassVar[str] = (
        "What bounds the step: the chain of dependencies that accounts for every µs of it (the step "
        "model; `--hta-compat`: HTA's critical path). The header says how much of the step the path "
        "covers and the replay (the graph simulated with the measured times); the bars give the "
        "time on the path by what bounds it (*cpu_bound*, *host_gap*: untraced host time inside an "
        "annotation, *gpu_compute_bound*, communication, launch and kernel-to-kernel overhead, "
        "*collective_wait*: waiting for another rank, *unexplained_wait*). The events sum each "
        "event's time on the path; the what-ifs replay the step with a name, an annotation or a "
        "bound type faster (`--faster-pct`), and on the job each rank at the other ranks' median "
        "pace, phase by phase; the path lists its edges in order. The page follows **one step**: "
        "the scope's last complete step at first, named in the header; `,` and `.` the step before "
        "and after, `a` every step of the scope at once (slow on a long trace). "
        "**rank** picks the rank (empty: the first chosen), "
        "**annotation** a window instead of the steps (an event whose name contains it) and "
        "**instance** which of those events. `m` shows the job's path, every chosen rank joined at "
        "their collectives, by rank and name; `t` opens the timeline at the highlighted edge, event "
        "or name (its first instance); `e` writes the rank's trace with HTA's path marked for "
        "Perfetto (`htatui export critical-path`)."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "m",
            "toggle_job",
            "Rank/job",
            tooltip="The rank's path or the job's path across ranks",
            id="critical-path.job",
        ),
        Binding(
            "a",
            "toggle_steps",
            "Step/all",
            show=False,  # the status line names it, with , and .
            tooltip="One step's path or the path through every step of the scope",
            id="critical-path.steps",
        ),
        Binding(
            "full_stop",
            "step(1)",
            "Next step",
            show=False,
            tooltip="The next step's path",
            id="critical-path.next_step",
        ),
        Binding(
            "comma",
            "step(-1)",
            "Previous step",
            show=False,
            tooltip="The previous step's path",
            id="critical-path.prev_step",
        ),
        Binding(
            "e",
            "export_path",
            "Export",
            tooltip="Write the rank's trace with its path marked",
            id="critical-path.export",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.job_path = False
        self.one_step = True
        """One step of the scope (the default) or all of them (`a`)."""
        self.step: int | None = None
        """The step picked with `,` and `.`; None: the scope's last complete step."""

    @property
    def options(self) -> critical_path.CriticalPathOptions:
        found = self.view_options["critical-path"]
        assert isinstance(found, critical_path.CriticalPathOptions)
        return found

    def mode_name(self) -> str:
        return self.PAGE

    def option_values(self) -> Hashable:
        return (super().option_values(), self.one_step, self.step)

    def analyse(self, traces: TraceSet, scope: Scope) -> PageResult:
        """The tables for the step followed: the app's scope narrowed to it (`report --steps N`)."""
        steps, step = self.followed_step(traces, scope)
        narrowed = scope if step is None else replace(scope, steps=Steps.of([step]))
        found = super().analyse(traces, narrowed)
        return StepResult(found.tables, narrowed, step=step, steps=steps)

    def followed_step(self, traces: TraceSet, scope: Scope) -> tuple[tuple[int, ...], int | None]:
        """The scope's steps on the followed rank, and the one to follow (None: the whole scope, as
        with `a`, an annotation's window, or a rank without steps)."""
        options = replace(self.options, scope=scope)
        rank = critical_path.chosen_rank(traces, options)
        if rank is None:
            return (), None
        steps = rank_steps_of(traces, rank, scope)
        if not self.one_step or options.annotation or not steps.used:
            return steps.used, None
        if self.step in steps.used:
            return steps.used, self.step
        default = steps if scope.steps == Steps() else rank_steps_of(traces, rank, replace(scope, steps=Steps()))
        return steps.used, last_complete_step(steps, default)

    def show_result(self, result: PageResult) -> None:
        super().show_result(result)
        self.query_one(StatusBar).steps = step_header(result)

    def action_toggle_steps(self) -> None:
        self.one_step = not self.one_step
        self.request_analysis()

    def action_step(self, delta: int) -> None:
        """Follow the step `delta` away from the one shown (from every step: the one last followed)."""
        result = self.result if isinstance(self.result, StepResult) else None
        if self.options.annotation:
            self.notify("The annotation names the window; clear it to follow a step.", severity="warning")
            return
        if result is None or not result.steps:
            self.notify("No ProfilerStep on this rank in the scope.", severity="warning")
            return
        if self.one_step and result.step is not None:
            position = result.steps.index(result.step) + delta
            if not 0 <= position < len(result.steps):
                self.notify(f"Step {result.step} is the scope's {'last' if delta > 0 else 'first'}.")
                return
            self.step = result.steps[position]
        self.one_step = True
        self.request_analysis()

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("critical-path", "rank", "annotation", "instance")
        yield Chart("Time on the path by what bounds it", id="critical-path-chart")
        for table in (*RANK_PANES, *JOB_PANES):
            yield self.pane(table)

    def on_mount(self) -> None:
        super().on_mount()
        self._show_mode()

    def draw(self, result: PageResult) -> None:
        chart = self.query_one("#critical-path-chart", Chart)
        if self.job_path:
            output = result.output("critical-path", "job-edges")
            summary = critical_path.summarise(output.frame)
            chart.title = f"The job's {coverage_line(output.message)} (m: one rank's)"
        else:
            output = result.output("critical-path")
            summary = output.frame
            chart.title = f"The rank's {coverage_line(output.message)} (m: the job's)"
        if summary.height == 0:
            chart.show(None, sentence(output.message or NO_PATH))
            return
        notes = [f"{pct:5.1f}% {time / 1000:,.2f} ms" for time, pct in summary.select("time_us", "pct").iter_rows()]
        chart.show(
            BarRows(
                summary["bound_by"].to_list(),
                [Series("time", summary["time_us"].to_list(), "hta-series-1")],
                notes=notes,
            )
        )

    def _show_mode(self) -> None:
        for table in RANK_PANES:
            self.query_one(f"#{pane_id(table)}", TablePane).display = not self.job_path
        for table in JOB_PANES:
            self.query_one(f"#{pane_id(table)}", TablePane).display = self.job_path

    def action_toggle_job(self) -> None:
        self.job_path = not self.job_path
        self._show_mode()
        if self.result is not None:
            self.draw(self.result)
        self.focus_first_table()

    def focus_first_table(self) -> None:
        """The first shown table with rows (the other mode's panes are hidden, not empty)."""
        for pane in self.query(TablePane):
            if pane.display and not pane.has_class("-empty"):
                pane.table.focus()
                return

    def timeline_target(self) -> tuple[int | None, float | None, float | None]:
        """An edge row opens at its own span; an event row at that event (by its index on the rank)."""
        pane = self._focused_pane()
        row = pane.table.selected_row() if pane is not None else None
        traces = self.hta.traces
        if traces is not None and row and row.get("start_us") is None and row.get("index") is not None:
            span = (
                event_span(traces.ranks[row["rank"]].events, int(row["index"])) if row["rank"] in traces.ranks else None
            )
            if span is not None:
                return int(row["rank"]), *span
        return super().timeline_target()

    def action_export_path(self) -> None:
        traces = self.hta.traces
        if traces is None:
            return
        # The path shown: the step followed, not every step of the app's scope.
        shown = self.result.scope if self.result is not None else None
        options = replace(self.options, scope=shown or self.hta.scope())
        rank = critical_path.chosen_rank(traces, options)
        if rank is None:
            self.notify(f"Rank {options.rank} is not loaded.", severity="warning")
            return
        options = replace(options, rank=rank)
        name = overlay_file_name(traces.ranks[rank].path)

        def job(
            _ranks: tuple[int, ...] | None,
            folder: Path,
            force: bool,
            _progress: Callable[[int, int, Path], None],
        ) -> list[Path]:
            return [export_critical_path(traces, options, folder / name, force)[0]]

        self.app.push_screen(
            ExportModal(
                "Export the critical-path overlay",
                job,
                loaded_ranks=traces.rank_ids,
                ranks=(rank,),
                folder=Path.cwd(),
                ask_ranks=False,
                about=f"Rank {rank}: a copy of its trace named {name} where the path's events get "
                "args.critical = 1 and its dependency, launch and sync edges are flow arrows (HTA's "
                "overlay); open it in Perfetto.",
            )
        )


def coverage_line(message: str | None) -> str:
    """'path 16.4 ms of a 16.4 ms step (100.0 %) · …' from a table's sentence ('path by what
    bounds it' in compat mode, where the sentence is HTA's)."""
    if message and message.startswith("path "):
        return message.split("; ")[0]
    return "path by what bounds it"


def step_header(result: PageResult) -> str:
    """'step 7 of 1-8 (, . another · a all)' for the status line; empty (the app's steps) over every step."""
    if not isinstance(result, StepResult) or result.step is None:
        return ""
    return f"step {result.step} of {format_ranges(result.steps, separator=',')} (, . another · a all)"


def event_span(events: pl.DataFrame, index: int) -> tuple[float, float] | None:
    """(start, end) µs of the rank's event at file index `index`."""
    found = events.filter(pl.col("index") == index).select("ts", "end").head(1)
    if found.height == 0:
        return None
    return float(found["ts"][0]), float(found["end"][0])
