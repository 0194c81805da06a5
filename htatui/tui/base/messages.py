"""Messages shared between the app, its screens and their workers."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from htatui.sources import SourcePath
from htatui.trace import TraceSet


@dataclass(frozen=True)
class FileState:
    """One trace file on the loading screen: done or not, and read from the cache or parsed."""

    path: SourcePath
    done: bool = False
    from_cache: bool = False
    failed: bool = False


@dataclass
class LoadProgressed(Message):
    """The loader finished another file; carries the state of every file so far."""

    files: tuple[FileState, ...]
    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgressed)


@dataclass
class TracesLoaded(Message):
    """The traces are loaded and the first view can be shown."""

    traces: TraceSet
    notes: tuple[str, ...] | None = None
    """What loading noted and what is odd (`health.load_notes`), made in the load worker, as the
    clocks and overlaps read every event; None: the app makes them."""


@dataclass
class LoadFailed(Message):
    """Nothing could be loaded; `message` is one line for the user."""

    message: str
    cancelled: bool = False
