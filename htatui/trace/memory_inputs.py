"""Readers for GPU memory recordings: CUDA allocator snapshots, `[memory]` trace events, memory timelines.

Every input becomes one `MemoryRecording`: a table of allocator events per device plus, for
snapshots, the segments and blocks the allocator held when the snapshot was taken. Inputs are
recognised by content (pickle opcodes, JSON shape), not by file name.

A snapshot is a pickle. Unpickling can run arbitrary code, so `SafeUnpickler` refuses every
global: a real snapshot holds only dicts, lists, tuples, strings and numbers.
"""

from __future__ import annotations

import io
import json
import pickle
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from htatui.trace.decode import MEMORY_ARGS_DECODER, MemoryArgs, RawEvent, TraceFormatError
from htatui.trace.events import read_raw_events
from htatui.trace.kineto import MEMORY_EVENT, PROFILER_STEP, spellings
from htatui.trace.read import gunzip_bounded

MAX_INPUT_BYTES = 2 << 30
"""Inputs larger than this (on disk, or after gunzip) are refused before they are parsed."""

UNKNOWN_SITE = "(no stack recorded)"
BEFORE_RECORDING_SITE = "(allocated before recording)"
OUTSIDE_ANNOTATIONS_SITE = "(outside annotations)"

EVENT_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "seq": pl.Int64(),
    "time_us": pl.Float64(),
    "action": pl.Utf8(),
    "addr": pl.Int64(),
    "size_bytes": pl.Int64(),
    "stream": pl.Int64(),
    "site": pl.Utf8(),
    "device_free_bytes": pl.Int64(),
    "allocated_bytes": pl.Int64(),
    "reserved_bytes": pl.Int64(),
}
"""Allocator events in recording order. `allocated_bytes`/`reserved_bytes` are the totals the
recorder itself reported (trace events, timelines); snapshots leave them null."""

SEGMENT_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "address": pl.Int64(),
    "total_size_bytes": pl.Int64(),
    "allocated_bytes": pl.Int64(),
    "stream": pl.Int64(),
    "segment_type": pl.Utf8(),
}

BLOCK_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "segment_address": pl.Int64(),
    "address": pl.Int64(),
    "size_bytes": pl.Int64(),
    "requested_bytes": pl.Int64(),
    "state": pl.Utf8(),
    "active": pl.Boolean(),
    "stream": pl.Int64(),
    "site": pl.Utf8(),
}

SPAN_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.Utf8(),
    "name": pl.Utf8(),
    "start_us": pl.Float64(),
    "end_us": pl.Float64(),
    "device": pl.Utf8(),
}
"""Named time ranges: `step` (ProfilerStep#N), `annotation` (top-level user annotations); `device`
null means every device of the recording (one rank's spans name its own devices)."""

CATEGORY_SCHEMA: dict[str, pl.DataType] = {
    "seq": pl.Int64(),
    "category": pl.Utf8(),
    "bytes": pl.Int64(),
}

TIMELINE_CATEGORIES = (
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
)
"""The profiler's memory categories, in the order of its raw export's category index."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_ACTIVE_STATES = frozenset({"active_allocated", "active_awaiting_free", "active_pending_free"})
_PICKLE_PROTOCOL_2_PLUS = b"\x80"


class MemoryInputError(Exception):
    """The file is not a memory recording htatui can read; the message is one line naming it."""


class RefusedPickle(pickle.UnpicklingError):
    """The pickle would import something (a class or function) to build its data."""


class SafeUnpickler(pickle.Unpickler):
    """Unpickles plain containers and scalars only: every global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise RefusedPickle(f"the pickle names {module}.{name}; only plain data is accepted")

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedPickle("the pickle uses persistent ids; only plain data is accepted")


@dataclass(frozen=True)
class MemoryRecording:
    """One memory input, normalised; `kind` is snapshot, trace, timeline or raw_timeline."""

    path: Path
    kind: str
    events: pl.DataFrame
    segments: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SEGMENT_SCHEMA))
    blocks: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=BLOCK_SCHEMA))
    spans: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SPAN_SCHEMA))
    categories: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CATEGORY_SCHEMA))
    stacks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Full frames (innermost first) of one allocation per site, for `site` on demand."""
    rank: int | None = None
    """For a trace: the rank its `distributedInfo` names."""

    @property
    def devices(self) -> list[str]:
        names = set(self.events["device"].unique().to_list()) | set(self.segments["device"].unique().to_list())
        return sorted(n for n in names if n is not None)


def read_memory(path: Path, max_bytes: int = MAX_INPUT_BYTES) -> MemoryRecording:
    """Read a snapshot pickle, a trace with `[memory]` events (file or folder) or a memory timeline."""
    path = Path(path)
    if path.is_dir():
        return _read_folder(path, max_bytes)
    raw = _read_capped(path, max_bytes)
    try:
        if raw[:1] == _PICKLE_PROTOCOL_2_PLUS:
            return read_snapshot_bytes(path, raw)
        return _read_json(path, raw)
    except (RecursionError, OverflowError, pl.exceptions.PolarsError) as exc:
        # Last line of defence: hostile shapes (absurd nesting, numbers past 64 bits) end in one line.
        raise MemoryInputError(f"{path}: malformed memory input ({_one_line(exc)})") from None


def _one_line(exc: BaseException) -> str:
    """An exception as one short line: polars' messages span several lines with hints."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def looks_like_snapshot(path: Path) -> bool:
    """True when the file starts like a pickle (protocol 2 or later), which memory snapshots are."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(2)
    except OSError:
        return False
    return len(head) == 2 and head[:1] == _PICKLE_PROTOCOL_2_PLUS and 2 <= head[1] <= 5


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
            return recording if not found else _ranks_together(found)
        found.append(recording)
    if not found:
        raise MemoryInputError(f"{path}: no memory snapshot, memory timeline or trace with [memory] events here")
    return found[0] if len(found) == 1 else _ranks_together(found)


def read_rank_traces(files: Sequence[tuple[int, Path]], max_bytes: int = MAX_INPUT_BYTES) -> MemoryRecording:
    """The [memory] events of a loaded job's rank files, devices named `rank R cuda:N` when there are several."""
    recordings = [read_memory(path, max_bytes) for _rank, path in files]
    if len(recordings) == 1:
        return recordings[0]
    return _ranks_together(recordings, [rank for rank, _path in files])


def _ranks_together(recordings: list[MemoryRecording], ranks: Sequence[int] | None = None) -> MemoryRecording:
    """One job's rank traces as one recording: each device is named `rank R cuda:N`."""
    from htatui.trace.discover import rank_from_filename

    events: list[pl.DataFrame] = []
    spans: list[pl.DataFrame] = []
    for position, recording in enumerate(recordings):
        rank = recording.rank if recording.rank is not None else rank_from_filename(recording.path)
        rank = ranks[position] if ranks is not None else rank
        prefix = f"rank {position if rank is None else rank} "
        events.append(recording.events.with_columns(device=pl.lit(prefix) + pl.col("device")))
        devices = recording.events["device"].unique().sort().to_list()
        spans.extend(recording.spans.with_columns(device=pl.lit(prefix + d)) for d in devices)
    merged = pl.concat(events).with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64))
    return MemoryRecording(recordings[0].path.parent, "trace", merged, spans=pl.concat(spans))


# ---------------------------------------------------------------------------------------------
# Snapshots


def read_snapshot_bytes(path: Path, raw: bytes | bytearray) -> MemoryRecording:
    """Unpickle a CUDA caching-allocator snapshot (any layout since PyTorch 1.13) without running code."""
    try:
        obj = SafeUnpickler(io.BytesIO(raw)).load()
    except RefusedPickle as exc:
        raise MemoryInputError(f"{path}: refused: {exc}") from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
        MemoryError,
    ) as exc:
        raise MemoryInputError(f"{path}: not a readable pickle (truncated or corrupt: {_one_line(exc)})") from None
    problem = shape_problem(obj)
    if problem is not None:
        raise MemoryInputError(f"{path}: refused: {problem}")
    return snapshot_from_object(path, obj)


MAX_SNAPSHOT_OBJECTS = 50_000_000
"""Objects a snapshot may hold once shared references are counted each time they are reached:
reading visits every one, so a few hundred bytes of `x = [x, x]` links must not mean 2**60 visits."""
MAX_SNAPSHOT_DEPTH = 64
"""Containers inside containers; a real snapshot nests about 8 deep (segment → block → history → frames)."""


def shape_problem(obj: Any) -> str | None:
    """Why walking `obj` as a tree would not end in reasonable time or memory, or None.

    Each container's expanded size (itself plus its items, shared ones counted each time) and
    height are computed once per container (memoised by id), so the check is linear in the
    pickle's distinct objects; a container that contains itself is refused too.
    """
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, tuple[int, list[Any]] | None]] = [(obj, None)]
    while stack:
        node, children = stack.pop()
        key = id(node)
        if children is not None:  # every child is done: this container's totals
            on_path.discard(key)
            count, inner = children
            size[key] = 1 + count - len(inner) + sum(size[id(c)] for c in inner)
            height[key] = 1 + max((height[id(c)] for c in inner), default=0)
            if size[key] > MAX_SNAPSHOT_OBJECTS:
                return f"the pickle unfolds to more than {MAX_SNAPSHOT_OBJECTS:,} objects (shared references)"
            continue
        if key in size or not isinstance(node, _CONTAINERS):
            continue
        if key in on_path:
            return "the pickle holds a container that contains itself"
        if len(on_path) >= MAX_SNAPSHOT_DEPTH:
            return f"the pickle nests containers more than {MAX_SNAPSHOT_DEPTH} deep"
        on_path.add(key)
        found = _inner_containers(node)
        stack.append((node, found))
        stack.extend((child, None) for child in found[1] if id(child) not in size)
    return None


_CONTAINERS = (dict, list, tuple, set, frozenset)


def _inner_containers(node: Any) -> tuple[int, list[Any]]:
    """How many items a container holds (a dict's keys and values) and which of them are containers."""
    if isinstance(node, dict):
        inner = [k for k in node if isinstance(k, _CONTAINERS)]
        inner.extend(v for v in node.values() if isinstance(v, _CONTAINERS))
        return 2 * len(node), inner
    return len(node), [c for c in node if isinstance(c, _CONTAINERS)]


def snapshot_from_object(path: Path, obj: Any) -> MemoryRecording:
    """Normalise an unpickled snapshot: a dict with `segments` (+ `device_traces`), or a bare segment list."""
    if isinstance(obj, list) and all(isinstance(s, dict) and "blocks" in s for s in obj):
        segments_obj: Any = obj
        traces_obj: Any = []
        annotations_obj: Any = []
    elif isinstance(obj, dict) and "segments" in obj:
        segments_obj = obj.get("segments")
        traces_obj = obj.get("device_traces") or []
        annotations_obj = obj.get("external_annotations") or []
    else:
        raise MemoryInputError(f"{path}: a pickle, but not a CUDA memory snapshot (no 'segments')")
    if not isinstance(segments_obj, list) or not isinstance(traces_obj, list):
        raise MemoryInputError(f"{path}: a pickle, but not a CUDA memory snapshot (segments is not a list)")
    stacks: dict[str, tuple[str, ...]] = {}
    try:
        segments, blocks = _segments_and_blocks(segments_obj, stacks)
        events = _trace_events(traces_obj, stacks)
        spans = _annotation_spans(annotations_obj)
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError, pl.exceptions.PolarsError) as exc:
        raise MemoryInputError(f"{path}: malformed snapshot ({type(exc).__name__}: {_one_line(exc)})") from None
    if events.height == 0 and blocks.height == 0:
        raise MemoryInputError(f"{path}: the snapshot is empty: no trace history and no allocator blocks")
    return MemoryRecording(path, "snapshot", events, segments, blocks, spans, stacks=stacks)


def _device_name(index: Any) -> str:
    return f"cuda:{int(index)}" if isinstance(index, int) else "cuda:0"


def _int(value: Any) -> int | None:
    if type(value) is not int:
        return None
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit in 64 bits")
    return value


def _segments_and_blocks(
    segments_obj: list[Any], stacks: dict[str, tuple[str, ...]]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    seg_rows: dict[str, list[Any]] = {name: [] for name in SEGMENT_SCHEMA}
    block_rows: dict[str, list[Any]] = {name: [] for name in BLOCK_SCHEMA}
    for segment in segments_obj:
        if not isinstance(segment, dict):
            raise TypeError("a segment is not a dict")
        device = _device_name(segment.get("device", 0))
        address = _int(segment.get("address"))
        stream = _int(segment.get("stream"))
        blocks = segment.get("blocks") or []
        total = _int(segment.get("total_size"))
        if total is None:
            total = sum(_int(b.get("size")) or 0 for b in blocks)
        allocated = _int(segment.get("allocated_size"))
        if allocated is None:
            allocated = sum(_int(b.get("size")) or 0 for b in blocks if b.get("state") in _ACTIVE_STATES)
        for name, value in (
            ("device", device),
            ("address", address),
            ("total_size_bytes", total),
            ("allocated_bytes", allocated),
            ("stream", stream),
            ("segment_type", str(segment.get("segment_type", ""))),
        ):
            seg_rows[name].append(value)
        offset = address
        for block in blocks:
            size = _int(block.get("size")) or 0
            state = str(block.get("state", ""))
            block_address = _int(block.get("address"))
            if block_address is None:
                block_address = offset
            frames = block.get("frames")
            requested = _int(block.get("requested_size"))
            history = block.get("history")
            if not frames and isinstance(history, list) and history and isinstance(history[0], dict):
                # Older layouts keep the allocation's stack and requested size in `history`.
                frames = history[0].get("frames")
                requested = requested if requested is not None else _int(history[0].get("real_size"))
            active = state in _ACTIVE_STATES
            site = site_of(frames, stacks) if active else None
            for name, value in (
                ("device", device),
                ("segment_address", address),
                ("address", block_address),
                ("size_bytes", size),
                ("requested_bytes", requested if requested is not None else size),
                ("state", state),
                ("active", active),
                ("stream", stream),
                ("site", site),
            ):
                block_rows[name].append(value)
            offset = None if block_address is None else block_address + size
    return pl.DataFrame(seg_rows, schema=SEGMENT_SCHEMA), pl.DataFrame(block_rows, schema=BLOCK_SCHEMA)


def _trace_events(traces_obj: list[Any], stacks: dict[str, tuple[str, ...]]) -> pl.DataFrame:
    rows: dict[str, list[Any]] = {name: [] for name in EVENT_SCHEMA}
    seq = 0
    for index, entries in enumerate(traces_obj):
        if not isinstance(entries, list):
            raise TypeError("a device trace is not a list")
        device = _device_name(index)
        for entry in entries:
            if not isinstance(entry, dict):
                raise TypeError("a trace entry is not a dict")
            time_us = entry.get("time_us")
            rows["device"].append(device)
            rows["seq"].append(seq)
            rows["time_us"].append(float(time_us) if isinstance(time_us, (int, float)) else None)
            rows["action"].append(str(entry.get("action", "")))
            rows["addr"].append(_int(entry.get("addr")))
            rows["size_bytes"].append(_int(entry.get("size")) or 0)
            rows["stream"].append(_int(entry.get("stream")))
            rows["site"].append(site_of(entry.get("frames"), stacks))
            rows["device_free_bytes"].append(_int(entry.get("device_free")))
            rows["allocated_bytes"].append(None)
            rows["reserved_bytes"].append(None)
            seq += 1
    return pl.DataFrame(rows, schema=EVENT_SCHEMA)


def _annotation_spans(annotations_obj: Any) -> pl.DataFrame:
    """START/END pairs of `external_annotations` (e.g. Optimizer.step) as spans."""
    open_at: dict[str, float] = {}
    rows: dict[str, list[Any]] = {name: [] for name in SPAN_SCHEMA}
    for item in annotations_obj if isinstance(annotations_obj, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("time_us"), (int, float)):
            continue
        name = str(item.get("name", ""))
        if item.get("stage") == "START":
            open_at[name] = float(item["time_us"])
        elif item.get("stage") == "END" and name in open_at:
            for key, value in zip(
                SPAN_SCHEMA, ("annotation", name, open_at.pop(name), float(item["time_us"]), None), strict=True
            ):
                rows[key].append(value)
    return pl.DataFrame(rows, schema=SPAN_SCHEMA)


# Frames from the allocator, the unwinder and tensor factories say nothing about who asked.
_PLUMBING_PREFIXES = (
    "torch::unwind",
    "torch::CapturedTraceback",
    "torch::cuda::",
    "c10::",
    "at::detail::",
    "at::empty",
    "at::native::empty",
    "at::(anonymous namespace)",
    "at::TensorIteratorBase",
    "at::meta::",
    "at::_ops::empty",
    "at::TensorBase::",
    "std::",
    "torch::autograd::Engine::",
    "torch::autograd::python::",
    "torch::autograd::Node::",
    "??",
    "_Py",
    "Py",
)
_LIBRARY_PATH_MARKERS = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ", "/torch/")


def site_of(frames: Any, stacks: dict[str, tuple[str, ...]] | None = None) -> str:
    """Where an allocation came from: the first user Python frame, else the C++ frame that asked.

    Frames are innermost first. A user Python frame is a `.py` file outside site-packages and the
    standard library. Without one (autograd's backward thread has none) the innermost autograd
    backward formula is taken, else the innermost frame that is not allocator, unwinder, factory
    or interpreter plumbing; C++ names lose their argument lists.
    """
    if not isinstance(frames, list) or not frames:
        return UNKNOWN_SITE
    first_python: str | None = None
    first_cpp: str | None = None
    backward_formula: str | None = None
    for frame in frames:
        if type(frame) is not dict:
            continue
        filename = frame.get("filename")
        name = frame.get("name")
        if type(filename) is str and filename.endswith(".py"):
            if not any(marker in filename for marker in _LIBRARY_PATH_MARKERS):
                first_python = f"{name} ({filename}:{frame.get('line', 0)})"
                break
            continue
        if type(name) is not str or not name:
            continue
        if backward_formula is None and name.startswith("torch::autograd::generated::"):
            backward_formula = name
        if first_cpp is None and not name.startswith(_PLUMBING_PREFIXES):
            first_cpp = name
    cpp = backward_formula or first_cpp
    site = first_python or (_function_name(cpp) if cpp else UNKNOWN_SITE)
    if stacks is not None and site not in stacks:
        stacks[site] = tuple(_frame_text(f) for f in frames if isinstance(f, dict))
    return site


@lru_cache(maxsize=65536)
def _function_name(name: str) -> str:
    """`ns::f(int, long)` → `ns::f`: the argument list of a C++ signature is noise in a site name."""
    depth = 0
    for position, char in enumerate(name):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0 and position > 0 and not name[:position].endswith("(anonymous namespace"):
            if name[position:].startswith("(anonymous namespace)"):
                continue
            return name[:position]
    return name


def _frame_text(frame: dict[str, Any]) -> str:
    filename = frame.get("filename") or "??"
    line = frame.get("line") or 0
    return f"{frame.get('name', '??')} {filename}:{line}" if line else f"{frame.get('name', '??')} {filename}"


# ---------------------------------------------------------------------------------------------
# JSON inputs: Kineto traces with [memory] events, export_memory_timeline files


_DEVICE_TYPES = {0: "cpu", 1: "cuda"}


def _read_json(path: Path, raw: bytes | bytearray) -> MemoryRecording:
    head = raw.lstrip()[:1]
    if head == b"{":
        return _read_trace(path, raw)
    if head != b"[":
        if raw[:1] in (b"(", b"}", b"]") or b"\x00" in raw[:64] or raw[:1] == b"\x80":
            raise MemoryInputError(f"{path}: neither a memory snapshot nor JSON")
        raise MemoryInputError(f"{path}: not a memory snapshot, memory timeline or trace (unrecognised content)")
    try:
        obj = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MemoryInputError(f"{path}: invalid JSON ({_one_line(exc)})") from None
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
        return _timeline(path, obj[0], obj[1])
    if isinstance(obj, list) and obj and all(isinstance(row, list) and len(row) == 4 for row in obj):
        return _raw_timeline(path, obj)
    if isinstance(obj, list) and all(isinstance(row, dict) for row in obj):
        return _read_trace(path, raw)
    raise MemoryInputError(
        f"{path}: JSON, but not a memory timeline ([times, sizes] or [time, action, bytes, category] rows)"
    )


class _MemoryEvents:
    """A trace's `[memory]` events and its step and annotation spans, a piece at a time (a `read_raw_events` sink).

    Times are the file's own µs: baseTimeNanoseconds may come after the events.
    """

    def __init__(self) -> None:
        self.memory: list[tuple[float, MemoryArgs]] = []
        self.spans: list[tuple[str, str, float, float, Any]] = []

    def add(self, events: list[RawEvent]) -> None:
        for event in events:
            if event.name == MEMORY_EVENT and event.ts is not None:
                try:
                    args = MEMORY_ARGS_DECODER.decode(event.args) if event.args else _NO_MEMORY_ARGS
                except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                    continue
                self.memory.append((float(event.ts), args))
            elif event.ph == "X" and event.ts is not None and event.dur is not None and isinstance(event.name, str):
                start = float(event.ts)
                end = start + float(event.dur)
                if event.cat in _STEP_CATS and PROFILER_STEP.match(event.name):
                    self.spans.append(("step", event.name, start, end, event.tid))
                elif event.cat in _ANNOTATION_CATS:
                    self.spans.append(("annotation", event.name, start, end, event.tid))


_NO_MEMORY_ARGS = MemoryArgs()
_STEP_CATS = spellings("user_annotation", "cpu_op")
_ANNOTATION_CATS = spellings("user_annotation")


def _read_trace(path: Path, raw: bytes | bytearray) -> MemoryRecording:
    try:
        found, header = read_raw_events(raw, _MemoryEvents, [])
    except TraceFormatError as exc:
        raise MemoryInputError(f"{path}: not a trace htatui can read for memory ({exc})") from None
    base_us = (header.base_time_ns or 0) / 1000.0
    rows: dict[str, list[Any]] = {name: [] for name in EVENT_SCHEMA}
    for seq, (ts, args) in enumerate(found.memory):
        kind = _DEVICE_TYPES.get(args.device_type or 0, f"device_type_{args.device_type}")
        device = kind if kind == "cpu" else f"{kind}:{args.device_id or 0}"
        delta = args.bytes_delta or 0
        for name, value in (
            ("device", device),
            ("seq", seq),
            ("time_us", ts + base_us),
            ("action", "alloc" if delta >= 0 else "free_completed"),
            ("addr", args.addr),
            ("size_bytes", abs(delta)),
            ("stream", None),
            ("site", None),
            ("device_free_bytes", None),
            ("allocated_bytes", args.total_allocated),
            ("reserved_bytes", args.total_reserved),
        ):
            rows[name].append(value)
    spans = [(kind, name, start + base_us, end + base_us, tid) for kind, name, start, end, tid in found.spans]
    if not found.memory:
        raise MemoryInputError(f"{path}: a trace without [memory] events (record it with profile_memory=True)")
    try:
        frame = pl.DataFrame(rows, schema=EVENT_SCHEMA).sort("time_us", "seq", maintain_order=True)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        raise MemoryInputError(f"{path}: a [memory] event holds a number that does not fit in 64 bits") from None
    frame = frame.with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64))
    top = _top_level(spans)
    info = header.distributedInfo
    rank = info.get("rank") if isinstance(info, dict) else None
    return MemoryRecording(
        path, "trace", _annotation_sites(frame, top), spans=top, rank=rank if type(rank) is int else None
    )


def _annotation_sites(frame: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """[memory] events carry no stack: their site is the top-level annotation (forward, backward…) they fall in."""
    annotations = spans.filter(pl.col("kind") == "annotation").sort("start_us")
    if annotations.height == 0:
        return frame.with_columns(site=pl.lit(OUTSIDE_ANNOTATIONS_SITE))
    located = frame.sort("time_us").join_asof(
        annotations.select("start_us", "end_us", annotation="name"), left_on="time_us", right_on="start_us"
    )
    site = (
        pl.when(pl.col("time_us") <= pl.col("end_us"))
        .then(pl.col("annotation"))
        .otherwise(pl.lit(OUTSIDE_ANNOTATIONS_SITE))
    )
    return located.with_columns(site=site).sort("seq").select(list(EVENT_SCHEMA))


def _top_level(spans: Sequence[tuple[str, str, float, float, Any]]) -> pl.DataFrame:
    """Steps, and the annotations not nested in another (non-step) annotation of the same thread."""
    steps = [s for s in spans if s[0] == "step"]
    annotations = sorted((s for s in spans if s[0] == "annotation"), key=lambda s: (s[2], -s[3]))
    top: list[tuple[str, str, float, float, Any]] = []
    open_until: dict[Any, float] = {}
    for span in annotations:
        if span[2] < open_until.get(span[4], float("-inf")):
            continue
        top.append(span)
        open_until[span[4]] = span[3]
    chosen = sorted(steps + top, key=lambda s: (s[2], s[0]))
    return pl.DataFrame(
        {
            "kind": [s[0] for s in chosen],
            "name": [s[1] for s in chosen],
            "start_us": [s[2] for s in chosen],
            "end_us": [s[3] for s in chosen],
            "device": [None] * len(chosen),
        },
        schema=SPAN_SCHEMA,
    )


def _refuse_constant(name: str) -> float:
    """Python's json accepts NaN and Infinity; no byte count or time is either."""
    raise ValueError(f"{name} is not a number JSON allows")


def _numbers(values: Iterable[Any]) -> bool:
    # The range test also refuses NaN and infinities (every comparison with them is false).
    return all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and _INT64_MIN <= v <= _INT64_MAX for v in values
    )


def _timeline(path: Path, times: list[Any], sizes: list[list[Any]]) -> MemoryRecording:
    """`export_memory_timeline(x.json)`: `[times_us, sizes]`, sizes per category at each time."""
    if not times:
        raise MemoryInputError(f"{path}: the memory timeline is empty")
    if not _numbers(times) or not all(_numbers(row) for row in sizes):
        raise MemoryInputError(f"{path}: the memory timeline holds values that are not numbers")
    width = max(len(row) for row in sizes)
    # Exports have one leading column before the profiler's eight categories.
    known: tuple[str, ...] = (
        TIMELINE_CATEGORIES if width == len(TIMELINE_CATEGORIES) else ("other", *TIMELINE_CATEGORIES)
    )
    names = tuple(known[i] if i < len(known) else f"category_{i}" for i in range(width))
    totals = [int(sum(row)) for row in sizes]
    count = len(times)
    events = pl.DataFrame(
        {
            "device": ["timeline"] * count,
            "seq": list(range(count)),
            "time_us": [float(t) for t in times],
            "action": ["sample"] * count,
            "allocated_bytes": totals,
        }
    ).with_columns(
        pl.col("seq").cast(pl.Int64),
        pl.col("allocated_bytes").cast(pl.Int64),
        size_bytes=(pl.col("allocated_bytes") - pl.col("allocated_bytes").shift(1).fill_null(0)).abs().cast(pl.Int64),
    )
    events = events.with_columns(
        [pl.lit(None, dtype=dtype).alias(name) for name, dtype in EVENT_SCHEMA.items() if name not in events.columns]
    ).select([pl.col(n).cast(t) for n, t in EVENT_SCHEMA.items()])
    categories = pl.DataFrame(
        {
            "seq": [i for i in range(count) for _ in range(width)],
            "category": [names[j] for _ in range(count) for j in range(width)],
            "bytes": [int(row[j]) if j < len(row) else 0 for row in sizes for j in range(width)],
        },
        schema=CATEGORY_SCHEMA,
    )
    return MemoryRecording(path, "timeline", events, categories=categories)


def _raw_timeline(path: Path, rows: list[list[Any]]) -> MemoryRecording:
    """`export_memory_timeline(x.raw.json.gz)`: `(time_ns, action, bytes, category)` rows; time -1 = pre-existing.

    Samples as HTA's MemoryAnalysis makes them: a new one whenever the time changes, each starting
    from the previous totals; the pre-existing rows' sample is placed at the first real time.
    """
    if not all(_numbers((row[0], row[2], row[3])) for row in rows):
        raise MemoryInputError(f"{path}: the raw memory timeline holds rows that are not numbers")
    positive = [row[0] for row in rows if row[0] >= 0]
    start = min(positive) if positive else 0
    per_category = [0] * len(TIMELINE_CATEGORIES)
    stamps: list[Any] = []
    sizes: list[list[int]] = []
    for row in rows:
        category = int(row[3])
        if not 0 <= category < len(per_category):
            category = len(per_category) - 1
        # A new sample whenever the time changes; the pre-existing rows (-1) form the first one.
        if not stamps or stamps[-1] != row[0]:
            stamps.append(row[0])
            sizes.append(list(per_category))
        per_category[category] += int(row[2])
        sizes[-1] = list(per_category)
    times = [(start if stamp < 0 else stamp) / 1000.0 for stamp in stamps]
    recording = _timeline(path, times, [[0, *s] for s in sizes])
    return MemoryRecording(path, "raw_timeline", recording.events, categories=recording.categories)
