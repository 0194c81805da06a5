"""The side-by-side diff screen: base on the left, test on the right, the delta between.

Both jobs load on background thread workers with a progress bar each; the comparison then runs
on a third worker. On top, the headline views (temporal, kernel types, overlap, idle, launch);
below, the per-name table sorted by absolute delta, and bars of the ten largest increases and
decreases (beside the table on wide terminals, behind `b` on narrow ones).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

from htatui.analysis.core.columns import derived_label
from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.diff import compare as diff
from htatui.analysis.diff import summary as diff_summary
from htatui.analysis.diff.compare import DiffOptions, DiffResult, Selection
from htatui.jobs.load import load_traces
from htatui.sources import SourcePath
from htatui.text.diff import side_name
from htatui.trace import LoadCancelled, LoadError, LoadProgress, TraceSet
from htatui.tui.base.breakpoints import preset_breakpoints
from htatui.tui.base.jobs import JobRunner
from htatui.tui.widgets.diff import STATUS_COLORS, DeltaBars, DiffTitle, StyledColumn, theme_color
from htatui.tui.widgets.footer import FitFooter
from htatui.tui.widgets.table_pane import TablePane

STATUS_FILTERS: tuple[str | None, ...] = (
    None,
    "changed",
    "added",
    "removed",
    "slower",
    "faster",
    "unchanged",
)
KIND_FILTERS: tuple[str | None, ...] = (None, "kernel", "op")
SIDES = ("base", "test")


# ---- messages ---------------------------------------------------------------------------


@dataclass
class SideProgress(Message):
    """One more file of a side was read."""

    side: str
    done: int
    total: int


@dataclass(frozen=True)
class DiffComputed:
    """The comparison of both sides (summary None when the headline views failed)."""

    result: DiffResult
    summary: pl.DataFrame | None
    summary_error: str | None


# ---- the screen -------------------------------------------------------------------------


class DiffScreen(JobRunner["TraceSet | DiffComputed"], Screen[None]):
    """Compare two jobs side by side; loads both itself (or takes already loaded traces)."""

    TITLE = "diff"
    VIEW_TITLE: ClassVar[str] = "Diff"
    HELP: ClassVar[str] = (
        "Two jobs side by side: *base* (this job, or the first path) and *test*. On top, the headline "
        "views of both with the change between (Δ = test − base); below, every kernel and operator "
        "name with its total time on each side, sorted by the largest change. Status glyphs: `+` "
        "added, `−` removed, `▲` slower, `▼` faster, `=` unchanged. `i` shows which ranks and "
        "steps are compared; Enter shows a row's full name."
    )
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", tooltip="Cancel loading or close the diff", id="diff.back"),
        Binding("question_mark,f1", "help", "Help", key_display="?", tooltip="This help", id="diff.help"),
        Binding("slash", "filter", "Filter", show=False, tooltip="Filter the names table", id="diff.filter"),
        Binding("c", "cycle_status", "Status", tooltip="Show added, removed, slower, faster…", id="diff.status"),
        Binding("t", "cycle_kind", "Kind", tooltip="Show kernels, CPU ops or both", id="diff.kind"),
        Binding("f", "toggle_short", "Fold", tooltip="Fold template arguments of names", id="diff.fold"),
        Binding("b", "toggle_bars", "Bars", tooltip="Show the bars of the largest changes", id="diff.bars"),
        Binding("i", "describe", "Info", tooltip="Which ranks and steps are compared", id="diff.info"),
    ]

    DEFAULT_CSS = """
    DiffScreen {
        layout: vertical;
        & #diff-title {
            height: 1;
            background: $panel;
            color: $foreground;
            text-style: bold;
        }
        & #diff-state {
            height: 1;
            background: $surface;
            color: $foreground-muted;
        }
        & #diff-details {
            display: none;
            height: auto;
            max-height: 8;
            padding: 0 1;
            background: $surface;
            color: $foreground;
            border-bottom: solid $panel-lighten-2;
        }
        &.-details #diff-details { display: block; }
        & #diff-loading {
            height: auto;
            padding: 1 2;
        }
        & .side-label { height: 1; color: $foreground; }
        & #diff-error { color: $error; height: auto; display: none; }
        &.-failed #diff-error { display: block; }
        & #diff-body { display: none; height: 1fr; }
        &.-ready #diff-body { display: block; }
        &.-ready #diff-loading { display: none; }
        & #headline { height: 9; }
        & #headline ViewTable { height: 1fr; }
        & #diff-lower { height: 1fr; }
        & #names { width: 1fr; height: 1fr; }
        & #names ViewTable { height: 1fr; }
        & #bars { width: 1fr; display: none; }
        &.-wide #bars { display: block; max-width: 60; }
        &.-narrow.-show-bars #bars { display: block; }
        &.-narrow.-show-bars #names { display: none; }
        &.-narrow.-show-bars #headline { display: none; }
    }
    """

    def __init__(
        self,
        base_path: SourcePath,
        test_path: SourcePath,
        options: DiffOptions | None = None,
        *,
        use_cache: bool = True,
        base_traces: TraceSet | None = None,
        test_traces: TraceSet | None = None,
        max_workers: int | None = None,
    ) -> None:
        super().__init__()
        preset_breakpoints(self)
        self.base_path = base_path
        self.test_path = test_path
        self.options = options or DiffOptions()
        self.use_cache = use_cache
        self.max_workers = max_workers
        self.traces: dict[str, TraceSet | None] = {"base": base_traces, "test": test_traces}
        self.result: DiffResult | None = None
        self.summary_frame: pl.DataFrame | None = None
        self.status_filter: str | None = None
        self.kind_filter: str | None = None
        self.failed = False

    # ---- layout -------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield DiffTitle(side_name(self.base_path), side_name(self.test_path))
        yield Static(" loading both sides… (esc cancels)", id="diff-state")
        yield Static("", id="diff-details")
        with Vertical(id="diff-loading"):
            for side, path in (("base", self.base_path), ("test", self.test_path)):
                yield Static(f"{side}: {side_name(path)}", classes="side-label", id=f"{side}-label")
                yield ProgressBar(total=None, show_eta=False, id=f"{side}-progress")
            yield Static("", id="diff-error")
        with Vertical(id="diff-body"):
            yield TablePane("headline views: base │ Δ │ test", row_limit=500, id="headline")
            with Horizontal(id="diff-lower"):
                yield TablePane("names", row_limit=1000, id="names")
                yield DeltaBars(widget_id="bars")
        yield FitFooter()

    def on_mount(self) -> None:
        for side, path in (("base", self.base_path), ("test", self.test_path)):
            preloaded = self.traces[side]
            if preloaded is not None:
                self._mark_loaded(side, preloaded)
            else:
                self._load_side(side, path)
        self._maybe_compare()

    # ---- loading ------------------------------------------------------------------------
    def _load_side(self, side: str, path: SourcePath) -> None:
        def load(cancel: threading.Event) -> TraceSet:
            def progress(update: LoadProgress) -> None:
                if not cancel.is_set():
                    self.post_message(SideProgress(side, update.done, update.total))

            return load_traces(
                [path], use_cache=self.use_cache, progress=progress, cancel=cancel, max_workers=self.max_workers
            )

        self.start_job(f"load-{side}", load, "load a diff side")

    def job_done(self, job: str, result: TraceSet | DiffComputed) -> None:
        if isinstance(result, TraceSet):
            self._mark_loaded(job.removeprefix("load-"), result)
            self._maybe_compare()
        else:
            self._show_comparison(result)

    def job_failed(self, job: str, error: BaseException) -> None:
        if isinstance(error, LoadCancelled):
            return
        side = f"{job.removeprefix('load-')}: " if job.startswith("load-") else ""
        reason = str(error) if isinstance(error, LoadError | ValueError) else f"{type(error).__name__}: {error}"
        self._fail(f"{side}{reason}")

    @on(SideProgress)
    def _progress(self, message: SideProgress) -> None:
        bar = self.query_one(f"#{message.side}-progress", ProgressBar)
        bar.update(total=message.total, progress=message.done)

    def _mark_loaded(self, side: str, traces: TraceSet) -> None:
        self.traces[side] = traces
        bar = self.query_one(f"#{side}-progress", ProgressBar)
        bar.update(total=1, progress=1)
        ranks = format_ranges(traces.rank_ids)
        label = self.query_one(f"#{side}-label", Static)
        label.update(f"{side}: {side_name(self.base_path if side == 'base' else self.test_path)} · ranks {ranks}")
        for problem in traces.problems:
            self.notify(str(problem), title=f"{side}: skipped a file", severity="warning", timeout=8)

    def _fail(self, text: str) -> None:
        self.failed = True
        self.add_class("-failed")
        self.query_one("#diff-error", Static).update(text)
        self.query_one("#diff-state", Static).update(" failed · esc closes")

    # ---- comparing ----------------------------------------------------------------------
    def _maybe_compare(self) -> None:
        base, test = self.traces["base"], self.traces["test"]
        if base is None or test is None or self.failed:
            return
        self.query_one("#diff-state", Static).update(" comparing…")
        options = self.options

        def compare(_cancel: threading.Event) -> DiffComputed:
            result = diff.compare(base, test, options)
            summary: pl.DataFrame | None = None
            summary_error: str | None = None
            try:
                summary = diff_summary.summary(base, test, options)
            except Exception as exc:  # noqa: BLE001 - the names table is still worth showing
                summary_error = f"{type(exc).__name__}: {exc}"
            return DiffComputed(result, summary, summary_error)

        self.start_job("compare", compare, "compare")

    def _show_comparison(self, message: DiffComputed) -> None:
        self.result = message.result
        self.summary_frame = message.summary
        self.add_class("-ready")
        self._show_state(message.result.selection)
        self._show_headline(message.summary, message.summary_error)
        self._show_names()
        self.query_one(DeltaBars).show(message.result.frame)
        self.query_one("#names", TablePane).table.focus()

    def _show_state(self, selection: Selection) -> None:
        def side_text(side: diff.Side) -> str:
            ranks = ",".join(map(str, side.ranks))
            steps = "all events" if side.steps is None else f"steps {format_ranges(side.steps)}"
            return f"r{ranks} · {steps}"

        text = f" base {side_text(selection.base)}  ↔  test {side_text(selection.test)}"
        flags = [
            name
            for name, on_ in (
                ("short names", self.options.short_names),
                ("HTA compat", self.options.hta_compat),
            )
            if on_
        ]
        if flags:
            text += "  · " + ", ".join(flags)
        if selection.notes:
            text += "  · i: details"
        self.query_one("#diff-state", Static).update(Text(text, no_wrap=True, overflow="ellipsis"))

    def _delta_styles(self) -> tuple[str, str]:
        return (theme_color(self, "warning"), theme_color(self, "primary"))

    def _show_headline(self, summary: pl.DataFrame | None, error: str | None) -> None:
        pane = self.query_one("#headline", TablePane)
        if summary is None:
            pane.show(pl.DataFrame(), empty=f"The headline views could not be computed: {error}")
            return
        labels = [f"{view} · {derived_label(metric)}" for view, metric in summary.select("view", "metric").iter_rows()]
        frame = summary.with_columns(label=pl.Series(labels, dtype=pl.Utf8))
        width = max(24, min(44, self.size.width - 50))
        columns = [
            StyledColumn("label", "view · metric", "text", width=width, sortable=False),
            StyledColumn("base", "base", "whole", width=11, priority=0),
            StyledColumn("delta", "Δ", "delta", width=11, signed_styles=self._delta_styles(), priority=0),
            StyledColumn("test", "test", "whole", width=11, priority=0),
        ]
        pane.show(frame, columns, empty="No headline numbers (no GPU activity on either side).")

    def _status_styles(self) -> tuple[tuple[str, str], ...]:
        styles = []
        for status, variable in STATUS_COLORS.items():
            color = theme_color(self, variable)
            bold = "bold " if status in ("added", "removed") else ""
            styles.append((status, f"{bold}{color}".strip()))
        return tuple(styles)

    def names_frame(self) -> pl.DataFrame:
        """The per-name rows after the status and kind filters, with the sort key."""
        if self.result is None:
            return pl.DataFrame(schema=diff.DIFF_SCHEMA)
        frame = self.result.frame
        if self.status_filter == "changed":
            frame = frame.filter(pl.col("status") != "unchanged")
        elif self.status_filter is not None:
            frame = frame.filter(pl.col("status") == self.status_filter)
        if self.kind_filter is not None:
            frame = frame.filter(pl.col("kind") == self.kind_filter)
        return frame.with_columns(abs_delta_us=pl.col("delta_us").abs())

    def _show_names(self) -> None:
        pane = self.query_one("#names", TablePane)
        frame = self.names_frame()
        parts = ["names"]
        if self.status_filter:
            parts.append(self.status_filter)
        if self.kind_filter:
            parts.append(self.kind_filter)
        pane.table.title = " · ".join(parts)
        available = self.size.width if not self.has_class("-wide") else self.size.width - 60
        width = max(18, min(60, available - 49))
        signed = self._delta_styles()
        columns = [
            StyledColumn("name", "name", "text", width=width),
            StyledColumn("status", " ", "status", width=1, sortable=False, styles=self._status_styles()),
            StyledColumn("base_total_us", "base µs", "us", width=9),
            StyledColumn("delta_us", "Δ µs", "delta_us", width=9, signed_styles=signed),
            StyledColumn("delta_pct", "Δ %", "delta_pct", width=7, signed_styles=signed),
            StyledColumn("test_total_us", "test µs", "us", width=9),
            StyledColumn("kind", "kind", "text", width=6),
            StyledColumn("base_count", "base n", "count", width=8),
            StyledColumn("delta_count", "Δ n", "count", width=7),
            StyledColumn("test_count", "test n", "count", width=8),
        ]
        pane.show(
            frame,
            columns,
            empty="No names match (c cycles the status filter, t the kind).",
            sort="abs_delta_us",
            descending=True,
        )

    def on_resize(self) -> None:
        if self.result is not None:
            self._show_names()

    def on_screen_suspend(self) -> None:
        """A notice raised here (a full name, a skipped file) never outlives the screen."""
        self.app.clear_notifications()

    # ---- actions ------------------------------------------------------------------------
    def action_back(self) -> None:
        if not self.has_class("-ready") and not self.failed:
            for job in ("load-base", "load-test", "compare"):
                self.cancel_job(job)
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.app.exit(return_code=130 if not self.has_class("-ready") and not self.failed else 0)

    def action_filter(self) -> None:
        if self.result is not None:
            self.query_one("#names", TablePane).open_filter()

    def action_cycle_status(self) -> None:
        position = STATUS_FILTERS.index(self.status_filter)
        self.status_filter = STATUS_FILTERS[(position + 1) % len(STATUS_FILTERS)]
        if self.result is not None:
            self._show_names()

    def action_cycle_kind(self) -> None:
        position = KIND_FILTERS.index(self.kind_filter)
        self.kind_filter = KIND_FILTERS[(position + 1) % len(KIND_FILTERS)]
        if self.result is not None:
            self._show_names()

    def action_toggle_short(self) -> None:
        self.options = dataclasses.replace(self.options, short_names=not self.options.short_names)
        self._maybe_compare()

    def action_toggle_bars(self) -> None:
        self.toggle_class("-show-bars")

    def action_describe(self) -> None:
        """Show or hide the details of what is compared (a pane of this screen, not a notice)."""
        if self.result is not None:
            details = self.query_one("#diff-details", Static)
            details.update(Text(self.result.description))
            self.toggle_class("-details")

    def action_help(self) -> None:
        from htatui.tui.screens.help import HelpScreen

        if self.app.screen is self:
            self.app.push_screen(HelpScreen(self))
