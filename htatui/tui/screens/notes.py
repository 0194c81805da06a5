"""`N`: what loading the traces noted (rank from file order, skipped files), as a scrollable log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class NotesScreen(ModalScreen[None]):
    """The load notes and skipped files; esc, q or N closes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,N", "close", "Close", id="notes.close"),
    ]

    DEFAULT_CSS = """
    NotesScreen {
        align: center middle;
        & > Vertical {
            width: 100;
            max-width: 100%;
            height: auto;
            max-height: 100%;
            border: round $primary;
            border-title-color: $foreground;
            background: $surface;
            padding: 0 1;
        }
        & VerticalScroll { height: auto; max-height: 20; }
        & .hint { color: $foreground-muted; }
    }
    """

    def __init__(self, notes: Sequence[str], problems: Sequence[str]) -> None:
        super().__init__()
        self.notes = list(notes)
        self.problems = list(problems)

    def compose(self) -> ComposeResult:
        text = Text()
        for problem in self.problems:
            text.append("skipped  ", style="bold")
            text.append(f"{problem}\n")
        for note in self.notes:
            text.append(f"note     {note}\n")
        if not self.notes and not self.problems:
            text.append("Loading noted nothing: every file was read and its rank found in the trace.")
        text.rstrip()
        with Vertical() as box:
            box.border_title = "While loading"
            with VerticalScroll():
                yield Static(text, id="notes-text")
            yield Static("esc closes", classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)
