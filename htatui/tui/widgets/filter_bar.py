"""The `/` filter line under a table: filters as you type, enter keeps it, esc clears it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    """An Input that stays hidden until `/` opens it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Clear filter", id="filter.clear"),
    ]

    DEFAULT_CSS = """
    FilterBar {
        display: none;
        height: 1;
        border: none;
        padding: 0 1;
        background: $panel;
        &.-open { display: block; }
        &:focus { border: none; background: $panel-lighten-1; }
    }
    """

    @dataclass
    class FilterChanged(Message):
        """The filter text changed."""

        bar: FilterBar
        text: str

    @dataclass
    class Closed(Message):
        """The bar lost its purpose (enter or esc); the table should take the focus back."""

        bar: FilterBar

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(placeholder="filter (case-insensitive) · enter keeps · esc clears", id=id)

    def open(self) -> None:
        self.add_class("-open")
        self.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.FilterChanged(self, event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not self.value:
            self.remove_class("-open")
        self.post_message(self.Closed(self))

    def action_clear_filter(self) -> None:
        self.value = ""
        self.remove_class("-open")
        self.post_message(self.FilterChanged(self, ""))
        self.post_message(self.Closed(self))
