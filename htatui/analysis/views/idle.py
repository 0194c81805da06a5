"""Idle time breakdown per stream (docs/semantics-breakdowns.md, idle): host wait, kernel wait and other idle.

Per rank and stream, the rows are sorted by start; the gap *before* each row (its start minus
the end of the stream's earlier work) is attributed to one category:

* ``host_wait`` — the launch call (runtime event with the same correlation id) started after
  the stream had gone empty: the CPU was not enqueuing work fast enough;
* ``kernel_wait`` — otherwise, a gap shorter than ``consecutive_kernel_delay_us`` (launch
  overhead between back-to-back kernels);
* ``other`` — everything else (waiting on events, other streams, …).

Corrected mode (default): GPU activity by category (kernels, copies, memsets), the gap is
measured from the running maximum end of the stream's earlier rows and clamped at 0, the first
row of a stream (which has no gap) is not counted, and the launch is the earliest host row
with the same correlation id. Compat mode reproduces HTA 0.6.1: selector S3, gap from the
previous row's end (negative after rounding overlaps), the first row counted as an ``other``
row with no gap, HTA's choice of launch row, and outputs rounded to 2 decimals.

HTA analyses rank 0 by default; htatui analyses every rank (``ranks`` narrows it).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.columns import RANK, STREAM, ColumnSpec, TableColumns
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare
from htatui.trace.kineto import DEVICE_CATS, GPU_ACTIVITY_CATS
from htatui.trace.model import TraceSet

HOST_WAIT = "host_wait"
KERNEL_WAIT = "kernel_wait"
OTHER = "other"
CATEGORIES = (HOST_WAIT, KERNEL_WAIT, OTHER)

CATEGORY = ColumnSpec("category", pl.Utf8(), "what the gap waited for: host_wait, kernel_wait or other", "id")
SPEC = TableColumns(
    RANK,
    STREAM,
    CATEGORY,
    ColumnSpec("idle_us", pl.Float64(), "Σ of the stream's gaps of this category", "key"),
    ColumnSpec("idle_pct", pl.Float64(), "idle_us as a share of the stream's idle time", "key"),
)
SCHEMA = SPEC.schema

_WAITS = {
    HOST_WAIT: "host wait (launched after the stream went empty)",
    KERNEL_WAIT: "kernel wait",
    OTHER: "other idle",
}
BY_STREAM_SPEC = TableColumns(
    RANK,
    STREAM,
    *(
        spec
        for category in CATEGORIES
        for spec in (
            ColumnSpec(f"{category}_us", pl.Float64(), f"the stream's {_WAITS[category]} time", "key"),
            ColumnSpec(f"{category}_pct", pl.Float64(), f"{category}_us as a share of the stream's idle time", "key"),
        )
    ),
    ColumnSpec("total_us", pl.Float64(), "the stream's idle time: Σ of its gaps"),
)

STATS_SPEC = TableColumns(
    RANK,
    STREAM,
    CATEGORY,
    ColumnSpec("count", pl.Int64(), "gaps of the category", "key"),
    ColumnSpec("mean_us", pl.Float64(), "mean gap", "key"),
    ColumnSpec("std_us", pl.Float64(), "sample standard deviation of the gaps (null for one gap)", "low"),
    ColumnSpec("min_us", pl.Float64(), "shortest gap", "low"),
    ColumnSpec("p25_us", pl.Float64(), "first quartile of the gaps (linear interpolation)"),
    ColumnSpec("p50_us", pl.Float64(), "median gap", "key"),
    ColumnSpec("p75_us", pl.Float64(), "third quartile of the gaps"),
    ColumnSpec("max_us", pl.Float64(), "longest gap", "low"),
)
STATS_SCHEMA = STATS_SPEC.schema


@dataclass(frozen=True)
class IdleOptions(CommonOptions):
    """``consecutive_kernel_delay_us``: gaps shorter than this are kernel wait (HTA: 30 µs).

    ``streams``: only these streams (None = all).
    """

    consecutive_kernel_delay_us: float = knob(
        30.0,
        flag="--consecutive-kernel-delay",
        help="idle: gaps shorter than this are kernel wait, µs",
        kind="float",
        label="kernel delay (µs)",
        minimum=0,
    )
    streams: tuple[int, ...] | None = knob(None, flag="--streams", help="idle: only these streams (7,20)", kind="ints")


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def empty_stats() -> pl.DataFrame:
    return pl.DataFrame(schema=STATS_SCHEMA)


def gaps(traces: TraceSet, options: IdleOptions) -> pl.DataFrame:
    """One row per GPU row that has a gap before it: rank, stream, ts, category, idle_us.

    In compat mode the first row of each stream is included with a null ``idle_us`` (HTA counts
    it in the ``other`` category without an interval). Made once per job and options, and shared
    by `compute`, `interval_stats` and `by_stream`.
    """
    key = ("idle.gaps", *selection_key(traces, options, "consecutive_kernel_delay_us", "streams"))
    return memoised(traces, key, lambda: _gaps(traces, options))


def _gaps(traces: TraceSet, options: IdleOptions) -> pl.DataFrame:
    columns = ("rank", "index", "cat", "name", "stream", "correlation", "ts", "end")
    events = prepare(traces, options, columns=columns).events
    compat = options.hta_compat
    cat = pl.col("cat")  # categorical is_in: no text copy of the column
    # The cheap numeric stream test first, so the category strings are only looked at on device rows.
    on_stream = events.filter(hta.on_stream())
    selected = on_stream.filter(cat.is_in(hta.IDLE_CATS if compat else GPU_ACTIVITY_CATS))
    if options.streams:
        selected = selected.filter(pl.col("stream").is_in(list(options.streams)))
    if selected.height == 0:
        return pl.DataFrame(
            schema={
                "rank": pl.Int32(),
                "stream": pl.Int64(),
                "ts": pl.Float64(),
                "category": pl.Utf8(),
                "idle_us": pl.Float64(),
            }
        )
    runtime = _launch_times(events, compat)
    rows = selected.select("rank", "stream", "index", "ts", "end", "correlation").join(
        runtime, on=["rank", "correlation"], how="left"
    )
    if compat:
        # HTA joins `index_correlation`, which is 0 (not -1) for a correlated row whose partner
        # is missing, so such rows pick up the start of the event at index 0 when it was kept.
        first_event = events.filter(pl.col("index") == 0).group_by("rank").agg(_ts_index0=pl.col("ts").first())
        rows = rows.join(first_event, on="rank", how="left").with_columns(
            ts_runtime=pl.when(pl.col("ts_runtime").is_null() & (pl.col("correlation") >= 0))
            .then(pl.col("_ts_index0"))
            .otherwise(pl.col("ts_runtime"))
        )
    rows = rows.sort(["rank", "stream", "ts", "index"])
    by = ["rank", "stream"]
    if compat:
        prev_end = pl.col("end").shift(1).over(by)
    else:
        prev_end = pl.col("end").cum_max().shift(1).over(by)
    rows = rows.with_columns(prev_end=prev_end).with_columns(gap=pl.col("ts") - pl.col("prev_end"))
    if not compat:
        rows = rows.filter(pl.col("prev_end").is_not_null()).with_columns(pl.col("gap").clip(lower_bound=0.0))
    host_wait = (pl.col("ts_runtime") > pl.col("prev_end")).fill_null(False)
    kernel_wait = (pl.col("gap") < options.consecutive_kernel_delay_us).fill_null(False)
    return rows.select(
        "rank",
        "stream",
        "ts",
        category=pl.when(host_wait)
        .then(pl.lit(HOST_WAIT))
        .when(kernel_wait)
        .then(pl.lit(KERNEL_WAIT))
        .otherwise(pl.lit(OTHER)),
        idle_us=pl.col("gap").cast(pl.Float64),
    )


def _launch_times(events: pl.DataFrame, compat: bool) -> pl.DataFrame:
    """rank, correlation → ts_runtime: the start of the host row that launched the GPU row.

    Compat: HTA's partner is the last host row (complement of selector S2) in file order with
    that correlation id. Corrected: the earliest host row with that correlation id.
    """
    device = hta.device_row() if compat else pl.col("cat").is_in(DEVICE_CATS)
    host = events.filter(~device & pl.col("correlation").is_not_null() & (pl.col("correlation") != -1))
    if compat:
        return host.group_by("rank", "correlation").agg(ts_runtime=pl.col("ts").get(pl.col("index").arg_max()))
    return host.group_by("rank", "correlation").agg(ts_runtime=pl.col("ts").min())


def compute(traces: TraceSet, options: IdleOptions) -> pl.DataFrame:
    """rank, stream, category, idle_us (Σ gaps), idle_pct (% of the stream's idle time).

    In HTA-compatible mode the share is HTA's `idle_time_ratio` rounded to 2 decimals, times 100.
    """
    rows = gaps(traces, options)
    if rows.height == 0:
        return empty()
    out = rows.group_by("rank", "stream", "category").agg(idle_us=pl.col("idle_us").sum())
    total = pl.col("idle_us").sum().over("rank", "stream")
    ratio = pl.when(total != 0).then(pl.col("idle_us") / total)
    if options.hta_compat:
        out = out.with_columns(hta.rounded(pl.col("idle_us"), 2), idle_pct=hta.rounded(ratio, 2) * 100.0)
    else:
        out = out.with_columns(idle_pct=ratio * 100.0)
    return out.select(pl.col(n).cast(t) for n, t in SCHEMA.items()).sort("rank", "stream", "category")


def interval_stats(traces: TraceSet, options: IdleOptions) -> pl.DataFrame:
    """Distribution of the gaps per (rank, stream, category): count, mean, sample std, quartiles.

    Quantiles interpolate linearly (pandas' describe()); std is null for a single gap. Compat
    mode rounds to 2 decimals and keeps HTA's ``other`` rows with count 0 (all stats null).
    """
    rows = gaps(traces, options)
    if rows.height == 0:
        return empty_stats()
    gap = pl.col("idle_us").drop_nulls()
    out = rows.group_by("rank", "stream", "category").agg(
        count=gap.count(),
        mean_us=gap.mean(),
        std_us=gap.std(ddof=1),
        min_us=gap.min(),
        p25_us=gap.quantile(0.25, interpolation="linear"),
        p50_us=gap.quantile(0.5, interpolation="linear"),
        p75_us=gap.quantile(0.75, interpolation="linear"),
        max_us=gap.max(),
    )
    stats = [c for c in STATS_SCHEMA if c.endswith("_us")]
    out = out.with_columns(pl.col(c).fill_nan(None) for c in stats)
    out = hta.outputs_rounded(out, options.hta_compat, 2, *stats)
    return out.select(pl.col(n).cast(t) for n, t in STATS_SCHEMA.items()).sort("rank", "stream", "category")


def widen(breakdown: pl.DataFrame) -> pl.DataFrame:
    """`compute`'s rows as one row per (rank, stream): a µs and a % column per category, and the total."""
    keys = ["rank", "stream"]
    if breakdown.height == 0:
        return BY_STREAM_SPEC.empty()
    aggregations = []
    for category in CATEGORIES:
        chosen = pl.col("category") == category
        aggregations.append(pl.col("idle_us").filter(chosen).sum().alias(f"{category}_us"))
        aggregations.append(pl.col("idle_pct").filter(chosen).sum().alias(f"{category}_pct"))
    return breakdown.group_by(keys, maintain_order=True).agg(*aggregations, total_us=pl.col("idle_us").sum()).sort(keys)


def by_stream(traces: TraceSet, options: IdleOptions) -> pl.DataFrame:
    """rank, stream, then µs and % of the stream's idle time per category, and total_us (the Idle screen's table)."""
    return widen(compute(traces, options))
