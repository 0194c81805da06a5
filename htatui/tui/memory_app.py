"""A small App that shows only the memory screen: what `htatui snapshot.pickle` opens."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen

from htatui.tui.screens.help import HelpScreen
from htatui.tui.screens.memory import SnapshotScreen
from htatui.tui.themed_app import ThemedApp


class MemoryApp(ThemedApp):
    """One memory recording; ? helps, ctrl+p or : opens the palette, q quits."""

    TITLE = "htatui memory"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "help", "Help", key_display="?", tooltip="This help", id="memory_app.help"),
        Binding("colon", "command_palette", "palette", show=False, tooltip="Command palette", id="memory_app.palette"),
        Binding("q", "quit", "Quit", tooltip="Quit (closes a dialog first)", id="memory_app.quit"),
        Binding(
            "f8", "screenshot", "Screenshot", show=False, tooltip="Save an SVG of the screen", id="memory_app.shot"
        ),
    ]

    def __init__(self, path: Path, *, theme: str | None = None) -> None:
        super().__init__(theme)
        self.path = path

    def get_default_screen(self) -> SnapshotScreen:
        return SnapshotScreen(self.path)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    async def action_quit(self) -> None:
        """Close an open dialog (help, a stack) first; quit from the memory screen."""
        if isinstance(self.screen, ModalScreen):
            self.screen.dismiss(None)
            return
        self.exit(return_code=0)


def run_memory_app(path: Path, *, theme: str | None = None) -> int:
    """Open the memory screen over one snapshot; 0 after q."""
    app = MemoryApp(path, theme=theme)
    result = app.run(mouse=False)
    if app.return_code is not None:
        return app.return_code
    return int(result or 0)
