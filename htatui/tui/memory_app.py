"""A small App that shows only the memory screen: what `htatui snapshot.pickle` opens."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from htatui.tui import theming
from htatui.tui.screens.memory import SnapshotScreen


class MemoryApp(App[int]):
    """One memory recording; q quits."""

    TITLE = "htatui memory"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="memory_app.quit"),
        Binding(
            "f8", "screenshot", "Screenshot", show=False, tooltip="Save an SVG of the screen", id="memory_app.shot"
        ),
    ]

    def __init__(self, path: Path, *, theme: str | None = None) -> None:
        super().__init__()
        self.path = path
        self._theme_problems: list[str] = []
        loaded = theming.load_themes(theming.themes_dir())
        self._theme_problems.extend(loaded.problems)
        for item in loaded.themes:
            self.register_theme(item)
        fallback = theming.DEFAULT_THEME if theming.DEFAULT_THEME in self.available_themes else "textual-dark"
        if theme and theme not in self.available_themes:
            self._theme_problems.append(f"unknown theme {theme!r}")
            theme = None
        self.theme = theme or fallback

    def get_theme_variable_defaults(self) -> dict[str, str]:
        try:
            return theming.domain_defaults(self.current_theme)
        except Exception:  # noqa: BLE001 - before a theme is set
            return {}

    def get_default_screen(self) -> SnapshotScreen:
        return SnapshotScreen(self.path)

    def on_mount(self) -> None:
        for problem in self._theme_problems:
            self.notify(problem, title="Theme", severity="warning", timeout=8)


def run_memory_app(path: Path, *, theme: str | None = None) -> int:
    """Open the memory screen over one snapshot; 0 after q."""
    app = MemoryApp(path, theme=theme)
    result = app.run(mouse=False)
    if app.return_code is not None:
        return app.return_code
    return int(result or 0)
