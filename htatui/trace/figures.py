"""A parsed file's headline figures (`info`'s per-rank columns), made in one select when it is parsed.

The cache keeps them as one of an entry's small tables (`cache.store`), so a cached `info` answers
without reading the rank's events. They are the file's own, before its rank is placed on a job's
time base: the first start and last end are kept rather than the span, and the span is taken
after the rank's shift is added to both (`analysis.core.rank_figures`), which is the span of the
shifted events exactly (adding one number to every value keeps which is the least and greatest).
"""

from __future__ import annotations

import polars as pl

from htatui.trace.kineto import GPU_ACTIVITY_CATS, GRAPH_LAUNCH_APIS
from htatui.trace.step_sources import spans_of, step_source, steps_by_start

OVERLAP_MIN_US = 20.0
"""Kernels on one stream may overlap by a few µs (Hopper's programmatic dependent launch, clock
jitter: up to 13 µs on the shared H100 traces); more than this, and more than half the kernel,
is a merged or broken trace."""

FIGURES_SCHEMA: dict[str, pl.DataType] = {
    "events": pl.Int64(),
    "kernels": pl.Int64(),
    "streams": pl.Int64(),
    "memory_events": pl.Int64(),
    "first_start_us": pl.Float64(),
    "last_end_us": pl.Float64(),
    "iterations": pl.List(pl.Int64()),
    "steps_by_start": pl.List(pl.Int64()),
    "step_source": pl.Utf8(),
    "gpu_rows": pl.Int64(),
    "overlap_kernels": pl.Int64(),
    "overlap_streams": pl.Utf8(),
    "overlap_us": pl.Float64(),
    "early_kernels": pl.Int64(),
    "early_us": pl.Float64(),
    "graph_launches": pl.Int64(),
    "graph_kernels": pl.Int64(),
}
"""One row: events, kernels, streams carrying GPU activity, `[memory]` events, the first start and
last end of the complete ("X") events (null without one; µs on the frame's own time base), the
step numbers present, ascending; and what the load-time checks and the scope's header read, so a
cached rank answers them unread: the step numbers by start and where the steps come from
(`step_sources.step_spans`, the source's label; null without steps), the rows
of GPU activity, the kernels overlapping the one before them on their stream (`stream_overlaps`),
the GPU work that starts before its launch call, with the most it leads by (`early_launches`),
and the CUDA/HIP graph launches with the device rows they replayed."""


def file_figures(events: pl.DataFrame) -> pl.DataFrame:
    """The figures of an event frame as one `FIGURES_SCHEMA` row (a few columns read, none copied)."""
    timed = pl.col("ph") == "X"
    gpu = timed & pl.col("cat").is_in(list(GPU_ACTIVITY_CATS))
    figures = events.select(
        events=pl.len().cast(pl.Int64),
        kernels=(pl.col("cat") == "kernel").sum().cast(pl.Int64),
        streams=pl.col("stream").filter(gpu).drop_nulls().n_unique().cast(pl.Int64),
        memory_events=(pl.col("name") == "[memory]").sum().cast(pl.Int64),
        first_start_us=pl.col("ts").filter(timed).min().cast(pl.Float64),
        last_end_us=pl.col("end").filter(timed).max().cast(pl.Float64),
        iterations=pl.col("iteration").drop_nulls().unique().sort().cast(pl.Int64).implode(),
        gpu_rows=pl.col("cat").is_in(list(GPU_ACTIVITY_CATS)).sum().cast(pl.Int64),
    )
    narrow = events.select("ph", "cat", "name", "ts", "end", "dur")
    source = step_source(narrow)
    spans = spans_of(narrow, source)
    kernels, streams, overlap_us = overlap_summary(events)
    early = early_launches(events)
    launches, replayed = graph_counts(events)
    return figures.with_columns(
        graph_launches=pl.lit(launches, dtype=pl.Int64),
        graph_kernels=pl.lit(replayed, dtype=pl.Int64),
        steps_by_start=pl.Series([steps_by_start(spans)], dtype=pl.List(pl.Int64)),
        step_source=pl.lit(source.label if source is not None else None, dtype=pl.Utf8),
        overlap_kernels=pl.lit(kernels, dtype=pl.Int64),
        overlap_streams=pl.lit(streams, dtype=pl.Utf8),
        overlap_us=pl.lit(overlap_us, dtype=pl.Float64),
        early_kernels=pl.lit(early.height, dtype=pl.Int64),
        early_us=pl.lit(float(early["lead_us"].max() or 0.0), dtype=pl.Float64),  # type: ignore[arg-type]
    ).select(list(FIGURES_SCHEMA))


def early_launches(events: pl.DataFrame) -> pl.DataFrame:
    """lead_us of each kernel, copy or memset that starts before the runtime or driver call that
    launched it (same correlation id): host and device clocks disagree. None of the shared traces
    has one (the least gap from a launch to its work is 2 µs)."""
    correlated = pl.col("correlation").is_not_null()
    launches = events.filter(pl.col("cat").is_in(["cuda_runtime", "cuda_driver"]) & correlated)
    return (
        events.filter(pl.col("cat").is_in(list(GPU_ACTIVITY_CATS)) & correlated)
        .select("correlation", "ts")
        .join(launches.select("correlation", launch_ts="ts").unique("correlation"), on="correlation")
        .filter(pl.col("ts") < pl.col("launch_ts"))
        .select(lead_us=pl.col("launch_ts") - pl.col("ts"))
    )


def graph_counts(events: pl.DataFrame) -> tuple[int, int]:
    """How many graph launches (cudaGraphLaunch, hipGraphLaunch) and how many device rows they replayed."""
    names = events["name"].unique()
    graph_names = names.filter(names.cast(pl.Utf8).is_in(GRAPH_LAUNCH_APIS))
    if graph_names.len() == 0:
        return 0, 0
    launches = events.filter(pl.col("name").is_in(graph_names.implode()) & pl.col("correlation").is_not_null())
    replayed = events.filter(
        pl.col("cat").is_in(list(GPU_ACTIVITY_CATS)) & pl.col("correlation").is_in(launches["correlation"].implode())
    )
    return launches.height, replayed.height


def overlap_summary(events: pl.DataFrame) -> tuple[int, str, float]:
    """How many kernels overlap the one before them on their stream (`stream_overlaps`), on which
    streams (their numbers joined by commas) and by how many µs in all."""
    heavy = stream_overlaps(events)
    streams = ",".join(map(str, heavy["stream"].unique().sort().to_list()))
    return heavy.height, streams, float(heavy["_overlap"].sum())


def stream_overlaps(events: pl.DataFrame) -> pl.DataFrame:
    """The kernels (stream, _overlap µs) that start more than OVERLAP_MIN_US, and more than half
    their length, before the kernel before them on their stream has ended."""
    kernels = (
        events.filter((pl.col("cat") == "kernel") & pl.col("stream").is_not_null())
        .select("stream", "ts", "end", "dur")
        .sort("stream", "ts")
        .with_columns(_before=pl.col("end").cum_max().shift(1).over("stream"))
        .with_columns(_overlap=(pl.col("_before") - pl.col("ts")).clip(lower_bound=0.0))
    )
    heavy = kernels.filter((pl.col("_overlap") > OVERLAP_MIN_US) & (pl.col("_overlap") > 0.5 * pl.col("dur")))
    return heavy.select("stream", "_overlap")


def valid_figures(frame: pl.DataFrame | None) -> pl.DataFrame | None:
    """`frame` when it is one row of `FIGURES_SCHEMA` (what a stored table must be to be used); else None."""
    if frame is None or frame.height != 1 or frame.schema != pl.Schema(FIGURES_SCHEMA):
        return None
    return frame
