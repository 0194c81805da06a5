"""Where a file's load went: seconds per phase (gunzip, decode, framing, checks, cache write).

`htatui info --timings` prints them per file, so a user with a slow trace can say which part is slow.
A parse records into the process's current `Timings` (`recording`); each phase adds the seconds it
took in the thread that ran it (`spent`; the gunzip thread ahead of the cutting included). Wall
seconds, not the thread's CPU time: a phase's polars work runs on polars' own threads. A worker's
figures come back with what it made (a piece's `Decoded`, a file's `ParsedFile`) and are added
where they arrive. In one process the phases add up to the parse's wall time; with workers (or the
gunzip thread) they overlap, and their sum passes it. Recording costs two clock reads per piece.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PHASES = ("gunzip", "decode", "framing", "checks", "summary", "cache write")
"""The phases in load order: inflating gzip, JSON to typed events, events to the frame's columns (and
taking workers' pieces back, and each event's step), the loader's checks, the rank's summary row
kept in its cache entry (`loader.EntryTables`), and writing the cache entry."""


@dataclass
class Timings:
    """Seconds per phase (summed over the threads and processes that ran it), and the whole parse's."""

    seconds: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0

    def add(self, other: dict[str, float]) -> None:
        for phase, seconds in other.items():
            self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds


_current: Timings | None = None
_recorded: dict[str, Timings] = {}


@contextmanager
def recording() -> Iterator[Timings]:
    """Record the phases run inside (in this process, any thread) into a new Timings."""
    global _current
    before, timings = _current, Timings()
    _current = timings
    start = time.perf_counter()
    try:
        yield timings
    finally:
        timings.wall_s = time.perf_counter() - start
        _current = before


@contextmanager
def spent(phase: str) -> Iterator[None]:
    """Add the seconds spent inside to `phase` of the current recording (if any)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timings = _current
        if timings is not None:
            timings.seconds[phase] = timings.seconds.get(phase, 0.0) + time.perf_counter() - start


def add_current(seconds: dict[str, float]) -> None:
    """A worker's seconds per phase, added to the current recording."""
    if _current is not None:
        _current.add(seconds)


def keep(name: str, timings: Timings) -> None:
    """The figures of the file `name`, for `recorded`, until the next load (`forget`)."""
    _recorded[name] = timings


def forget() -> None:
    """A new load starts: the figures kept from the last are let go (a file read from the cache has none)."""
    _recorded.clear()


def recorded(name: str) -> Timings | None:
    """The figures kept for the file `name` by a parse in this process, or None (read from the cache)."""
    return _recorded.get(name)
