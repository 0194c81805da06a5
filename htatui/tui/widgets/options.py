"""A one-line bar of editable view options (thresholds, top-k, cutoffs), applied with enter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input

from htatui.tui.widgets.focus_label import FocusLabel

Kind = Literal["int", "float", "text"]


class OptionInput(Input):
    """An option's input box; esc gives the focus back to the view."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave", "Back", show=False, id="option.leave"),
    ]

    def action_leave(self) -> None:
        self.screen.focus_next("ViewTable, Chart")


class OptionField(Horizontal):
    """`label [value]`: a typed option. Enter applies it; a bad value is refused with a note."""

    DEFAULT_CSS = """
    OptionField {
        width: auto;
        height: 1;
        margin-right: 2;
        & > FocusLabel { padding-right: 1; color: $foreground-muted; }
        & > OptionInput { width: 12; }
        & > OptionInput.-wide { width: 28; }
    }
    """

    @dataclass
    class Applied(Message):
        """A valid new value was entered for option `name`."""

        field: OptionField
        name: str
        value: int | float | str

    def __init__(
        self,
        name: str,
        label: str,
        value: int | float | str,
        *,
        kind: Kind = "float",
        minimum: float | None = None,
        maximum: float | None = None,
        wide: bool = False,
        placeholder: str = "",
    ) -> None:
        super().__init__(id=f"opt-{name}")
        self.option_name = name
        self.label = label
        self.kind: Kind = kind
        self.minimum = minimum
        self.maximum = maximum
        self.value: int | float | str = value
        self._wide = wide
        self._placeholder = placeholder

    def compose(self) -> ComposeResult:
        yield FocusLabel(self.label)
        box = OptionInput(
            str(self.value),
            placeholder=self._placeholder,
            compact=True,
            type="integer" if self.kind == "int" else "number" if self.kind == "float" else "text",
            id=f"input-{self.option_name}",
            select_on_focus=True,
        )
        box.set_class(self._wide, "-wide")
        yield box

    def parse(self, text: str) -> int | float | str:
        """The typed value, or ValueError with a message for the user."""
        if self.kind == "text":
            return text.strip()
        try:
            number: int | float = int(text) if self.kind == "int" else float(text)
        except ValueError:
            raise ValueError(f"{self.label} must be a {'whole ' if self.kind == 'int' else ''}number") from None
        if self.minimum is not None and number < self.minimum:
            raise ValueError(f"{self.label} must be at least {self.minimum:g}")
        if self.maximum is not None and number > self.maximum:
            raise ValueError(f"{self.label} must be at most {self.maximum:g}")
        return number

    @on(Input.Submitted)
    def _apply(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            value = self.parse(event.value)
        except ValueError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.value = value
        self.post_message(self.Applied(self, self.option_name, value))


class OptionsBar(Horizontal):
    """A row of OptionFields (and any hint text) above a view's tables."""

    DEFAULT_CSS = """
    OptionsBar {
        height: auto;
        min-height: 1;
        padding: 0 1;
        background: $surface;
    }
    """
