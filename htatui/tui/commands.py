"""The command palette: namespaced entries (view:, rank:, export:, theme:, app:) for the current state."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from htatui.analysis.core.scope import Steps
from htatui.tui.base.host import KeymapHost, PaletteHost
from htatui.tui.base.keymap import remapped
from htatui.tui.widgets.status_bar import page_keys

if TYPE_CHECKING:
    from textual.dom import DOMNode


@dataclass(frozen=True)
class Entry:
    title: str
    help: str
    callback: Callable[[], object]


class HtaCommands(Provider):
    """Entries depend on what is loaded and on the screen the palette was opened from."""

    def entries(self) -> Iterator[Entry]:
        app = self.app
        if not isinstance(app, PaletteHost):
            return
        yield from self._views(app)
        yield from self._ranks(app)
        yield from self._steps(app)
        yield from self._exports(app)
        for name in app.theme_names():
            yield Entry(f"theme: {name}", "Switch the colour theme", partial(setattr, app, "theme", name))
        yield from self._screen_actions()
        if app.traces is not None:
            yield Entry(
                "app: diff: compare with another job…",
                "Side by side with a second job, this one as the base (key d)",
                app.action_diff,
            )
        if app.traces is not None:
            yield Entry(
                "app: query with SQL…",
                "SQL over the job's tables (events, kernels, ops, every view's), as htatui query",
                app.action_query,
            )
        yield Entry("app: load notes", "What loading the traces noted and skipped (key N)", app.action_notes)
        yield Entry("app: help", "Every key and what the views measure (key ?)", app.action_help)
        yield Entry(
            "app: save screenshot", "Save an SVG of this screen in the current folder", app.action_save_screenshot
        )
        yield Entry("app: quit", "Leave htatui", app.exit)

    def _screen_actions(self) -> Iterator[Entry]:
        """Every key of the screen the palette was opened from and of its focused table."""
        from htatui.tui.screens.help import bindings_of
        from htatui.tui.widgets.table import ViewTable

        screen = self.screen
        title = str(getattr(screen, "VIEW_TITLE", "") or "view").lower()
        targets: list[tuple[str, DOMNode]] = [(title, screen)]
        focused = screen.focused
        if isinstance(focused, ViewTable):
            targets.append(("table", focused))
        keymap = self.app.keymap if isinstance(self.app, KeymapHost) else {}
        for prefix, node in targets:
            for default in bindings_of(type(node)):
                binding = remapped(default, keymap)
                description = binding.tooltip or binding.description
                key = binding.key_display or binding.key.split(",")[0]
                yield Entry(
                    f"{prefix}: {description}", f"Key {key}", partial(self.app.run_action, binding.action, node)
                )

    def _views(self, app: PaletteHost) -> Iterator[Entry]:
        if app.traces is None:
            return
        keys = page_keys()
        for mode, title in app.view_order():
            key = f"Key {keys[mode]}" if mode in keys else "Keys [ and ] (no number key)"
            yield Entry(f"view: {title}", key, partial(app.run_action, f"view('{mode}')"))
        yield Entry("view: Timeline", "Key t (at the highlighted row's time)", app.open_timeline)

    def _ranks(self, app: PaletteHost) -> Iterator[Entry]:
        if app.traces is None:
            return
        yield Entry("rank: all", "Show every rank in every view", partial(app.set_ranks, None))
        yield Entry("rank: pick…", "Choose several ranks (key p)", app.action_pick_ranks)
        for rank in app.traces.rank_ids:
            yield Entry(f"rank: {rank}", f"Show only rank {rank}", partial(app.set_ranks, (rank,)))

    def _steps(self, app: PaletteHost) -> Iterator[Entry]:
        if app.traces is None:
            return
        yield Entry(
            "steps: default",
            "Every step but the last (the one step of a one-step trace)",
            partial(app.set_steps, Steps()),
        )
        yield Entry(
            "steps: all", "The whole trace: every step and what lies outside them", partial(app.set_steps, Steps("all"))
        )
        yield Entry(
            "steps: steady",
            "The default's steps without warm-up, graph capture and batches below their peak",
            partial(app.set_steps, Steps("steady")),
        )
        for step in app.available_steps():
            yield Entry(f"steps: {step}", f"Only step {step}", partial(app.set_steps, Steps.parse(str(step))))

    def _exports(self, app: PaletteHost) -> Iterator[Entry]:
        if app.traces is None:
            return
        for title, help_text, callback in app.export_commands(self.screen):
            yield Entry(title, help_text, callback)

    async def discover(self) -> Hits:
        for entry in self.entries():
            yield DiscoveryHit(entry.title, entry.callback, help=entry.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for entry in self.entries():
            score = matcher.match(entry.title)
            if score > 0:
                yield Hit(score, matcher.highlight(entry.title), entry.callback, help=entry.help)
