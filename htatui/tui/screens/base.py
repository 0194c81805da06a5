"""ViewScreen: the one pattern every view follows for running its analysis in the background.

A screen shows one page of the registry (`analysis/registry.py` PAGES): registered tables only,
each made as `report` makes it for the app's scope and the page's knob values. request_analysis()
→ the screen's "analysis" job (htatui/tui/base/jobs.py: a thread worker, exclusive per screen) runs
`analyse()` inside `cancellable` (Esc stops it between ranks and tables) → `JobDone` with the
request id and a `PageResult` → `show_result()` fills each table's pane and `draw()` the rest on
the main thread. A result whose request id is not the latest is dropped, and a failure becomes
a notification.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Hashable
from typing import ClassVar, Generic, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen

from htatui.analysis.core.allocators import release
from htatui.analysis.core.cancel import cancellable
from htatui.analysis.core.memo import derived_keys, forget_large
from htatui.analysis.core.scope import Scope
from htatui.trace import TraceSet
from htatui.tui.base.breakpoints import preset_breakpoints
from htatui.tui.base.host import AnalysisHost
from htatui.tui.base.jobs import JobRunner
from htatui.tui.widgets.chart import Chart
from htatui.tui.widgets.footer import FitFooter
from htatui.tui.widgets.status_bar import StatusBar, ViewTabs
from htatui.tui.widgets.table_pane import TablePane

ResultT = TypeVar("ResultT")
"""What a view's analysis returns to draw."""

KEEP_DERIVED_BYTES = 32 * 1024 * 1024
"""A left view keeps what its analysis derived on the job up to this size a value (a step list,
a small table); the large frames (a filtered copy of the events, an op tree, a path's graph) are
made again when a view needs them, so the app after every page holds what the first one did."""


class Body(VerticalScroll, can_focus=False):
    """The view's panes, scrolled so the focused one is in sight (tab moves between them)."""


class ViewScreen(JobRunner[ResultT], Screen[None], Generic[ResultT]):
    """A view: its own widgets and analysis worker; follows the app's scope. Registry pages
    are `PageScreen`s (page.py); the timeline and the memory page draw their own results."""

    VIEW_TITLE: ClassVar[str] = ""
    HELP: ClassVar[str] = ""
    """One paragraph on what the view measures, shown on the help screen."""

    AUTO_FOCUS = "ViewTable"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", tooltip="Filter the focused table", id="view.filter"),
        Binding("r", "rerun", "Re-run", show=False, tooltip="Run the analysis again", id="view.rerun"),
        Binding("escape", "cancel_analysis", "Cancel", show=False, tooltip="Cancel the analysis", id="view.cancel"),
        Binding("z", "zoom", "Zoom", show=False, tooltip="Maximize or restore the focused pane", id="view.zoom"),
        Binding("t", "open_timeline", "Timeline", show=False, tooltip="Timeline at the row's time", id="view.timeline"),
    ]

    def __init__(self) -> None:
        super().__init__()
        preset_breakpoints(self)
        # A new screen mounts under the app's CSS as it is: marked current, it spares the two full
        # reparses and restyles that Textual's mode switch makes for a screen it counts as stale.
        with contextlib.suppress(RuntimeError):  # NoActiveAppError: made outside an app
            self._css_update_count = self.app._css_update_count
        self.request_id = 0
        self._requested_key: Hashable | None = None
        self._shown_key: Hashable | None = None
        self._derived: set[Hashable] = set()
        """What this view's analyses added to the job's derived values (`TraceSet.derived`)."""

    @property
    def hta(self) -> AnalysisHost:
        assert isinstance(self.app, AnalysisHost)
        return self.app

    # ---- layout -------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield ViewTabs(self.mode_name())
        yield StatusBar()
        with Body(id="body"):
            yield from self.compose_body()
        yield FitFooter()

    def compose_body(self) -> ComposeResult:
        """The view's own widgets."""
        yield from ()

    def mode_name(self) -> str:
        return type(self).__name__.removesuffix("Screen").lower()

    # ---- what to compute ----------------------------------------------------------------
    def option_values(self) -> Hashable:
        """The view's own knobs; a change means the result must be computed again."""
        return None

    def analyse(self, traces: TraceSet, scope: Scope) -> ResultT:
        """Run the view's analysis (on a worker thread, so no widget access here)."""
        raise NotImplementedError

    def show_result(self, result: ResultT) -> None:
        """Draw the result (main thread)."""
        raise NotImplementedError

    def analysis_key(self) -> Hashable:
        return (self.hta.scope(), self.option_values())

    # ---- the worker pattern -------------------------------------------------------------
    def on_mount(self) -> None:
        self.hta.scope_signal.subscribe(self, self._scope_changed)

    def on_unmount(self) -> None:
        # A signal's subscription holds the screen (its callback is a bound method) until the next
        # publish: a popped timeline kept its ~90 MB index alive while the app ran.
        self.hta.scope_signal.unsubscribe(self)

    def on_screen_resume(self) -> None:
        self.query_one(StatusBar).refresh()
        self.query_one(ViewTabs).refresh()
        if self.hta.traces is not None and self.analysis_key() != self._shown_key:
            if self.analysis_key() != self._requested_key or not self.analysis_running:
                self.request_analysis()

    def on_screen_suspend(self) -> None:
        """A notice raised in a view (a full name, a copy) never outlives it, nor its large derived frames."""
        self.app.clear_notifications()
        self.forget_derived()

    def forget_derived(self) -> None:
        """Drop the large values this view's analyses derived on the job (its tables stay shown),
        and hand the memory they held back to the system (`release`, on a worker thread)."""
        traces = self.hta.traces
        if traces is not None and self._derived:
            if forget_large(traces, self._derived, KEEP_DERIVED_BYTES):
                self.release_later()
        self._derived = set()

    def release_later(self) -> None:
        """Hand the memory just let go of back to the system (`release`), on a worker thread."""
        self.app.run_worker(release, thread=True, group="release", exit_on_error=False)

    def _scope_changed(self, _scope: Scope) -> None:
        self.query_one(StatusBar).refresh()
        if self.is_current:
            self.request_analysis()

    @property
    def analysis_running(self) -> bool:
        return self.job_running("analysis")

    def request_analysis(self) -> None:
        """Start the analysis for the current ranks and options; an older run is superseded."""
        traces = self.hta.traces
        if traces is None:
            return
        self._requested_key = self.analysis_key()
        self.set_state("computing… (esc cancels)")
        if self._shown_key is None:
            self.query_one(Body).loading = True
        scope = self.hta.scope()

        def work(cancel_event: threading.Event) -> ResultT:
            before = set(derived_keys(traces))
            try:
                with cancellable(cancel_event):
                    return self.analyse(traces, scope)
            finally:
                self._derived.update(key for key in derived_keys(traces) if key not in before)
                # What the analysis freed (its intermediate frames and arrays) goes back now,
                # not after the allocators' own delay: the page's RSS is what it holds.
                release()

        self.request_id = self.start_job("analysis", work, "view analysis")

    def job_done(self, job: str, result: ResultT) -> None:
        self.query_one(Body).loading = False
        if not self.is_current:  # finished after the view was left
            self.forget_derived()
        self._shown_key = self._requested_key
        try:
            self.show_result(result)
        except Exception as exc:  # noqa: BLE001 - a drawing bug must not take the app down
            self.set_state("could not draw the result")
            self.notify(f"{self.VIEW_TITLE}: {type(exc).__name__}: {exc}", title="Display failed", severity="error")
            self.log.error(exc)
            return
        self.set_state("")
        if self.focused is None:
            self.focus_first_table()

    def job_title(self) -> str:
        return self.VIEW_TITLE

    def job_failed(self, job: str, error: BaseException) -> None:
        self._shown_key = None
        self.query_one(Body).loading = False
        self.set_state("analysis failed · r re-runs")
        super().job_failed(job, error)

    def focus_first_table(self) -> None:
        """Give the focus to the first table that has rows (if any)."""
        for pane in self.query(TablePane):
            if not pane.has_class("-empty"):
                pane.table.focus()
                return

    def set_state(self, text: str) -> None:
        self.query_one(StatusBar).state = text

    # ---- actions ------------------------------------------------------------------------
    def action_rerun(self) -> None:
        self._shown_key = None
        self.request_analysis()

    def action_cancel_analysis(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        if self.cancel_job("analysis"):
            self._requested_key = None
            self.query_one(Body).loading = False
            self.set_state("cancelled · r re-runs")

    def action_filter(self) -> None:
        pane = self._focused_pane()
        if pane is not None:
            pane.open_filter()

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            self.maximize(self.focused, container=False)

    def _focused_pane(self) -> TablePane | None:
        focused = self.focused
        if focused is not None:
            for node in focused.ancestors_with_self:
                if isinstance(node, TablePane):
                    return node
        panes = [p for p in self.query(TablePane) if p.display and not p.has_class("-empty")]
        return panes[0] if panes else None

    def timeline_target(self) -> tuple[int | None, float | None, float | None]:
        """(rank, start_us, end_us) of the highlighted row for `t` (see timeline_events.row_target)."""
        from htatui.analysis.timeline.events import row_target

        pane = self._focused_pane()
        row = pane.table.selected_row() if pane is not None else None
        return row_target(self.hta.traces, row) if self.hta.traces is not None else (None, None, None)

    def timeline_name(self) -> str | None:
        """The name of the event the highlighted row stands for (the timeline selects its row)."""
        from htatui.analysis.timeline.events import row_event_name

        pane = self._focused_pane()
        return row_event_name(pane.table.selected_row() if pane is not None else None)

    def action_open_timeline(self) -> None:
        self.hta.open_timeline(*self.timeline_target(), name=self.timeline_name())

    def charts(self) -> list[Chart]:
        return list(self.query(Chart))
