"""The export dialog: ranks and output folder, progress, the written paths; never overwrites unasked."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, ProgressBar, Static

from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.export.traces import ExportError, ExportExistsError
from htatui.tui.base.jobs import JobRunner
from htatui.tui.widgets.focus_label import FocusLabel

ExportProgress = Callable[[int, int, Path], None]
ExportJob = Callable[[tuple[int, ...] | None, Path, bool, ExportProgress], list[Path]]
"""job(ranks or None for all, folder, force, progress) -> written paths; raises ExportError."""


def parse_ranks(text: str, loaded: list[int]) -> tuple[int, ...] | None:
    """'all' or '' → None; '0,2-3' → (0, 2, 3); ValueError with a message for the user."""
    cleaned = text.strip().lower()
    if cleaned in ("", "all", "*"):
        return None
    chosen: list[int] = []
    for part in cleaned.replace(" ", "").split(","):
        if not part:
            continue
        try:
            if "-" in part:
                low, high = part.split("-", 1)
                chosen.extend(range(int(low), int(high) + 1))
            else:
                chosen.append(int(part))
        except ValueError:
            raise ValueError(f"ranks: {part!r} is not a rank or a range like 0-3") from None
    missing = sorted(set(chosen) - set(loaded))
    if missing:
        raise ValueError(f"rank {missing[0]} is not loaded (loaded: {format_ranges(loaded, separator=',')})")
    if not chosen:
        raise ValueError("ranks: name at least one rank, or 'all'")
    return tuple(dict.fromkeys(chosen))


@dataclass
class ExportProgressed(Message):
    """Another file was written."""

    done: int
    total: int
    path: Path

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ExportProgressed)


class ExportModal(JobRunner[list[Path]], ModalScreen[list[Path] | None]):
    """enter exports; an existing file asks first (y overwrites, n goes back); esc closes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="export.close"),
        Binding("y", "overwrite", "Yes", show=False, tooltip="Overwrite, or create the folder", id="export.overwrite"),
        Binding("n", "keep", "No", show=False, tooltip="Keep the existing file, or do not create", id="export.keep"),
    ]

    DEFAULT_CSS = """
    ExportModal {
        align: center middle;
        & > Vertical {
            width: 76;
            max-width: 100%;
            height: auto;
            max-height: 100%;
            border: round $primary;
            border-title-color: $foreground;
            background: $surface;
            padding: 0 1;
        }
        & .row { height: 1; margin-bottom: 1; }
        & .row > FocusLabel { width: 10; color: $foreground-muted; }
        & .row > Input { width: 1fr; }
        & .hint { color: $foreground-muted; }
        & #export-status { height: auto; }
        & ProgressBar { display: none; }
        &.-running ProgressBar { display: block; }
        &.-ask #export-status { color: $warning; }
        &.-failed #export-status { color: $error; }
    }
    """

    def __init__(
        self,
        title: str,
        job: ExportJob,
        *,
        loaded_ranks: list[int],
        ranks: tuple[int, ...] | None,
        folder: Path,
        ask_ranks: bool = True,
        about: str = "",
    ) -> None:
        super().__init__()
        self.title_text = title
        self.job = job
        self.loaded_ranks = loaded_ranks
        self.initial_ranks = "all" if ranks is None else format_ranges(ranks)
        self.initial_folder = str(folder)
        self.ask_ranks = ask_ranks
        self.about = about
        self.written: list[Path] = []
        self._pending: tuple[tuple[int, ...] | None, Path] | None = None
        self._creating = False
        """The question asked is whether to create the missing folder (not whether to overwrite)."""

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = self.title_text
            if self.about:
                yield Static(self.about, classes="hint")
            if self.ask_ranks:
                with Horizontal(classes="row"):
                    yield FocusLabel("ranks")
                    yield Input(self.initial_ranks, placeholder="all, or 0,2-3", compact=True, id="export-ranks")
            with Horizontal(classes="row"):
                yield FocusLabel("folder")
                yield Input(self.initial_folder, placeholder="output folder", compact=True, id="export-folder")
            yield ProgressBar(total=None, show_eta=False, id="export-bar")
            yield Static("", id="export-status")
            yield Static("enter exports · esc closes", classes="hint", id="export-hint")

    def on_mount(self) -> None:
        self.query_one("#export-folder", Input).focus()

    @property
    def running(self) -> bool:
        return self.job_running("export")

    def _hint(self, text: str) -> None:
        self.query_one("#export-hint", Static).update(text)

    def _status(self, text: str | Text, state: str = "") -> None:
        for name in ("-ask", "-failed", "-running", "-done"):
            self.set_class(name == state, name)
        self.query_one("#export-status", Static).update(text)

    @on(Input.Submitted)
    def _start(self, event: Input.Submitted) -> None:
        event.stop()
        if self.running or self.has_class("-ask"):
            return
        try:
            ranks = (
                parse_ranks(self.query_one("#export-ranks", Input).value, self.loaded_ranks) if self.ask_ranks else None
            )
        except ValueError as exc:
            self._status(str(exc), "-failed")
            self.notify(str(exc), severity="warning")
            return
        folder_text = self.query_one("#export-folder", Input).value.strip()
        if not folder_text:
            self._status("Name an output folder.", "-failed")
            return
        folder = Path(folder_text).expanduser()
        if not folder.exists():
            self._pending, self._creating = (ranks, folder), True
            self._status(f"{folder} does not exist.\nCreate it? y creates · n goes back", "-ask")
            self._hint("y creates the folder · n goes back · esc closes")
            self.set_focus(None)
            return
        self._launch(ranks, folder, force=False)

    def _launch(self, ranks: tuple[int, ...] | None, folder: Path, force: bool) -> None:
        self._pending = (ranks, folder)
        self.query_one("#export-bar", ProgressBar).update(total=None, progress=0)
        self._status("writing…", "-running")

        def progress(done: int, total: int, path: Path) -> None:
            self.post_message(ExportProgressed(done, total, path))

        self.start_job("export", lambda _cancel: self.job(ranks, folder, force, progress), "export")

    @on(ExportProgressed)
    def _progressed(self, message: ExportProgressed) -> None:
        self.query_one("#export-bar", ProgressBar).update(total=message.total, progress=message.done)
        self._status(f"wrote {message.done} of {message.total}: {message.path.name}", "-running")

    def job_done(self, job: str, result: list[Path]) -> None:
        paths = list(result)
        self.written = paths
        text = Text(f"Wrote {len(paths)} file{'s' if len(paths) != 1 else ''}:\n", style="bold")
        for path in paths:
            text.append(f"  {path}\n")
        self._status(text, "-done")
        self._hint("esc closes · enter exports again")
        self.query_one("#export-folder", Input).focus()
        self.notify(f"Wrote {len(paths)} file(s) into {paths[0].parent}" if paths else "")

    def job_failed(self, job: str, error: BaseException) -> None:
        if isinstance(error, ExportExistsError):
            self._status(f"{error}\nOverwrite? y overwrites · n keeps the existing file", "-ask")
            self._hint("y overwrites · n keeps · esc closes")
            self.set_focus(None)
            return
        message = str(error) if isinstance(error, ExportError) else f"{type(error).__name__}: {error}"
        self._status(message, "-failed")
        self.query_one("#export-folder", Input).focus()
        self.notify(message, title="Export failed", severity="error")

    def action_overwrite(self) -> None:
        if self.has_class("-ask") and self._pending is not None:
            ranks, folder = self._pending
            if self._creating:
                self._creating = False
                try:
                    folder.mkdir(parents=True)
                except OSError as exc:
                    message = f"Cannot create {folder}: {exc.strerror or exc}"
                    self._status(message, "-failed")
                    self.query_one("#export-folder", Input).focus()
                    self.notify(message, title="Export failed", severity="error")
                    return
                self._launch(ranks, folder, force=False)
                return
            self._launch(ranks, folder, force=True)

    def action_keep(self) -> None:
        if self.has_class("-ask") and self._creating:
            self._creating = False
            self._status("No folder was created; change the folder and press enter.")
            self._hint("enter exports · esc closes")
            self.query_one("#export-folder", Input).focus()
            return
        if self.has_class("-ask"):
            self._status("Nothing was overwritten; change the folder and press enter.")
            self._hint("enter exports · esc closes")
            self.query_one("#export-folder", Input).focus()

    def action_close(self) -> None:
        self.cancel_job("export")
        self.dismiss(self.written or None)
