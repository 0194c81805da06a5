"""FocusLabel: a field's label that marks the field holding the focus with a glyph, not a colour."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Label

FOCUS_MARK = "▶"


class FocusLabel(Label):
    """`▶ name` while a widget in the label's parent (its field's row) has the focus, else `  name`."""

    def __init__(self, text: str, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.text = text

    def on_mount(self) -> None:
        self.watch(self.screen, "focused", self._focus_moved)

    def _focus_moved(self, _focused: Widget | None) -> None:
        self.refresh()

    @property
    def marked(self) -> bool:
        return self.parent is not None and isinstance(self.parent, Widget) and self.parent.has_focus_within

    def render(self) -> Text:
        return Text(f"{FOCUS_MARK if self.marked else ' '} {self.text}")
