"""What screens, widgets and the palette need from the app, as protocols, so none imports the app.

The app satisfies both; screens and widgets check `isinstance(self.app, …)` against these
(runtime-checkable) protocols, which keeps `tui.app` the only module that knows every screen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from textual.screen import Screen
from textual.signal import Signal

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.registry import PageTable
from htatui.trace import TraceSet


@runtime_checkable
class AnalysisHost(Protocol):
    """The loaded job, the rank selection every view follows, and the labels of the status bar."""

    traces: TraceSet | None
    load_notes: tuple[str, ...]
    """What loading noted (the status line counts them; N lists them)."""
    scope_signal: Signal[Scope]
    """Published with the new scope whenever the ranks, steps or mode change."""

    @property
    def selected_ranks(self) -> tuple[int, ...] | None:
        """The scope's ranks (None: every rank)."""
        ...

    def scope(self) -> Scope:
        """The ranks, steps and mode every view shows."""
        ...

    def view_order(self) -> list[tuple[str, str]]: ...

    def open_timeline(
        self,
        rank: int | None = None,
        start_us: float | None = None,
        end_us: float | None = None,
        name: str | None = None,
    ) -> None:
        """Show the timeline of a rank around a time window (µs, on the views' time base), the row
        of the event called `name` there selected."""

    async def show_evidence(self, page: str, table: PageTable | None, row: Mapping[str, object]) -> None:
        """Open a page with one of its tables' rows highlighted (the Diagnosis page's enter)."""

    @property
    def trace_label(self) -> str: ...

    @property
    def ranks_label(self) -> str: ...

    @property
    def steps_label(self) -> str:
        """The scope's steps in words (as `report` titles say them)."""
        ...


@runtime_checkable
class KeymapHost(Protocol):
    """The user's keymap, so the help and the palette name the keys that work."""

    @property
    def keymap(self) -> Mapping[str, str]:
        """Binding id → keys (comma-separated), as Textual applies them."""
        ...


@runtime_checkable
class PaletteHost(AnalysisHost, Protocol):
    """What the command palette offers: views, ranks, exports, themes and app actions."""

    def theme_names(self) -> list[str]: ...

    def set_ranks(self, ranks: Iterable[int] | None) -> None: ...

    def set_steps(self, steps: Steps) -> None: ...

    def available_steps(self) -> list[int]: ...

    def export_commands(self, screen: Screen[Any]) -> list[tuple[str, str, Callable[[], object]]]: ...

    def action_pick_ranks(self) -> None: ...

    def action_help(self) -> None: ...

    def action_save_screenshot(self) -> None: ...

    def action_diff(self) -> None: ...

    def action_notes(self) -> None: ...

    def action_query(self) -> None: ...

    def run_action(self, action: Any, default_namespace: Any = None) -> Any: ...

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...
