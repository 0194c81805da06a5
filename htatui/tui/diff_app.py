"""A small App that shows only the diff screen: what `htatui diff BASE TEST` opens."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from htatui.analysis.diff.compare import DiffOptions
from htatui.sources import SourcePath
from htatui.tui.screens.diff import DiffScreen
from htatui.tui.themed_app import ThemedApp


class DiffApp(ThemedApp):
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
        super().__init__(theme)
        self.base = base
        self.test = test
        self.options = options or DiffOptions()
        self.use_cache = use_cache
        self.max_workers = max_workers

    def get_default_screen(self) -> DiffScreen:
        return DiffScreen(self.base, self.test, self.options, use_cache=self.use_cache, max_workers=self.max_workers)


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
