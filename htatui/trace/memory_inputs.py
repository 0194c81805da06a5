"""Readers for GPU memory recordings: CUDA allocator snapshots, `[memory]` trace events, memory timelines.

Every input becomes one `MemoryRecording` (memory_recording.py), recognised by content (pickle
opcodes, JSON shape), not by file name: snapshots (memory_snapshot.py), traces with `[memory]`
events (memory_events.py) and memory timelines (memory_timeline.py). Inputs are capped in size
before they are parsed.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import polars as pl

from htatui.trace.decode import TraceFormatError
from htatui.trace.memory_events import read_trace_memory
from htatui.trace.memory_recording import (
    BEFORE_RECORDING_SITE,
    OUTSIDE_ANNOTATIONS_SITE,
    UNKNOWN_SITE,
    MemoryInputError,
    MemoryRecording,
    one_line,
    ranks_together,
)
from htatui.trace.memory_snapshot import (
    MAX_SNAPSHOT_DEPTH,
    MAX_SNAPSHOT_OBJECTS,
    PICKLE_PROTOCOL_2_PLUS,
    looks_like_snapshot,
    read_snapshot_bytes,
    shape_problem,
    snapshot_from_object,
)
from htatui.trace.memory_timeline import read_raw_timeline, read_timeline, refuse_constant
from htatui.trace.read import gunzip_bounded

__all__ = [
    "BEFORE_RECORDING_SITE",
    "MAX_SNAPSHOT_DEPTH",
    "MAX_SNAPSHOT_OBJECTS",
    "OUTSIDE_ANNOTATIONS_SITE",
    "UNKNOWN_SITE",
    "MemoryInputError",
    "MemoryRecording",
    "holds_recording",
    "looks_like_snapshot",
    "read_memory",
    "shape_problem",
    "snapshot_from_object",
]

MAX_INPUT_BYTES = 2 << 30
"""Inputs larger than this (on disk, or after gunzip) are refused before they are parsed."""


def read_memory(path: Path, max_bytes: int = MAX_INPUT_BYTES) -> MemoryRecording:
    """Read a snapshot pickle, a trace with `[memory]` events (file or folder) or a memory timeline."""
    path = Path(path)
    if path.is_dir():
        return _read_folder(path, max_bytes)
    raw = _read_capped(path, max_bytes)
    try:
        if raw[:1] == PICKLE_PROTOCOL_2_PLUS:
            return read_snapshot_bytes(path, raw)
        return _read_json(path, raw)
    except (RecursionError, OverflowError, pl.exceptions.PolarsError) as exc:
        # Last line of defence: hostile shapes (absurd nesting, numbers past 64 bits) end in one line.
        raise MemoryInputError(f"{path}: malformed memory input ({one_line(exc)})") from None


def _read_capped(path: Path, max_bytes: int) -> bytes | bytearray:
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise MemoryInputError(f"{path}: not a regular file")
        if size > max_bytes:
            raise MemoryInputError(f"{path}: {size} bytes is over the {max_bytes}-byte limit for memory inputs")
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise MemoryInputError(f"{path}: no such file or folder") from None
    except OSError as exc:
        raise MemoryInputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise MemoryInputError(f"{path}: over the {max_bytes}-byte limit for memory inputs")
    if raw[:2] == b"\x1f\x8b":
        try:
            return gunzip_bounded(raw, max_bytes)
        except TraceFormatError:
            raise MemoryInputError(f"{path}: over the {max_bytes}-byte limit once decompressed") from None
        except (EOFError, zlib.error) as exc:
            raise MemoryInputError(f"{path}: corrupt or truncated gzip ({exc})") from None
    return raw


def holds_recording(path: Path) -> bool:
    """Whether `path` is (or is a folder holding) a snapshot or a memory timeline, read alone by
    `read_memory`; else it names traces, read as a job. A timeline is JSON that opens with `[`,
    a trace JSON with `{`."""
    if path.is_dir():
        try:
            return any(child.is_file() and holds_recording(child) for child in path.iterdir())
        except OSError:
            return False
    return looks_like_snapshot(path) or _opens_with(path, b"[")


def _opens_with(path: Path, head: bytes) -> bool:
    """Whether the file's text (gunzipped when gzip) starts with `head`, past white space."""
    try:
        with open(path, "rb") as handle:
            start = handle.read(2)
            handle.seek(0)
            if start == b"\x1f\x8b":
                with gzip.GzipFile(fileobj=handle) as unzipped:
                    text = unzipped.read(256)
            else:
                text = handle.read(256)
    except (OSError, EOFError, zlib.error):
        return False
    return text.lstrip().startswith(head)


def _read_folder(path: Path, max_bytes: int) -> MemoryRecording:
    try:
        files = sorted(p for p in path.iterdir() if p.is_file())
    except OSError as exc:
        raise MemoryInputError(f"{path}: folder cannot be read ({exc.strerror or exc})") from None
    snapshots = [p for p in files if looks_like_snapshot(p)]
    if snapshots:
        return read_memory(snapshots[0], max_bytes)
    # Trace-named files first, then anything else (timelines are often named *.raw.gz).
    candidates = sorted(files, key=lambda p: not p.name.lower().endswith((".json", ".json.gz")))
    found: list[MemoryRecording] = []
    for candidate in candidates:
        try:
            recording = read_memory(candidate, max_bytes)
        except MemoryInputError:
            continue
        if recording.kind != "trace":
            return recording if not found else _ranks_together(path, found)
        found.append(recording)
    if not found:
        raise MemoryInputError(f"{path}: no memory snapshot, memory timeline or trace with [memory] events here")
    return found[0] if len(found) == 1 else _ranks_together(path, found)


def _ranks_together(folder: Path, recordings: list[MemoryRecording]) -> MemoryRecording:
    """A folder's rank traces as one recording, each rank from its `distributedInfo`, else its file name."""
    from htatui.trace.discover import rank_from_filename

    numbered = []
    for position, recording in enumerate(recordings):
        rank = recording.rank if recording.rank is not None else rank_from_filename(Path(str(recording.path)))
        numbered.append((position if rank is None else rank, recording))
    return ranks_together(folder, numbered)


def _read_json(path: Path, raw: bytes | bytearray) -> MemoryRecording:
    head = raw.lstrip()[:1]
    if head == b"{":
        return read_trace_memory(path, raw)
    if head != b"[":
        if raw[:1] in (b"(", b"}", b"]") or b"\x00" in raw[:64] or raw[:1] == b"\x80":
            raise MemoryInputError(f"{path}: neither a memory snapshot nor JSON")
        raise MemoryInputError(f"{path}: not a memory snapshot, memory timeline or trace (unrecognised content)")
    try:
        obj = json.loads(raw, parse_constant=refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MemoryInputError(f"{path}: invalid JSON ({one_line(exc)})") from None
    except RecursionError:
        raise MemoryInputError(f"{path}: invalid JSON (nested too deeply)") from None
    if (
        isinstance(obj, list)
        and len(obj) == 2
        and isinstance(obj[0], list)
        and isinstance(obj[1], list)
        and len(obj[0]) == len(obj[1])
        and all(isinstance(row, list) for row in obj[1])
    ):
        return read_timeline(path, obj[0], obj[1])
    if isinstance(obj, list) and obj and all(isinstance(row, list) and len(row) == 4 for row in obj):
        return read_raw_timeline(path, obj)
    if isinstance(obj, list) and all(isinstance(row, dict) for row in obj):
        return read_trace_memory(path, raw)
    raise MemoryInputError(
        f"{path}: JSON, but not a memory timeline ([times, sizes] or [time, action, bytes, category] rows)"
    )
