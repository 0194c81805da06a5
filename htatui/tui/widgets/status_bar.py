"""The two top lines: the view tabs, and the trace, ranks, steps and analysis state."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from htatui.tui.base.host import AnalysisHost


class ViewTabs(Widget):
    """`1 Temporal  2 Idle  …` with the current view highlighted; the number keys switch."""

    COMPONENT_CLASSES = {"view-tabs--current"}

    DEFAULT_CSS = """
    ViewTabs {
        height: 1;
        background: $panel;
        color: $foreground-muted;
        & > .view-tabs--current {
            background: $primary;
            color: $background;
            text-style: bold;
        }
    }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def render(self) -> Text:
        app = self.app
        views = app.view_order() if isinstance(app, AnalysisHost) else []
        current = self.get_component_rich_style("view-tabs--current")
        labels = [(f"{number % 10} {title}", mode == self.current) for number, (mode, title) in enumerate(views, 1)]
        roomy = sum(len(label) + 2 for label, _ in labels) <= self.size.width
        text = Text(no_wrap=True, overflow="ellipsis")
        for label, is_current in labels:
            if roomy:
                text.append(f" {label} ", style=current if is_current else "")
            else:
                text.append(label, style=current if is_current else "")
                text.append(" ")
        return text


class StatusBar(Widget):
    """Trace name, selected ranks, the profiler steps in use, and what the view is doing."""

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        background: $surface;
        color: $foreground;
    }
    """

    state: reactive[str] = reactive("")
    """What the view's analysis is doing: 'computing…', 'ready', an error."""

    def render(self) -> Text:
        app = self.app
        text = Text(no_wrap=True, overflow="ellipsis")
        if isinstance(app, AnalysisHost):
            text.append(f" {app.trace_label}", style="bold")
            text.append(f" │ ranks {app.ranks_label}")
            skipped = len(app.traces.problems) if app.traces is not None else 0
            if skipped:
                # Lasts after the toasts fade, before the steps so a narrow line keeps it.
                text.append(f" │ ⚠ {skipped} file{'s' if skipped > 1 else ''} skipped (N)", style="bold")
            text.append(f" │ {app.steps_label}")
            if app.load_notes:
                count = len(app.load_notes)
                text.append(f" │ {count} load note{'s' if count > 1 else ''} (N)", style="italic")
        if self.state:
            text.append(f" │ {self.state}", style="italic")
        return text
