"""What is read again from a rank's trace file, for what its event frame does not hold.

The op arguments (shapes, flops), the CUPTI counters, the collectives' input shapes and the
`[memory]` events' allocator fields are read from the file on demand, through one bounded,
thread-safe keeper: a read is kept under the file's version (path, mtime and size locally; URL
and version identity remotely) and what was read, so an edited file is read again; the least
recently used reads go once more than `MAX_ENTRIES` or `MAX_BYTES` are held; two threads asking
for one read wait for a single one.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import polars as pl

from htatui.sources import RemotePath, SourcePath

_T = TypeVar("_T")

MAX_ENTRIES = 64
"""Reads kept at most (a few per rank of a job the app shows)."""
MAX_BYTES = 1 << 30
"""Bytes of read frames kept at most; the oldest go first."""


def file_version(path: SourcePath) -> tuple[str, int, int]:
    """The path plus mtime and size locally, the URL plus its version identity remotely (OSError
    when a local file is gone)."""
    if isinstance(path, RemotePath):
        return (f"{path.url}|{path.identity}", 0, path.size or 0)
    stat = os.stat(path)
    return (str(path), stat.st_mtime_ns, stat.st_size)


def held_bytes(value: object) -> int:
    """About how many bytes a read holds: its frames (a dataclass's too)."""
    if isinstance(value, pl.DataFrame):
        return int(value.estimated_size())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(held_bytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (tuple, list)):
        return sum(held_bytes(item) for item in value)
    return 0


class Rereader:
    """Reads kept per (file version, what); bounded by count and bytes; safe from several threads."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._kept: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._reading: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def read(self, path: SourcePath, what: Hashable, read: Callable[[SourcePath], _T]) -> _T:
        """`read(path)`, kept under the file's version and `what` (OSError when the file is gone)."""
        key = (file_version(path), what)
        with self._lock:
            found = self._found(key)
            if found is not None:
                return found[0]  # type: ignore[no-any-return]
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:  # one read per key: a second asker waits for it
            with self._lock:
                found = self._found(key)
            if found is not None:
                return found[0]  # type: ignore[no-any-return]
            try:
                value = read(path)
            except BaseException:
                with self._lock:
                    self._reading.pop(key, None)
                raise
            with self._lock:
                self._kept[key] = (value, held_bytes(value))
                self._reading.pop(key, None)
                self._trim()
        return value

    def holds(self, version: Hashable, what: Hashable) -> bool:
        """Whether the read `what` of a file's version (`file_version`) is kept."""
        with self._lock:
            return (version, what) in self._kept

    def keep(self, version: Hashable, what: Hashable, value: object) -> None:
        """Keep `value` as the read `what` of a file's version, made by a pass that read something
        else (a read already kept stays)."""
        key = (version, what)
        with self._lock:
            if key not in self._kept:
                self._kept[key] = (value, held_bytes(value))
                self._trim()

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def _found(self, key: Hashable) -> tuple[Any, int] | None:
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
        return found

    def _trim(self) -> None:
        total = sum(size for _value, size in self._kept.values())
        while len(self._kept) > 1 and (len(self._kept) > self.max_entries or total > self.max_bytes):
            _key, (_value, size) = self._kept.popitem(last=False)
            total -= size


REREAD = Rereader()
"""The process's one keeper of what is read again from trace files."""
