"""Ranks put aside while a folder opens without the parse cache: an Arrow file each in a private temp folder.

A folder of many ranks opens with its ranks unread (as a cached folder does): each rank, once
parsed, is written to the parse cache, or, when the cache is not written (`load_traces` with
use_cache False, a full or read-only cache folder), to a folder made here with `mkdtemp` (mode
0700, never inside the user's cache) and read back when a view asks for it. The folder is removed
when the last rank reading from it is gone, and at exit.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import weakref
from pathlib import Path

import polars as pl

from htatui.sources import SourcePath
from htatui.trace.errors import EventsUnavailable


class SpillFolder:
    """A private temp folder of put-aside ranks, removed with this object (or at exit)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._remove = weakref.finalize(self, shutil.rmtree, str(path), True)

    @classmethod
    def make(cls) -> SpillFolder | None:
        """A new folder under the system's temp dir; None when none can be made."""
        try:
            return cls(Path(tempfile.mkdtemp(prefix="htatui-ranks-")))
        except OSError:
            return None

    def remove(self) -> None:
        """Remove the folder now (its ranks can no longer be read)."""
        self._remove()

    def read(self, file: Path, source: SourcePath) -> pl.DataFrame:
        """A put-aside rank's events (`source` names it in the error when its file is gone)."""
        try:
            # Read whole, not memory-mapped: the folder may be removed while the frame lives.
            return pl.read_ipc(io.BytesIO(file.read_bytes()))
        except (OSError, pl.exceptions.PolarsError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise EventsUnavailable(f"{source}: its temporary copy cannot be read ({why}); open it again") from None


def spill_events(events: pl.DataFrame, folder: Path, prefix: str = "rank-") -> Path | None:
    """Write a rank's events (or, with another `prefix`, its detail table) into `folder` (in a worker
    process); None when it cannot be written."""
    try:
        handle, name = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".arrow")
    except OSError:
        return None
    try:
        with os.fdopen(handle, "wb") as out:
            events.write_ipc(out, compression="zstd")
    except Exception:  # noqa: BLE001 - e.g. a full disk: the rank stays in memory instead
        with contextlib.suppress(OSError):
            os.unlink(name)
        return None
    return Path(name)
