"""A parsed file's headline figures (`info`'s per-rank columns), made in one select when it is parsed.

The cache keeps them as one of an entry's small tables (`cache.store`), so a cached `info` answers
without reading the rank's events. They are the file's own, before its rank is placed on a job's
time base: the first start and last end are kept rather than the span, and the span is taken
after the rank's shift is added to both (`analysis.core.rank_figures`), which is the span of the
shifted events exactly (adding one number to every value keeps which is the least and greatest).
"""

from __future__ import annotations

import polars as pl

from htatui.trace.kineto import GPU_ACTIVITY_CATS

FIGURES_SCHEMA: dict[str, pl.DataType] = {
    "events": pl.Int64(),
    "kernels": pl.Int64(),
    "streams": pl.Int64(),
    "memory_events": pl.Int64(),
    "first_start_us": pl.Float64(),
    "last_end_us": pl.Float64(),
    "iterations": pl.List(pl.Int64()),
}
"""One row: events, kernels, streams carrying GPU activity, `[memory]` events, the first start and
last end of the complete ("X") events (null without one; µs on the frame's own time base), and the
step numbers present, ascending."""


def file_figures(events: pl.DataFrame) -> pl.DataFrame:
    """The figures of an event frame as one `FIGURES_SCHEMA` row (a few columns read, none copied)."""
    timed = pl.col("ph") == "X"
    gpu = timed & pl.col("cat").is_in(list(GPU_ACTIVITY_CATS))
    return events.select(
        events=pl.len().cast(pl.Int64),
        kernels=(pl.col("cat") == "kernel").sum().cast(pl.Int64),
        streams=pl.col("stream").filter(gpu).drop_nulls().n_unique().cast(pl.Int64),
        memory_events=(pl.col("name") == "[memory]").sum().cast(pl.Int64),
        first_start_us=pl.col("ts").filter(timed).min().cast(pl.Float64),
        last_end_us=pl.col("end").filter(timed).max().cast(pl.Float64),
        iterations=pl.col("iteration").drop_nulls().unique().sort().cast(pl.Int64).implode(),
    )


def valid_figures(frame: pl.DataFrame | None) -> pl.DataFrame | None:
    """`frame` when it is one row of `FIGURES_SCHEMA` (what a stored table must be to be used); else None."""
    if frame is None or frame.height != 1 or frame.schema != pl.Schema(FIGURES_SCHEMA):
        return None
    return frame
