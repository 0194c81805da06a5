"""CUDA caching-allocator snapshots (`torch.cuda.memory._dump_snapshot`) read without running code.

A snapshot is a pickle. Unpickling can run arbitrary code, so `SafeUnpickler` refuses every
global: a real snapshot holds only dicts, lists, tuples, strings and numbers; its shape is
checked (objects, depth, self-containment) before it is walked.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import polars as pl

from htatui.trace.memory_recording import (
    BLOCK_SCHEMA,
    EVENT_SCHEMA,
    INT64_MAX,
    INT64_MIN,
    SEGMENT_SCHEMA,
    SPAN_SCHEMA,
    MemoryInputError,
    MemoryRecording,
    one_line,
)
from htatui.trace.memory_sites import site_of

_ACTIVE_STATES = frozenset({"active_allocated", "active_awaiting_free", "active_pending_free"})
PICKLE_PROTOCOL_2_PLUS = b"\x80"


class RefusedPickle(pickle.UnpicklingError):
    """The pickle would import something (a class or function) to build its data."""


class SafeUnpickler(pickle.Unpickler):
    """Unpickles plain containers and scalars only: every global (class, function) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise RefusedPickle(f"the pickle names {module}.{name}; only plain data is accepted")

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedPickle("the pickle uses persistent ids; only plain data is accepted")


def looks_like_snapshot(path: Path) -> bool:
    """True when the file starts like a pickle (protocol 2 or later), which memory snapshots are."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(2)
    except OSError:
        return False
    return len(head) == 2 and head[:1] == PICKLE_PROTOCOL_2_PLUS and 2 <= head[1] <= 5


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
        raise MemoryInputError(f"{path}: not a readable pickle (truncated or corrupt: {one_line(exc)})") from None
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
        raise MemoryInputError(f"{path}: malformed snapshot ({type(exc).__name__}: {one_line(exc)})") from None
    if events.height == 0 and blocks.height == 0:
        raise MemoryInputError(f"{path}: the snapshot is empty: no trace history and no allocator blocks")
    return MemoryRecording(path, "snapshot", events, segments, blocks, spans, stacks=stacks)


def _device_name(index: Any) -> str:
    return f"cuda:{int(index)}" if isinstance(index, int) else "cuda:0"


def _int(value: Any) -> int | None:
    if type(value) is not int:
        return None
    if not INT64_MIN <= value <= INT64_MAX:
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
