"""A Kineto trace's `[memory]` events (`profile_memory=True`) and its step and annotation spans."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from htatui.sources import SourcePath
from htatui.trace.decode import MEMORY_ARGS_DECODER, MemoryArgs, RawEvent, TraceFormatError
from htatui.trace.events import read_raw_events
from htatui.trace.fetch import read_source_bytes
from htatui.trace.kineto import MEMORY_EVENT, PROFILER_STEP, spellings
from htatui.trace.memory_recording import (
    EVENT_SCHEMA,
    OUTSIDE_ANNOTATIONS_SITE,
    SPAN_SCHEMA,
    MemoryInputError,
    MemoryRecording,
)
from htatui.trace.reread import REREAD

_DEVICE_TYPES = {0: "cpu", 1: "cuda"}

MEMORY_ARGS_SCHEMA: dict[str, pl.DataType] = {
    "index": pl.Int64(),
    "time_us": pl.Float64(),
    "device": pl.Utf8(),
    "addr": pl.Int64(),
    "bytes": pl.Int64(),
    "total_allocated": pl.Int64(),
    "total_reserved": pl.Int64(),
}
"""One row per `[memory]` event: its position in the file (`index`, as in the event frame), its
time (the file's own µs), device (`cuda:0`, `cpu`), address, signed `Bytes` and the allocator's
totals after it."""

Span = tuple[str, str, float, float, Any]
"""kind (`step` or `annotation`), name, start µs, end µs, thread."""


class _MemoryEvents:
    """A trace's `[memory]` events and its step and annotation spans, a piece at a time (a `read_raw_events` sink).

    Times are the file's own µs: baseTimeNanoseconds may come after the events.
    """

    def __init__(self) -> None:
        self.events_seen = 0
        self.memory: list[tuple[int, float, MemoryArgs]] = []
        self.spans: list[Span] = []

    def add(self, events: list[RawEvent]) -> None:
        for position, event in enumerate(events, start=self.events_seen):
            if event.name == MEMORY_EVENT and event.ts is not None:
                try:
                    args = MEMORY_ARGS_DECODER.decode(event.args) if event.args else _NO_MEMORY_ARGS
                except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                    continue
                self.memory.append((position, float(event.ts), args))
            elif event.ph == "X" and event.ts is not None and event.dur is not None and isinstance(event.name, str):
                kind = span_kind(str(event.cat), event.name)
                if kind is not None:
                    self.spans.append(
                        (kind, event.name, float(event.ts), float(event.ts) + float(event.dur), event.tid)
                    )
        self.events_seen += len(events)

    def frame(self, path: SourcePath) -> pl.DataFrame:
        rows: dict[str, list[Any]] = {name: [] for name in MEMORY_ARGS_SCHEMA}
        for position, ts, args in self.memory:
            kind = _DEVICE_TYPES.get(args.device_type or 0, f"device_type_{args.device_type}")
            for name, value in (
                ("index", position),
                ("time_us", ts),
                ("device", kind if kind == "cpu" else f"{kind}:{args.device_id or 0}"),
                ("addr", args.addr),
                ("bytes", args.bytes_delta or 0),
                ("total_allocated", args.total_allocated),
                ("total_reserved", args.total_reserved),
            ):
                rows[name].append(value)
        try:
            return pl.DataFrame(rows, schema=MEMORY_ARGS_SCHEMA)
        except (TypeError, OverflowError, pl.exceptions.PolarsError):
            raise MemoryInputError(f"{path}: a [memory] event holds a number that does not fit in 64 bits") from None


_NO_MEMORY_ARGS = MemoryArgs()
_STEP_CATS = spellings("user_annotation", "cpu_op")
_ANNOTATION_CATS = spellings("user_annotation")


def span_kind(category: str, name: str) -> str | None:
    """`step` for a ProfilerStep, `annotation` for a user annotation, else None."""
    if category in _STEP_CATS and PROFILER_STEP.match(name):
        return "step"
    return "annotation" if category in _ANNOTATION_CATS else None


def read_trace_memory(path: Path, raw: bytes | bytearray) -> MemoryRecording:
    """The `[memory]` events of one trace file's bytes, on the file's own time base."""
    try:
        found, header = read_raw_events(raw, _MemoryEvents, [])
    except TraceFormatError as exc:
        raise MemoryInputError(f"{path}: not a trace htatui can read for memory ({exc})") from None
    if not found.memory:
        raise MemoryInputError(f"{path}: a trace without [memory] events (record it with profile_memory=True)")
    base_us = (header.base_time_ns or 0) / 1000.0
    memory = found.frame(path).with_columns(pl.col("time_us") + base_us)
    spans = [(kind, name, start + base_us, end + base_us, tid) for kind, name, start, end, tid in found.spans]
    info = header.distributedInfo
    rank = info.get("rank") if isinstance(info, dict) else None
    return recording_from_events(path, memory, spans, rank if type(rank) is int else None)


def read_memory_args(path: SourcePath) -> pl.DataFrame:
    """`MEMORY_ARGS_SCHEMA` rows of the trace file at `path`: what a loaded job's frame does not keep
    of its `[memory]` events (kept per file version by `reread.REREAD`; a remote file is read
    through its source as any other)."""
    try:
        return REREAD.read(path, "memory_args", _read_memory_args)
    except OSError as exc:
        raise MemoryInputError(f"{path}: cannot read it again for its [memory] events ({exc.strerror})") from None


def _read_memory_args(path: SourcePath) -> pl.DataFrame:
    try:
        found, _header = read_raw_events(read_source_bytes(path), _MemoryEvents, [])
    except (OSError, TraceFormatError) as exc:
        raise MemoryInputError(f"{path}: cannot read it again for its [memory] events ({exc})") from None
    return found.frame(path)


def recording_from_events(
    path: SourcePath, memory: pl.DataFrame, spans: Sequence[Span], rank: int | None
) -> MemoryRecording:
    """A trace recording from its `[memory]` rows (`MEMORY_ARGS_SCHEMA`, `time_us` on the time base
    wanted) and its step and annotation spans (the same base)."""
    delta = pl.col("bytes")
    frame = (
        memory.sort("time_us", "index", maintain_order=True)
        .select(
            device=pl.col("device"),
            seq=pl.int_range(pl.len(), dtype=pl.Int64),
            time_us=pl.col("time_us"),
            action=pl.when(delta >= 0).then(pl.lit("alloc")).otherwise(pl.lit("free_completed")),
            addr=pl.col("addr"),
            size_bytes=delta.abs(),
            stream=pl.lit(None, dtype=pl.Int64),
            site=pl.lit(None, dtype=pl.Utf8),
            device_free_bytes=pl.lit(None, dtype=pl.Int64),
            allocated_bytes=pl.col("total_allocated"),
            reserved_bytes=pl.col("total_reserved"),
        )
        .cast(EVENT_SCHEMA)  # type: ignore[arg-type]
    )
    top = _top_level(spans)
    return MemoryRecording(path, "trace", _annotation_sites(frame, top), spans=top, rank=rank)


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


def _top_level(spans: Sequence[Span]) -> pl.DataFrame:
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
