"""User-annotation breakdown: time per record_function range name (docs/semantics-counters.md, annotations).

By default the GPU-side spans (`gpu_user_annotation`, the GPU time each range covered); with
`use_gpu_annotation=False` the CPU-side `user_annotation` spans (which include the
ProfilerStep#N rows). Corrected mode reports every name with its true count, total and mean.
HTA-compatible mode applies HTA's top-k folding when a rank has more than `num_kernels` names:
names past the `duration_ratio` quantile of the cumulative totals, or beyond the first
`num_kernels`, are summed into "others", and every row's mean becomes the mean of the per-name
totals it holds (for a named row, its total) — HTA's quirk.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare
from htatui.trace.model import TraceSet

SPEC = TableColumns(
    RANK,
    ColumnSpec("name", pl.Utf8(), "the user annotation's name (record_function)", "id"),
    ColumnSpec("count", pl.Int64(), "spans of the annotation"),
    ColumnSpec("sum_us", pl.Float64(), "Σ of the spans' durations", "key"),
    ColumnSpec("mean_us", pl.Float64(), "mean duration of a span"),
)
COLUMNS = SPEC.schema

OTHERS = "others"


@dataclass(frozen=True)
class AnnotationOptions(CommonOptions):
    """User-annotation breakdown knobs (HTA's defaults)."""

    use_gpu_annotation: bool = True
    """GPU-side spans (gpu_user_annotation); False for the CPU-side user_annotation spans."""
    duration_ratio: float = 0.8
    """HTA-compatible mode only: quantile of cumulative totals past which names fold into 'others'."""
    num_kernels: int = 1000
    """HTA-compatible mode only: at most this many names per rank before folding starts."""


def compute(traces: TraceSet, options: AnnotationOptions) -> pl.DataFrame:
    """rank, name, count, sum_us, mean_us per annotation name (sorted by rank, name)."""
    events = prepare(traces, options, columns=("rank", "cat", "name", "dur")).events
    category = "gpu_user_annotation" if options.use_gpu_annotation else "user_annotation"
    rows = events.filter(pl.col("cat") == category)
    if rows.height == 0:
        return pl.DataFrame(schema=COLUMNS)
    per_name = rows.group_by("rank", pl.col("name").cast(pl.Utf8)).agg(
        count=pl.len(), sum_us=pl.col("dur").sum(), mean_us=pl.col("dur").mean()
    )
    if options.hta_compat:
        per_name = _fold_like_hta(per_name, options)
    return per_name.sort("rank", "name").select([pl.col(c).cast(t) for c, t in COLUMNS.items()])


def _fold_like_hta(per_name: pl.DataFrame, options: AnnotationOptions) -> pl.DataFrame:
    """HTA's _aggr_gpu_kernel_time folding, for ranks with more than num_kernels names."""
    ranked = per_name.sort(["rank", "sum_us"], descending=[False, True], maintain_order=True).with_columns(
        _position=pl.int_range(pl.len()).over("rank"),
        _cumsum=pl.col("sum_us").cum_sum().over("rank"),
        _names=pl.len().over("rank"),
    )
    quantile = pl.col("_cumsum").quantile(options.duration_ratio, interpolation="linear").over("rank")
    fold = (pl.col("_names") > options.num_kernels) & (
        (pl.col("_cumsum") > quantile) | (pl.col("_position") >= options.num_kernels)
    )
    unfolded = ranked.filter(pl.col("_names") <= options.num_kernels).select(
        "rank", "name", "count", "sum_us", "mean_us"
    )
    folded = (
        ranked.filter(pl.col("_names") > options.num_kernels)
        .with_columns(name=pl.when(fold).then(pl.lit(OTHERS)).otherwise(pl.col("name")))
        .group_by("rank", "name")
        .agg(count=pl.col("count").sum(), mean_us=pl.col("sum_us").mean(), sum_us=pl.col("sum_us").sum())
        .select("rank", "name", "count", "sum_us", "mean_us")
    )
    return pl.concat([unfolded, folded], how="vertical")
