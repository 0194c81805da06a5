"""A small App that shows only the memory screen: what `htatui snapshot.pickle` opens."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.binding import Binding, BindingType

from htatui.tui.screens.memory import SnapshotScreen
from htatui.tui.themed_app import ThemedApp


class MemoryApp(ThemedApp):
    """One memory recording; q quits."""

    TITLE = "htatui memory"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="memory_app.quit"),
        Binding(
            "f8", "screenshot", "Screenshot", show=False, tooltip="Save an SVG of the screen", id="memory_app.shot"
        ),
    ]

    def __init__(self, path: Path, *, theme: str | None = None) -> None:
        super().__init__(theme)
        self.path = path

    def get_default_screen(self) -> SnapshotScreen:
        return SnapshotScreen(self.path)


def run_memory_app(path: Path, *, theme: str | None = None) -> int:
    """Open the memory screen over one snapshot; 0 after q."""
    app = MemoryApp(path, theme=theme)
    result = app.run(mouse=False)
    if app.return_code is not None:
        return app.return_code
    return int(result or 0)
