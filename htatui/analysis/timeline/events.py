"""The events behind a timeline cell: the one under the cursor, its details, its links.

Also where a table row opens the timeline (`row_target`): a row's own times, a launch's
correlation id, or a kernel or op name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from htatui.analysis.core.names import readable_name
from htatui.analysis.timeline.index import COUNTER, OP, RUNTIME, STREAM, THREAD, RankIndex
from htatui.trace.model import TraceSet


def event_at(index: RankIndex, row: int, start_us: float, end_us: float) -> dict[str, Any] | None:
    """The event of `row` that covers most of [start_us, end_us) (the earliest on a tie)."""
    spec = index.rows[row]
    if spec.kind == COUNTER:
        return None
    hits = index.events.filter(
        (pl.col("row") == row) & (pl.col("ts") < end_us) & ((pl.col("end") > start_us) | (pl.col("ts") >= start_us))
    )
    if hits.height == 0:
        return None
    best = (
        hits.with_columns(
            _overlap=pl.min_horizontal(pl.col("end"), pl.lit(end_us))
            - pl.max_horizontal(pl.col("ts"), pl.lit(start_us))
        )
        .sort(["_overlap", "ts"], descending=[True, False])
        .head(1)
        .drop("_overlap")
    )
    return index.looked_up(best).row(0, named=True)


def overlaps_cell(event: dict[str, Any], row: int, start_us: float, end_us: float) -> bool:
    """Whether `event` is on `row` and overlaps [start_us, end_us) (the test `event_at` filters by)."""
    ts, end = float(event["ts"]), float(event["end"])
    return int(event["row"]) == row and ts < end_us and (end > start_us or ts >= start_us)


def launch_of(index: RankIndex, event: dict[str, Any]) -> dict[str, Any] | None:
    """The runtime call that launched a GPU event (same correlation id on a thread row)."""
    corr = event.get("correlation")
    if event.get("kind") != STREAM or corr is None:
        return None
    runtime = index.events.filter((pl.col("kind") == THREAD) & (pl.col("type") == RUNTIME))
    found = runtime.filter(index.lookup("correlation", runtime) == corr)
    return index.looked_up(found.head(1)).row(0, named=True) if found.height else None


def op_of(index: RankIndex, launch: dict[str, Any]) -> dict[str, Any] | None:
    """The innermost CPU op that encloses a runtime call on its thread."""
    found = index.events.filter(
        (pl.col("kind") == THREAD)
        & (pl.col("type") == OP)
        & (pl.col("key") == launch["key"])
        & (pl.col("ts") <= launch["ts"])
        & (pl.col("end") >= launch["end"])
        & (pl.col("depth") < launch["depth"])
    ).sort("depth", descending=True)
    return index.looked_up(found.head(1)).row(0, named=True) if found.height else None


def kernels_of(index: RankIndex, event: dict[str, Any]) -> pl.DataFrame:
    """GPU events launched by a runtime call (by correlation) or from inside a CPU event
    (the runtime calls nested in it on its thread), in time order."""
    device = index.events.filter(pl.col("kind") == STREAM)
    if event.get("kind") != THREAD:
        return index.looked_up(device.clear())
    if event.get("type") == RUNTIME and event.get("correlation") is not None:
        launched = device.filter(index.lookup("correlation", device) == event["correlation"])
        return index.looked_up(launched.sort("ts"))
    calls = index.events.filter(
        (pl.col("kind") == THREAD)
        & (pl.col("type") == RUNTIME)
        & (pl.col("key") == event["key"])
        & (pl.col("ts") >= event["ts"])
        & (pl.col("end") <= event["end"])
    )
    nested = index.lookup("correlation", calls).drop_nulls()
    launched = device.filter(index.lookup("correlation", device).is_in(nested.implode()))
    return index.looked_up(launched.sort("ts"))


@dataclass(frozen=True)
class EventDetails:
    """What the cursor shows about one event."""

    name: str
    start_us: float
    dur_us: float
    row: str
    stream: int | None
    correlation: int | None
    launch: str | None
    op: str | None
    kernels: list[str]
    kernel_count: int


def details(index: RankIndex, event: dict[str, Any], most: int = 3) -> EventDetails:
    """Name, times, stream, correlation, the launching call and its op, and the kernels."""
    launch = launch_of(index, event)
    op = op_of(index, launch) if launch is not None else None
    kernels = kernels_of(index, event)
    return EventDetails(
        name=str(event["name"]),
        start_us=float(event["ts"]),
        dur_us=float(event["dur"]),
        row=index.rows[int(event["row"])].label,
        stream=event.get("stream"),
        correlation=event.get("correlation"),
        launch=str(launch["name"]) if launch is not None else None,
        op=str(op["name"]) if op is not None else None,
        kernels=[readable_name(str(n)) for n in kernels["name"].head(most).to_list()],
        kernel_count=kernels.height,
    )


def linked_event(index: RankIndex, event: dict[str, Any]) -> dict[str, Any] | None:
    """Follow a launch to its first kernel, or a kernel back to its launch."""
    if event.get("kind") == STREAM:
        return launch_of(index, event)
    kernels = kernels_of(index, event)
    return kernels.row(0, named=True) if kernels.height else None


def row_window(row: dict[str, Any] | None) -> tuple[int | None, float | None, float | None]:
    """(rank, start_us, end_us) of a table row, from its rank and time columns where it has
    them: start from start_us / ts_us, end from end_us or start + dur_us (None where missing)."""
    if not row:
        return None, None, None
    rank = row.get("rank")
    start = next((row[c] for c in ("start_us", "ts_us") if isinstance(row.get(c), (int, float))), None)
    end = row.get("end_us")
    if not isinstance(end, (int, float)) and start is not None and isinstance(row.get("dur_us"), (int, float)):
        end = start + row["dur_us"]
    return (
        int(rank) if isinstance(rank, int) else None,
        float(start) if start is not None else None,
        float(end) if isinstance(end, (int, float)) else None,
    )


def correlation_window(traces: TraceSet, rank: int, correlation: int) -> tuple[float, float] | None:
    """From the start of a launch to the end of its GPU work (all events with that correlation
    id on the rank), for table rows that name a launch but carry no time."""
    if rank not in traces.ranks:
        return None
    found = traces.ranks[rank].events.filter((pl.col("correlation") == correlation) & (pl.col("ph") == "X"))
    low, high = found["ts"].min(), found["end"].max()
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)):
        return None
    return float(low), float(high)


def name_window(traces: TraceSet, rank: int, name: str) -> tuple[float, float] | None:
    """The longest complete event called `name` on the rank (a kernel or op row of a table)."""
    if rank not in traces.ranks:
        return None
    events = traces.ranks[rank].events
    found = events.filter((pl.col("name").cast(pl.Utf8) == name) & (pl.col("ph") == "X")).sort("dur").tail(1)
    if found.height == 0:
        return None
    return float(found["ts"][0]), float(found["end"][0])


NAME_COLUMNS = ("name", "kernel", "op", "call_path")
"""The columns that name the event a table row stands for (the first one present)."""


def row_event_name(row: dict[str, Any] | None) -> str | None:
    """The name of the event a table row stands for, so the timeline selects that event's own row
    (a kernel's stream, not another stream busy at the same time)."""
    for column in NAME_COLUMNS:
        value = (row or {}).get(column)
        if isinstance(value, str) and value:
            return value.strip()
    return None


def row_target(traces: TraceSet, row: dict[str, Any] | None) -> tuple[int | None, float | None, float | None]:
    """Where `t` on a table row opens the timeline: the row's own times (row_window); else, for a
    row naming a launch by correlation id, the launch-to-kernel span; else, for a row naming a
    kernel or op, its longest instance on the row's rank; else the rank alone."""
    rank, start, end = row_window(row)
    if start is not None or not row or rank is None:
        return rank, start, end
    found = None
    if isinstance(row.get("correlation"), int):
        found = correlation_window(traces, rank, row["correlation"])
    elif isinstance(row.get("name"), str):
        found = name_window(traces, rank, row["name"])
    return (rank, *found) if found else (rank, None, None)
