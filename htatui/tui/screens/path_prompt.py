"""A one-line dialog that asks for a path (the second job of a diff)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from htatui.sources import RemotePath, SourcePath, is_url


def complete_path(text: str) -> tuple[str, list[str]]:
    """`text` extended to the longest common start of the entries it names (a folder gets a `/`),
    and those entries' names."""
    typed = Path(text).expanduser() if text else Path(".")
    folder, start = (typed, "") if text.endswith(os.sep) or not text else (typed.parent, typed.name)
    try:
        names = sorted(entry.name for entry in folder.iterdir() if entry.name.startswith(start))
    except OSError:
        return text, []
    if not names:
        return text, []
    common = os.path.commonprefix(names)
    prefix = text[: len(text) - len(start)] if start else text
    completed = prefix + common
    if len(names) == 1 and (folder / common).is_dir():
        completed += os.sep
    return completed, names


class PathPrompt(ModalScreen[SourcePath | None]):
    """Ask for a trace folder or file; dismiss with the path, or None on esc."""

    DEFAULT_CSS = """
    PathPrompt { align: center middle; }
    PathPrompt > Vertical {
        width: 72; height: auto; padding: 1 2;
        border: round $primary; background: $surface;
    }
    PathPrompt Label { width: 1fr; }
    PathPrompt #error { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without comparing", id="prompt.cancel"),
        Binding("tab", "complete", "Complete", priority=True, tooltip="Complete the path", id="prompt.complete"),
    ]

    def __init__(self, title: str, hint: str) -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text)
            yield Label(f"{self.hint} (tab completes)")
            yield Input(placeholder="path to a trace folder or file", id="path")
            yield Label("", id="error")

    @on(Input.Submitted, "#path")
    def submit_path(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if is_url(text):
            self.dismiss(RemotePath(text))  # the loader names a URL that cannot be read
            return
        path = Path(text).expanduser()
        if not text or not path.exists():
            self.query_one("#error", Label).update(f"{text or 'nothing'}: no such file or folder")
            return
        self.dismiss(path)

    def action_complete(self) -> None:
        field = self.query_one("#path", Input)
        completed, choices = complete_path(field.value)
        field.value = completed
        field.cursor_position = len(completed)
        shown = ", ".join(choices[:6]) + (" …" if len(choices) > 6 else "")
        self.query_one("#error", Label).update(shown if len(choices) > 1 else "")

    def action_cancel(self) -> None:
        self.dismiss(None)
