"""A small App that shows only the diff screen: what `htatui diff BASE TEST` opens."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.theme import BUILTIN_THEMES

from htatui.analysis.diff import DiffOptions
from htatui.sources import SourcePath
from htatui.tui import theming
from htatui.tui.screens.diff import DiffScreen


class DiffApp(App[int]):
    """Loads both jobs and compares them; q quits, esc cancels the load or quits."""

    TITLE = "htatui diff"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="diff_app.quit"),
        Binding(
            "f8",
            "screenshot",
            "Screenshot",
            show=False,
            tooltip="Save an SVG of the screen",
            id="diff_app.shot",
        ),
    ]

    def __init__(
        self,
        base: SourcePath,
        test: SourcePath,
        options: DiffOptions | None = None,
        *,
        use_cache: bool = True,
        theme: str | None = None,
        max_workers: int | None = None,
    ) -> None:
        super().__init__()
        self.base = base
        self.test = test
        self.options = options or DiffOptions()
        self.use_cache = use_cache
        self.max_workers = max_workers
        self._theme_problems: list[str] = []
        self._register_themes(theme)

    def _register_themes(self, requested: str | None) -> None:
        loaded = theming.load_themes(theming.themes_dir())
        self._theme_problems.extend(loaded.problems)
        for theme in loaded.themes:
            self.register_theme(theme)
        fallback = theming.DEFAULT_THEME if theming.DEFAULT_THEME in self.available_themes else "textual-dark"
        if requested and requested not in self.available_themes:
            self._theme_problems.append(f"unknown theme {requested!r}")
            requested = None
        self.theme = requested or fallback

    def get_theme_variable_defaults(self) -> dict[str, str]:
        try:
            return theming.domain_defaults(self.current_theme)
        except Exception:  # noqa: BLE001 - before a theme is set
            return {}

    def get_default_screen(self) -> DiffScreen:
        return DiffScreen(
            self.base, self.test, self.options, use_cache=self.use_cache, max_workers=self.max_workers
        )

    def on_mount(self) -> None:
        for problem in self._theme_problems:
            self.notify(problem, title="Theme", severity="warning", timeout=8)

    def theme_names(self) -> list[str]:
        own = sorted(name for name in self.available_themes if name not in BUILTIN_THEMES)
        return own + sorted(name for name in self.available_themes if name in BUILTIN_THEMES)


def run_diff_app(
    base: SourcePath,
    test: SourcePath,
    options: DiffOptions | None = None,
    *,
    use_cache: bool = True,
    theme: str | None = None,
) -> int:
    """Open the diff screen over two jobs; the process exit code (0 after q, 130 after esc while
    loading)."""
    app = DiffApp(base, test, options, use_cache=use_cache, theme=theme)
    result = app.run(mouse=False)
    if app.return_code is not None:
        return app.return_code
    return int(result or 0)
