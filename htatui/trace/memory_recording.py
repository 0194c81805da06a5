"""A GPU memory recording, normalised: allocator events per device, and for snapshots the segments
and blocks the allocator held when it was taken (the readers: memory_inputs.py, memory_snapshot.py,
memory_events.py, memory_timeline.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from htatui.errors import HtatuiError
from htatui.sources import SourcePath

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

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class MemoryInputError(HtatuiError):
    """The file is not a memory recording htatui can read; the message is one line naming it."""


@dataclass(frozen=True)
class MemoryRecording:
    """One memory input, normalised; `kind` is snapshot, trace, timeline or raw_timeline."""

    path: SourcePath
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


def one_line(exc: BaseException) -> str:
    """An exception as one short line: polars' messages span several lines with hints."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def ranks_together(path: SourcePath, recordings: Sequence[tuple[int, MemoryRecording]]) -> MemoryRecording:
    """Several ranks' trace recordings as one recording of `path` (their folder, their job): each
    device is named `rank R cuda:N`, the events in the order given."""
    events: list[pl.DataFrame] = []
    spans: list[pl.DataFrame] = []
    for rank, recording in recordings:
        prefix = f"rank {rank} "
        events.append(recording.events.with_columns(device=pl.lit(prefix) + pl.col("device")))
        devices = recording.events["device"].unique().sort().to_list()
        spans.extend(recording.spans.with_columns(device=pl.lit(prefix + d)) for d in devices)
    merged = pl.concat(events).with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64))
    return MemoryRecording(path, "trace", merged, spans=pl.concat(spans))
