"""Launch-queue length per stream: how many launched GPU operations are waiting to start
(docs/semantics-counters.md, queue).

Every launch call adds 1 to its stream's queue when the call starts on the CPU and removes 1
when its GPU work starts.

Corrected (default): the launch calls of `htatui.analysis.views.launch` (CUDA, driver, HIP, MTIA,
async memcpy/memset) plus graph launches — a cudaGraphLaunch is one queue entry on the stream
of its first operation, removed when that operation starts (counting every kernel of a graph
would push real queues past the 1024-entry limit: trace_diff/test reaches 1338). Events at the
same timestamp are merged into one change point, so the series is a true step function (one
row per stream and timestamp). HTA-compatible mode reproduces HTA 0.6.1's
`get_queue_length_time_series` (its 12 enqueue names, `stream != -1` dequeues, one row per
event, graph launches ignored). Statistics are over the change points as in HTA, plus a
time-weighted mean. docs/semantics-counters.md lists the differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.columns import RANK, STREAM, ColumnSpec, TableColumns
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.pandas_like import describe, sort_like_pandas
from htatui.analysis.core.prepare import prepare
from htatui.trace.kineto import (
    GPU_ACTIVITY_CATS,
    GRAPH_LAUNCH_APIS,
    KERNEL_LAUNCH_APIS,
    MEMORY_LAUNCH_APIS,
)
from htatui.trace.model import TraceSet

CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024


SERIES_SPEC = TableColumns(
    RANK,
    STREAM,
    ColumnSpec("ts_us", pl.Float64(), "when the queue length changed", "key"),
    ColumnSpec(
        "queue_length", pl.Int64(), "operations launched on the stream and not yet started, from ts_us on", "key"
    ),
)
SERIES_COLUMNS = SERIES_SPEC.schema

_QUEUE = "the queue length (launched, not yet started) over its change points"
SPEC = TableColumns(
    RANK,
    STREAM,
    ColumnSpec("count", pl.Int64(), "change points of the stream's queue length", "low"),
    ColumnSpec("min", pl.Float64(), f"smallest {_QUEUE}", "low"),
    ColumnSpec("max", pl.Float64(), f"largest {_QUEUE}", "key"),
    ColumnSpec("mean", pl.Float64(), f"mean of {_QUEUE} (HTA's)"),
    ColumnSpec("std", pl.Float64(), f"sample standard deviation of {_QUEUE}", "low"),
    ColumnSpec("p25", pl.Float64(), f"first quartile of {_QUEUE}", "low"),
    ColumnSpec("p50", pl.Float64(), f"median of {_QUEUE}"),
    ColumnSpec("p75", pl.Float64(), f"third quartile of {_QUEUE}", "low"),
    ColumnSpec(
        "time_weighted_mean", pl.Float64(), "the queue length averaged over time", "key", label="mean over time"
    ),
)
COLUMNS = SPEC.schema

BLOCKED_SPEC = TableColumns(
    RANK,
    STREAM,
    ColumnSpec("blocked_us", pl.Float64(), "time the stream's queue was at or above --max-queue-length", "key"),
    ColumnSpec("blocked_pct", pl.Float64(), "blocked_us as a share of the rank's queue-series span", "key"),
)
BLOCKED_COLUMNS = BLOCKED_SPEC.schema

OVERVIEW_SPEC = SPEC + TableColumns(*BLOCKED_SPEC.specs[2:])


@dataclass(frozen=True)
class QueueOptions(CommonOptions):
    """Queue-length knobs (HTA's defaults)."""

    max_queue_length: int = knob(
        CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
        flag="--max-queue-length",
        help="queue: length counted as full",
        kind="int",
        label="blocked at queue ≥",
        minimum=1,
    )
    """A stream whose queue holds at least this many operations counts as blocked."""
    include_graph_launches: bool = True
    """Corrected mode only: count each graph launch as one queue entry (HTA ignores them)."""


def _typed(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return frame.select([pl.col(name).cast(dtype) for name, dtype in schema.items()])


def time_weighted_mean(column: str) -> pl.Expr:
    """Σ value × (next ts − ts) / (last ts − first ts) over a step series sorted by ts_us, as
    an aggregation inside group_by (rows keep their order within a group); null when the
    series spans no time."""
    held = (pl.col("ts_us").shift(-1) - pl.col("ts_us")).fill_null(0.0)
    span = pl.col("ts_us").max() - pl.col("ts_us").min()
    return pl.when(span > 0).then((pl.col(column) * held).sum() / span)


def series(traces: TraceSet, options: QueueOptions) -> pl.DataFrame:
    """The queue length per (rank, stream) as a step series: rank, stream, ts_us, queue_length.

    Each row is a change point; the value holds until the next row of the same stream.
    """
    return _series_and_spans(traces, options)[0]


def _series_and_spans(traces: TraceSet, options: QueueOptions) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The series and each rank's span (rank, span) for `blocked`: made once per job and options,
    shared by the summary, overview, series and blocked tables."""
    key = ("queue.series", *selection_key(traces, options, "include_graph_launches"))
    return memoised(traces, key, lambda: _make_series_and_spans(traces, options))


def _make_series_and_spans(traces: TraceSet, options: QueueOptions) -> tuple[pl.DataFrame, pl.DataFrame]:
    columns = ("rank", "index", "cat", "name", "stream", "correlation", "ts")
    events = prepare(traces, options, columns=columns).events
    frame = _series(events, options)
    if options.hta_compat:
        spans = (
            events.filter(pl.col("cat") != hta.TRACE_SPAN_CAT)
            .group_by("rank")
            .agg(span=pl.col("ts").max() - pl.col("ts").min())
        )
    else:
        spans = frame.group_by("rank").agg(span=pl.col("ts_us").max() - pl.col("ts_us").min())
    return frame, spans


def _series(events: pl.DataFrame, options: QueueOptions) -> pl.DataFrame:
    if events.height == 0:
        return pl.DataFrame(schema=SERIES_COLUMNS)
    steps = _compat_steps(events) if options.hta_compat else _corrected_steps(events, options)
    if steps.height == 0:
        return pl.DataFrame(schema=SERIES_COLUMNS)
    if options.hta_compat:
        # One row per event, sorted by time the way HTA's pandas sort orders equal times.
        ordered = sort_like_pandas(steps, "ts_us", integer_ts=True).drop("_order")
    else:
        # One change point per (rank, stream, ts): a single-key sort by time, then groups in
        # order of first appearance (multi-key sorts cost several times more on big ranks).
        ordered = (
            steps.sort("ts_us").group_by("rank", "stream", "ts_us", maintain_order=True).agg(pl.col("delta").sum())
        )
    out = ordered.with_columns(queue_length=pl.col("delta").cum_sum().over("rank", "stream"))
    return _typed(out.sort("rank", "stream", maintain_order=True), SERIES_COLUMNS)


def _corrected_steps(events: pl.DataFrame, options: QueueOptions) -> pl.DataFrame:
    names = KERNEL_LAUNCH_APIS + MEMORY_LAUNCH_APIS + (GRAPH_LAUNCH_APIS if options.include_graph_launches else ())
    linked = events.filter(pl.col("correlation").is_not_null())
    device_mask = pl.col("cat").is_in(GPU_ACTIVITY_CATS)
    host = linked.filter(pl.col("name").is_in(names) & ~device_mask).select("rank", "correlation", host_ts="ts")
    device = linked.filter(device_mask & pl.col("stream").is_not_null()).select("rank", "correlation", "stream", "ts")
    # Each launch call is one queue entry: +1 when the call starts, −1 when its GPU work starts.
    # A graph launch is one entry too, leaving when its first operation starts (counting each
    # of its kernels would push queues past the 1024-entry hardware limit on real traces).
    matched = (
        device.join(host, on=["rank", "correlation"], how="inner")
        .sort("ts")
        .unique(["rank", "correlation"], keep="first", maintain_order=True)
    )
    enqueue = matched.select("rank", "stream", ts_us="host_ts", delta=pl.lit(1, dtype=pl.Int64))
    dequeue = matched.select("rank", "stream", ts_us="ts", delta=pl.lit(-1, dtype=pl.Int64))
    return pl.concat([enqueue, dequeue], how="vertical")


def _compat_steps(events: pl.DataFrame) -> pl.DataFrame:
    """HTA's _get_queue_length_time_series_for_rank (docs/semantics-counters.md, queue)."""
    # Every pairing below is on a real correlation id, so rows without one never take part.
    rows = events.filter(pl.col("correlation").is_not_null() & (pl.col("cat") != hta.TRACE_SPAN_CAT))
    correlation = pl.col("correlation").fill_null(-1)
    stream = pl.col("stream").fill_null(-1)
    # HTA's index_correlation > 0: a host row whose correlation id also has an S2 device row,
    # and that row is not the file's first event (index_correlation holds the partner's
    # position, and 0 reads as "no partner").
    s2_correlations = (
        rows.filter(hta.device_row() & (correlation != -1) & (pl.col("index") > 0))
        .select("rank", correlation=correlation)
        .unique()
    )
    runtime = (
        rows.filter(pl.col("name").is_in(hta.RUNTIME_LAUNCH_EVENTS) & ~hta.device_row())
        .with_columns(correlation=correlation)
        .filter(pl.col("correlation") != -1)
        .join(s2_correlations, on=["rank", "correlation"], how="semi")
    )
    gpu = rows.filter(stream != -1).with_columns(correlation=correlation)
    # HTA concatenates the enqueues (file order; one per matching device row) and the dequeues.
    enqueue = (
        runtime.select("rank", "correlation", "ts", "index")
        .join(
            gpu.select("rank", "correlation", "stream", gpu_index="index"),
            on=["rank", "correlation"],
            how="inner",
        )
        .sort("rank", "index", "gpu_index")
    )
    dequeue = gpu.join(runtime.select("rank", "correlation").unique(), on=["rank", "correlation"], how="semi").sort(
        "rank", "index"
    )
    merged = pl.concat(
        [
            enqueue.select("rank", "stream", ts_us="ts", delta=pl.lit(1, dtype=pl.Int64)),
            dequeue.select("rank", "stream", ts_us="ts", delta=pl.lit(-1, dtype=pl.Int64)),
        ],
        how="vertical",
    )
    return merged.with_columns(_order=pl.int_range(pl.len(), dtype=pl.Int64).over("rank"))


def summarize(series_frame: pl.DataFrame) -> pl.DataFrame:
    """Statistics of an already computed series (see `summary`)."""
    if series_frame.height == 0:
        return pl.DataFrame(schema=COLUMNS)
    by = ["rank", "stream"]
    out = series_frame.group_by(by).agg(
        *describe("queue_length"), time_weighted_mean=time_weighted_mean("queue_length")
    )
    return _typed(out.sort(by), COLUMNS)


def compute(traces: TraceSet, options: QueueOptions) -> pl.DataFrame:
    """Per (rank, stream): count, min, max, mean, std, p25, p50, p75 of the queue length over its
    change points (as HTA), plus the time-weighted mean."""
    return summarize(series(traces, options))


def summary(traces: TraceSet, options: QueueOptions) -> pl.DataFrame:
    """Alias of `compute`."""
    return compute(traces, options)


def blocked(traces: TraceSet, options: QueueOptions) -> pl.DataFrame:
    """Per (rank, stream), for every stream: time spent with the queue at or above
    `max_queue_length` (blocked_us) and that time as a % of the rank's span (blocked_pct).

    The span is the rank's queue-series span (first to last change point); in HTA-compatible
    mode it is HTA's trace duration (last minus first event start of the rank).
    """
    frame, spans = _series_and_spans(traces, options)
    return blocked_from_series(frame, spans, options.max_queue_length)


def blocked_from_series(frame: pl.DataFrame, spans: pl.DataFrame, max_queue_length: int) -> pl.DataFrame:
    """blocked_us / blocked_pct from a series and a (rank, span) frame."""
    if frame.height == 0:
        return pl.DataFrame(schema=BLOCKED_COLUMNS)
    by = ["rank", "stream"]
    held = pl.col("ts_us").shift(-1).over(by) - pl.col("ts_us")
    out = (
        frame.with_columns(held=held)
        .group_by(by)
        .agg(blocked_us=pl.col("held").filter(pl.col("queue_length") >= max_queue_length).sum())
        .join(spans, on="rank", how="left")
        .with_columns(
            blocked_us=pl.col("blocked_us").fill_null(0.0),
            blocked_pct=pl.when(pl.col("span") > 0).then(pl.col("blocked_us").fill_null(0.0) / pl.col("span") * 100.0),
        )
    )
    return _typed(out.sort(by), BLOCKED_COLUMNS)


def with_blocked(summary_frame: pl.DataFrame, blocked_frame: pl.DataFrame) -> pl.DataFrame:
    """The summary per (rank, stream) with its blocked_us and blocked_pct columns."""
    blocked_columns = blocked_frame.select("rank", "stream", "blocked_us", "blocked_pct")
    return summary_frame.join(blocked_columns, on=["rank", "stream"], how="left")


def overview(traces: TraceSet, options: QueueOptions) -> pl.DataFrame:
    """`summary` and `blocked` side by side (the Counters screen's queue table)."""
    return with_blocked(compute(traces, options), blocked(traces, options))
