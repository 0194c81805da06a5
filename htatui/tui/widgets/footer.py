"""FitFooter: the compact footer, cut to the terminal's width by priority rather than at its end."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

KEPT_ACTIONS = frozenset({"help", "quit"})
"""Help and quit show whatever else must go."""


def key_width(key: FooterKey) -> int:
    """Cells a compact key takes: its key, a space, its description and a space."""
    return len(key.key_display) + len(key.description) + 2


def fitting_keys(keys: list[FooterKey], width: int) -> list[FooterKey]:
    """The keys that fit `width`: the palette hint (also on `:`, and in `?`) goes first, then the
    rightmost keys, never help or quit."""
    kept = list(keys)
    removable = [k for k in kept if "-command-palette" in k.classes]
    removable += [k for k in reversed(kept) if k.action not in KEPT_ACTIONS and k not in removable]
    for key in removable:
        if sum(key_width(k) for k in kept) <= width:
            break
        kept.remove(key)
    return kept


def shown_bindings(screen: Screen[object]) -> tuple[tuple[str, str, str, bool, str], ...]:
    """What the footer draws for `screen`: each shown binding's key, action, description, whether
    it is enabled, and its tooltip."""
    return tuple(
        (binding.key, binding.action, binding.description, enabled, tooltip)
        for _node, binding, enabled, tooltip in screen.active_bindings.values()
        if binding.show or binding.action == "command_palette"
    )


class FitFooter(Footer):
    """A compact Footer whose keys never run off the right edge (the end is where Quit sits)."""

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._composed_for = 0
        self._composed_bindings: tuple[tuple[str, str, str, bool, str], ...] | None = None

    def bindings_changed(self, screen: Screen[object]) -> None:
        # Focus moves change the active bindings' owners far more often than what is shown: a
        # recompose mounts every key again (~40 widgets a page).
        if self._composed_bindings is not None and screen is self.screen:
            if shown_bindings(screen) == self._composed_bindings:
                return
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._composed_bindings = shown_bindings(self.screen)
        widgets: list[Widget] = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey)]
        for key in keys:
            # Compact before mounting: the key's `compact` watcher then has nothing to restyle.
            key.add_class("-compact", update=False)
        if len(keys) != len(widgets):
            yield from widgets  # grouped keys: Textual's own layout
            return
        self._composed_for = self.app.size.width
        kept = fitting_keys(keys, self._composed_for)
        self.styles.grid_size_columns = max(1, len([k for k in kept if "-command-palette" not in k.classes]))
        yield from kept

    def on_resize(self, event: events.Resize) -> None:
        if self.app.size.width != self._composed_for:
            self.call_after_refresh(self.recompose)
