"""The first screen: loads the traces on a thread, shows progress per rank file, esc cancels."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.filesize import decimal
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Center, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

from htatui.analysis.core.allocators import release
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.health import load_notes
from htatui.jobs.load import load_traces
from htatui.sources import RemotePath, SourcePath
from htatui.store.layout import is_dataset
from htatui.trace import LoadCancelled, LoadError, LoadProgress, TraceSet
from htatui.trace.discover import DiscoveryError, discover
from htatui.trace.fetch import DownloadProgress
from htatui.tui.base.jobs import JobRunner
from htatui.tui.base.messages import FileState, LoadFailed, LoadProgressed, TracesLoaded

MAX_LISTED = 200
"""Files listed one per line at most; a bigger job shows the first ones and a count."""


def display_name(path: SourcePath) -> str:
    """A path as the user recognises it without temp-dir noise: `folder/file`."""
    if isinstance(path, RemotePath):
        return path.name
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def title_name(path: SourcePath) -> str:
    """How the title names what is loading: a URL in full (secrets cut), a local folder or file by name."""
    if isinstance(path, RemotePath):
        return str(path)
    return display_name(path) if path.is_file() else path.name or str(path)


@dataclass
class DownloadProgressed(Message):
    """More bytes of the remote files arrived."""

    done_bytes: int
    total_bytes: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DownloadProgressed)


@dataclass
class FileBytesProgressed(Message):
    """More of one file was read and decoded (a file parsed in this process)."""

    name: str
    done_bytes: int
    total_bytes: int
    files_done: int
    files_total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FileBytesProgressed)


class LoadingScreen(JobRunner[tuple[TraceSet, tuple[str, ...]]], Screen[None]):
    """Shows which rank files are read, parsed or taken from the cache."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel_load", "Cancel", tooltip="Stop loading and quit", id="loading.cancel"),
        Binding("q", "quit_failed", "Quit", id="loading.quit"),
    ]

    DEFAULT_CSS = """
    LoadingScreen {
        align: center middle;
        & #loading-box {
            width: 76;
            max-width: 100%;
            height: auto;
            max-height: 100%;
            border: round $primary;
            padding: 0 1;
            background: $surface;
        }
        & #loading-title { text-style: bold; }
        & #loading-files { height: auto; max-height: 14; }
        & #loading-hint { color: $foreground-muted; }
        & #loading-error { color: $error; display: none; }
        &.-failed #loading-error { display: block; }
        &.-failed ProgressBar { display: none; }
    }
    """

    def __init__(
        self,
        paths: Sequence[SourcePath],
        *,
        use_cache: bool = True,
        max_workers: int | None = None,
        preloaded: TraceSet | None = None,
        rules: Rules = SHIPPED_RULES,
    ) -> None:
        super().__init__()
        self.rules = rules
        self.paths = paths
        self.use_cache = use_cache
        self.max_workers = max_workers
        self.preloaded = preloaded
        self.failed = False
        self._listed: LoadProgressed | None = None
        self._parsing: dict[str, float] = {}
        """The share read of each file being parsed here, by display name."""
        self.error_message = ""
        """The one-line reason when loading failed."""

    def compose(self) -> ComposeResult:
        names = ", ".join(title_name(p) for p in self.paths)
        with Vertical(id="loading-box"):
            yield Static(Text(f"Loading {names}", overflow="ellipsis", no_wrap=True), id="loading-title")
            with Center():
                yield ProgressBar(total=None, show_eta=False, id="loading-bar")
            yield VerticalScroll(Static("finding trace files…", id="loading-list"), id="loading-files")
            yield Static("", id="loading-error")
            yield Static("esc cancels", id="loading-hint")

    def on_mount(self) -> None:
        if self.preloaded is not None:
            self.app.post_message(TracesLoaded(self.preloaded))
            return
        self.start_job("load", self._load, "load traces")

    def _load(self, cancel: threading.Event) -> tuple[TraceSet, tuple[str, ...]]:
        """Find the files, then load them; progress goes to the screen as messages (worker thread)."""
        # A dataset (`htatui ingest`) lists its rank files itself, as the loader reads it.
        trace_paths = [p for p in self.paths if not (isinstance(p, Path) and is_dataset(p))]
        files = discover(trace_paths).files if trace_paths else []
        states = {path: FileState(path) for path in files}
        self.post_message(LoadProgressed(tuple(states.values()), 0, len(files)))

        def progress(update: LoadProgress) -> None:
            if update.bytes_total:
                name = display_name(update.path)
                self.post_message(
                    FileBytesProgressed(name, update.bytes_done, update.bytes_total, update.done, update.total)
                )
                return
            states[update.path] = FileState(update.path, done=True, from_cache=update.from_cache, failed=update.failed)
            self.post_message(LoadProgressed(tuple(states.values()), update.done, update.total))

        def progress_bytes(update: DownloadProgress) -> None:
            self.post_message(DownloadProgressed(update.done_bytes, update.total_bytes))

        traces = load_traces(
            self.paths,
            use_cache=self.use_cache,
            refresh_cache=not self.use_cache,
            progress=progress,
            cancel=cancel,
            max_workers=self.max_workers,
            download_progress=progress_bytes,
        )
        # Here, off the screen's thread: the clocks and overlaps read every event (0.6 s on 1.6M).
        notes = load_notes(traces, self.rules)
        release()  # the parse's freed buffers go back now (and the allocators are looked up once, here)
        return traces, notes

    def job_done(self, job: str, result: tuple[TraceSet, tuple[str, ...]]) -> None:
        traces, notes = result
        self.app.post_message(TracesLoaded(traces, notes))

    def job_failed(self, job: str, error: BaseException) -> None:
        if isinstance(error, LoadCancelled):
            self.post_message(LoadFailed("load cancelled", cancelled=True))
        elif isinstance(error, LoadError | DiscoveryError):
            self.post_message(LoadFailed(str(error)))
        else:
            lines = str(error).strip().splitlines()
            self.post_message(LoadFailed(f"{type(error).__name__}: {lines[0] if lines else 'no details'}"))

    @on(LoadProgressed)
    def _show_progress(self, message: LoadProgressed) -> None:
        self._listed = message
        self.query_one(ProgressBar).update(total=max(message.total, 1), progress=message.done)
        self._show_files()
        self.query_one("#loading-hint", Static).update(f"{message.done} of {message.total} files · esc cancels")

    def _show_files(self) -> None:
        if self._listed is None:
            return
        lines = Text()
        for state in self._listed.files[:MAX_LISTED]:
            name = display_name(state.path)
            if state.failed:
                mark, style, how = "✗", "bold", "failed"
            elif state.done:
                mark, style, how = "✓", "bold", "from cache" if state.from_cache else "parsed"
            elif name in self._parsing:
                mark, style, how = "·", "", f"parsing {self._parsing[name]:.0%}"
            else:
                mark, style, how = "·", "dim", "waiting"
            lines.append(f"{mark} ", style=style)
            lines.append(name, style=style)
            lines.append(f"  {how}\n", style="dim")
        if len(self._listed.files) > MAX_LISTED:
            lines.append(f"… and {len(self._listed.files) - MAX_LISTED} more files\n", style="dim")
        self.query_one("#loading-list", Static).update(lines)

    @on(FileBytesProgressed)
    def _show_file_bytes(self, message: FileBytesProgressed) -> None:
        # The bar counts files; the file being parsed adds the share of its bytes read so far.
        share = min(message.done_bytes / message.total_bytes, 1.0)
        self._parsing[message.name] = share
        bar = self.query_one(ProgressBar)
        bar.update(total=max(message.files_total, 1), progress=message.files_done + share)
        self._show_files()
        done, total = decimal(message.done_bytes), decimal(message.total_bytes)
        self.query_one("#loading-hint", Static).update(f"parsing {message.name}: {done} of {total} · esc cancels")

    @on(DownloadProgressed)
    def _show_download(self, message: DownloadProgressed) -> None:
        done, total = decimal(message.done_bytes), decimal(message.total_bytes)
        self.query_one("#loading-hint", Static).update(f"downloading {done} of {total} · esc cancels")

    @on(LoadFailed)
    def _show_failure(self, message: LoadFailed) -> None:
        if message.cancelled:
            self.app.exit(return_code=130, message="htatui: load cancelled")
            return
        self.failed = True
        self.error_message = message.message
        self.add_class("-failed")
        self.query_one("#loading-error", Static).update(Text(f"Cannot load: {message.message}"))
        self.query_one("#loading-hint", Static).update("q quits")
        self.app.bell()

    def action_cancel_load(self) -> None:
        if self.failed:
            self.action_quit_failed()
            return
        self.query_one("#loading-hint", Static).update("cancelling…")
        if self.cancel_job("load"):
            # The job's cancel event stops the loader (its workers are ended); the app leaves now.
            self.app.exit(return_code=130, message="htatui: load cancelled")

    def action_quit_failed(self) -> None:
        self.app.exit(return_code=2 if self.failed else 130)
