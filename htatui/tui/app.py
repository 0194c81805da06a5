"""HtaTuiApp: the views as modes, the rank selection every view follows, keys, themes, palette."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, Screen
from textual.signal import Signal

from htatui.analysis.core.describe import missing_steps, scope_steps
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.core.scope import Scope, Steps, describe
from htatui.analysis.diff.compare import DiffOptions
from htatui.analysis.export import traces as export
from htatui.analysis.health import load_notes
from htatui.analysis.registry import PAGES, PageTable
from htatui.sources import SourcePath
from htatui.trace import TraceSet
from htatui.tui.base.messages import TracesLoaded
from htatui.tui.commands import HtaCommands
from htatui.tui.screens.counters import CountersScreen
from htatui.tui.screens.critical_path import CriticalPathScreen
from htatui.tui.screens.diagnosis import DiagnosisScreen
from htatui.tui.screens.diff import DiffScreen
from htatui.tui.screens.export_modal import ExportModal
from htatui.tui.screens.help import HelpScreen
from htatui.tui.screens.idle import IdleScreen
from htatui.tui.screens.kernels import KernelsScreen
from htatui.tui.screens.launch import LaunchScreen
from htatui.tui.screens.loading import LoadingScreen
from htatui.tui.screens.memory import MemoryScreen, memory_page_shown
from htatui.tui.screens.modules import ModulesScreen
from htatui.tui.screens.ops import OpsScreen
from htatui.tui.screens.overlap import OverlapScreen
from htatui.tui.screens.page import PageScreen
from htatui.tui.screens.path_prompt import PathPrompt
from htatui.tui.screens.patterns import PatternsScreen
from htatui.tui.screens.query import QueryScreen
from htatui.tui.screens.rank_picker import RankPicker
from htatui.tui.screens.ranks import RanksScreen
from htatui.tui.screens.temporal import TemporalScreen
from htatui.tui.screens.timeline import TimelineScreen
from htatui.tui.themed_app import ThemedApp
from htatui.tui.widgets.status_bar import LETTER_KEYS, page_keys


@dataclass(frozen=True)
class Settings:
    """What the command line decided: the traces, the cache, and the analysis mode."""

    paths: tuple[SourcePath, ...]
    use_cache: bool = True
    hta_compat: bool = False
    steps: Steps = field(default_factory=Steps)
    max_workers: int | None = None
    rules: Rules = SHIPPED_RULES
    """The user's rule files (the command line's, from the environment): every scope's."""


SCREENS: dict[str, type[Screen[Any]]] = {
    "diagnosis": DiagnosisScreen,
    "temporal": TemporalScreen,
    "idle": IdleScreen,
    "kernels": KernelsScreen,
    "overlap": OverlapScreen,
    "launch": LaunchScreen,
    "counters": CountersScreen,
    "ops": OpsScreen,
    "patterns": PatternsScreen,
    "ranks": RanksScreen,
    "memory": MemoryScreen,
    "modules": ModulesScreen,
    "critical-path": CriticalPathScreen,
}
"""The screen that draws each page of the registry (htatui/analysis/registry.py PAGES)."""

VIEW_SCREENS: tuple[tuple[str, str, type[Screen[Any]]], ...] = tuple(
    (page.id, page.title, SCREENS[page.id]) for page in PAGES
)
"""(mode, title, screen) in the registry's page order; the app opens on the first (Diagnosis)."""

VIEWS: tuple[tuple[str, str], ...] = tuple((mode, title) for mode, title, _screen in VIEW_SCREENS)


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker while sys.stderr is still the real one.

    The loader parses ranks in spawned processes; the tracker they need is started on first
    use with sys.stderr's fileno, which is -1 once Textual captures output ("bad value(s) in
    fds_to_keep").
    """
    if sys.platform != "win32":
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()


class HtaTuiApp(ThemedApp):
    """Views over one loaded job; the traces load inside the app so the UI shows at once."""

    TITLE = "htatui"
    CSS_PATH = "app.tcss"
    COMMANDS: ClassVar = {HtaCommands}
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {
        mode: screen for mode, _title, screen in VIEW_SCREENS
    }

    BINDINGS: ClassVar[list[BindingType]] = [
        *(
            Binding(
                {**page_keys(), **LETTER_KEYS}[mode],
                f"view('{mode}')",
                title,
                show=False,
                tooltip=f"Open the {title} view",
                id=f"view.{mode}",
            )
            for mode, title in VIEWS
            if mode in page_keys() or mode in LETTER_KEYS
        ),
        Binding(
            "left_square_bracket",
            "cycle_view(-1)",
            "Prev view",
            show=False,
            tooltip="Previous view",
            id="app.prev_view",
        ),
        Binding(
            "right_square_bracket",
            "cycle_view(1)",
            "Next view",
            show=False,
            tooltip="Next view",
            id="app.next_view",
        ),
        Binding("p", "pick_ranks", "Ranks", tooltip="Choose the ranks every view shows", id="app.ranks"),
        Binding("d", "diff", "Diff", tooltip="Compare this job with another one", id="app.diff"),
        Binding("N", "notes", "Notes", show=False, tooltip="What loading noted and skipped", id="app.notes"),
        Binding("question_mark,f1", "help", "Help", key_display="?", tooltip="This help", id="app.help"),
        Binding(
            "ctrl+p",
            "command_palette",
            "palette",
            show=False,
            priority=True,
            tooltip="Command palette",
            id="app.palette",
        ),
        Binding("colon", "command_palette", "palette", show=False, tooltip="Command palette", id="app.palette_colon"),
        Binding(
            "f8",
            "save_screenshot",
            "Screenshot",
            show=False,
            tooltip="Save an SVG of the screen",
            id="app.screenshot",
        ),
        Binding("q", "quit", "Quit", tooltip="Quit (closes a dialog first)", id="app.quit"),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        theme: str | None = None,
        traces: TraceSet | None = None,
    ) -> None:
        self.settings = settings
        self.traces: TraceSet | None = None
        self.current_scope = Scope(steps=settings.steps, hta_compat=settings.hta_compat, rules=settings.rules)
        """The ranks, steps and mode every view shows: one value, replaced whole and published."""
        self.scope_text = ""
        self._preloaded = traces
        self.load_notes: tuple[str, ...] = ()
        super().__init__(theme)
        _start_resource_tracker()
        self.scope_signal: Signal[Scope] = Signal(self, "scope")

    # ---- startup ------------------------------------------------------------------------
    def get_default_screen(self) -> Screen[None]:
        return LoadingScreen(
            list(self.settings.paths),
            use_cache=self.settings.use_cache,
            max_workers=self.settings.max_workers,
            preloaded=self._preloaded,
            rules=self.settings.rules,
        )

    async def on_traces_loaded(self, message: TracesLoaded) -> None:
        self.traces = message.traces
        self._update_steps()
        await self.switch_mode(VIEWS[0][0])
        for problem in message.traces.problems:
            self.notify(str(problem), title="Skipped a file", severity="warning", timeout=10)
        missing = missing_steps(message.traces, CommonOptions(self.scope()))
        if missing:
            self.notify(missing, title="Steps", severity="warning", timeout=10)
        # Notes (ranks taken from file order, each file's warnings, what is odd across ranks) go to
        # the status line and N, not over the panes.
        self.load_notes = (
            message.notes if message.notes is not None else load_notes(message.traces, self.settings.rules)
        )

    # ---- the selection every view follows -----------------------------------------------
    def scope(self) -> Scope:
        return self.current_scope

    @property
    def selected_ranks(self) -> tuple[int, ...] | None:
        return self.current_scope.ranks

    def set_scope(self, scope: Scope) -> None:
        """Show every view for `scope`: the views subscribed to `scope_signal` recompute."""
        if scope == self.current_scope:
            return
        self.current_scope = scope
        self._update_steps()
        self.scope_signal.publish(scope)

    def set_ranks(self, ranks: Iterable[int] | None) -> None:
        """Select ranks (None or every rank means all); each view recomputes when it shows."""
        if self.traces is None:
            return
        chosen = None if ranks is None else tuple(sorted(set(ranks) & set(self.traces.rank_ids)))
        if chosen == () and ranks is not None:
            self.notify("Pick at least one rank.", severity="warning")
            return
        if chosen is not None and len(chosen) == len(self.traces.rank_ids):
            chosen = None
        self.set_scope(dataclasses.replace(self.current_scope, ranks=chosen))

    def set_steps(self, steps: Steps) -> None:
        """Count other ProfilerSteps in every view (the palette's steps: entries, `--steps`)."""
        if self.traces is None or steps == self.current_scope.steps:
            return
        chosen = dataclasses.replace(self.current_scope, steps=steps)
        missing = missing_steps(self.traces, CommonOptions(chosen))
        if missing:
            self.notify(missing, title="Steps", severity="warning", timeout=10)
        self.set_scope(chosen)

    def available_steps(self) -> list[int]:
        """Every ProfilerStep number of the chosen ranks."""
        if self.traces is None:
            return []
        found = scope_steps(self.traces, CommonOptions(Scope(ranks=self.selected_ranks)))
        return sorted({step for rank_steps in found.values() for step in rank_steps.available})

    def _update_steps(self) -> None:
        if self.traces is not None:
            self.scope_text = describe(scope_steps(self.traces, CommonOptions(self.scope())), self.scope())

    @property
    def trace_label(self) -> str:
        names = [p.name or str(p) for p in self.settings.paths]
        return names[0] + (f" +{len(names) - 1}" if len(names) > 1 else "") if names else "htatui"

    @property
    def ranks_label(self) -> str:
        if self.traces is None:
            return "…"
        every = self.traces.rank_ids
        if self.selected_ranks is None:
            return f"all ({len(every)})" if len(every) != 1 else f"{every[0]}"
        return f"{format_ranges(self.selected_ranks, separator=',')} ({len(self.selected_ranks)}/{len(every)})"

    @property
    def steps_label(self) -> str:
        return self.scope_text if self.traces is not None else "…"

    def view_order(self) -> list[tuple[str, str]]:
        memory = memory_page_shown(self.traces)
        return [(mode, title) for mode, title in VIEWS if mode in self.MODES and (mode != "memory" or memory)]

    # ---- actions ------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("view", "cycle_view", "pick_ranks") and self.traces is None:
            return False
        return True

    async def action_view(self, mode: str) -> None:
        if self.traces is not None and mode in self.MODES and self.current_mode != mode:
            while len(self.screen_stack) > 1:
                self.pop_screen()
            await self.switch_mode(mode)

    async def action_cycle_view(self, step: int) -> None:
        order = [mode for mode, _title in self.view_order()]
        position = order.index(self.current_mode) if self.current_mode in order else -1
        await self.action_view(order[(position + step) % len(order)])

    def action_pick_ranks(self) -> None:
        if self.traces is None or isinstance(self.screen, RankPicker):
            return
        self.push_screen(RankPicker(self.traces.rank_ids, self.selected_ranks), self._ranks_picked)

    def _ranks_picked(self, ranks: tuple[int, ...] | None) -> None:
        if ranks is not None:
            self.set_ranks(ranks)

    def action_diff(self) -> None:
        """Ask for the second job, then open the side-by-side diff over this one (the base)."""
        if self.traces is None or isinstance(self.screen, (ModalScreen, DiffScreen)):
            return
        base_traces = self.traces

        def compare(test_path: SourcePath | None) -> None:
            if test_path is None:
                return
            options = DiffOptions(dataclasses.replace(self.current_scope, ranks=None))
            base_path = self.settings.paths[0]
            self.push_screen(
                DiffScreen(base_path, test_path, options, use_cache=self.settings.use_cache, base_traces=base_traces)
            )

        self.push_screen(PathPrompt("Compare with another job", "This job is the base; give the test job."), compare)

    async def show_evidence(self, page: str, table: PageTable | None, row: Mapping[str, object]) -> None:
        """Open `page` with `table`'s row whose columns hold `row`'s values highlighted."""
        if self.traces is None or page not in self.MODES:
            return
        if page == "memory" and not memory_page_shown(self.traces):
            self.notify("This job has no [memory] events.", severity="warning")
            return
        await self.action_view(page)
        screen = self.screen
        if isinstance(screen, PageScreen) and table is not None:
            screen.highlight_row(table, row)

    def open_timeline(
        self,
        rank: int | None = None,
        start_us: float | None = None,
        end_us: float | None = None,
        name: str | None = None,
    ) -> None:
        """Push the timeline over the current view, at a rank and time window when given (the row
        of the event called `name` selected)."""
        if self.traces is not None and not isinstance(self.screen, (ModalScreen, TimelineScreen)):
            self.push_screen(TimelineScreen(rank, start_us, end_us, name))

    def action_query(self) -> None:
        """`:query`: SQL over the job's tables for the app's scope, the result as a table."""
        if self.traces is None:
            self.notify("No traces loaded yet.", title="Query", severity="warning")
            return
        self.push_screen(QueryScreen(self.traces, self.scope(), f"ranks {self.ranks_label} · {self.steps_label}"))

    def action_notes(self) -> None:
        from htatui.tui.screens.notes import NotesScreen

        if self.traces is not None and not isinstance(self.screen, ModalScreen):
            self.push_screen(NotesScreen(self.load_notes, [str(p) for p in self.traces.problems]))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_save_screenshot(self) -> None:
        try:
            path = self.save_screenshot()
        except OSError as exc:
            self.notify(f"Cannot save the screenshot: {exc}", severity="error")
            return
        self.notify(f"Saved {path}", title="Screenshot")

    def export_commands(self, screen: Screen[Any]) -> list[tuple[str, str, Callable[[], object]]]:
        """(title, help, callback) of the exports the palette offers from `screen`."""
        commands: list[tuple[str, str, Callable[[], object]]] = [
            (
                "export: counters-augmented trace…",
                "Queue length and memory bandwidth, for Perfetto (key e in Counters)",
                self.action_export_counters,
            ),
        ]
        if isinstance(screen, PatternsScreen):
            commands.append(
                (
                    "export: patterns overlay…",
                    "Mark the frequent patterns in a copy of the trace (key e)",
                    screen.action_export_patterns,
                )
            )
        if isinstance(screen, CriticalPathScreen):
            commands.append(
                (
                    "export: critical-path overlay…",
                    "Mark the rank's critical path in a copy of its trace (key e)",
                    screen.action_export_path,
                )
            )
        return commands

    def action_export_counters(self) -> None:
        traces = self.traces
        if traces is None:
            return
        options = CommonOptions(self.scope())

        def job(
            ranks: tuple[int, ...] | None,
            folder: Path,
            force: bool,
            progress: Callable[[int, int, Path], None],
        ) -> list[Path]:
            return export.export_counters(traces, ranks, folder, force, progress, options=options)

        self.push_screen(
            ExportModal(
                "Export counters-augmented traces",
                job,
                loaded_ranks=traces.rank_ids,
                ranks=self.selected_ranks,
                folder=Path.cwd(),
                about="A copy of each rank's trace with HTA's queue-length and memory-bandwidth counters "
                "added, named <trace>_with_counters.json(.gz); open it in Perfetto.",
            )
        )

    async def action_quit(self) -> None:
        """Close an open dialog first; quit from a view."""
        if isinstance(self.screen, ModalScreen):
            self.screen.dismiss(None)
            return
        self.exit(return_code=0)
