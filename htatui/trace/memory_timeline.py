"""Memory timelines: `prof.export_memory_timeline("x.json")` and its raw `("x.raw.json.gz")` rows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from htatui.trace.memory_recording import (
    CATEGORY_SCHEMA,
    EVENT_SCHEMA,
    INT64_MAX,
    INT64_MIN,
    MemoryInputError,
    MemoryRecording,
)

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


def refuse_constant(name: str) -> float:
    """Python's json accepts NaN and Infinity; no byte count or time is either."""
    raise ValueError(f"{name} is not a number JSON allows")


def _numbers(values: Iterable[Any]) -> bool:
    # The range test also refuses NaN and infinities (every comparison with them is false).
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and INT64_MIN <= v <= INT64_MAX for v in values)


def read_timeline(path: Path, times: list[Any], sizes: list[list[Any]]) -> MemoryRecording:
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


def read_raw_timeline(path: Path, rows: list[list[Any]]) -> MemoryRecording:
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
    recording = read_timeline(path, times, [[0, *s] for s in sizes])
    return MemoryRecording(path, "raw_timeline", recording.events, categories=recording.categories)
