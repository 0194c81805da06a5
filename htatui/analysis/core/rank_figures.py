"""A rank's headline figures (`info`'s columns and the dataset summary's): span, kernels, streams, steps.

Computed in one select over the few columns they read: filtering a whole event frame first copies
all of its columns, which on a 2 M-event rank was ~400 MB more peak memory than the frame itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.trace.kineto import GPU_ACTIVITY_CATS


@dataclass(frozen=True)
class RankFigures:
    span_us: float
    """Last end minus first start over complete ("X") events; 0 when there are none."""
    kernels: int
    streams: int
    """Streams that carry GPU activity (kernels, memcpy, memset)."""
    memory_events: int
    iterations: list[int]
    """The step numbers present, ascending."""


def rank_figures(events: pl.DataFrame) -> RankFigures:
    timed = pl.col("ph") == "X"
    row = events.select(
        start=pl.col("ts").filter(timed).min(),
        end=pl.col("end").filter(timed).max(),
        kernels=(pl.col("cat") == "kernel").sum(),
        streams=pl.col("stream").filter(timed & pl.col("cat").is_in(list(GPU_ACTIVITY_CATS))).drop_nulls().n_unique(),
        memory_events=(pl.col("name") == "[memory]").sum(),
    ).row(0, named=True)
    start, end = row["start"], row["end"]
    span = (_number(end) - _number(start)) if start is not None else 0.0
    iterations = events["iteration"].drop_nulls().unique().sort().to_list()
    return RankFigures(span, int(row["kernels"]), int(row["streams"]), int(row["memory_events"]), iterations)


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0
