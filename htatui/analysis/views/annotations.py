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
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.options import CommonOptions, NotedTable
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
    cpu_side: bool = knob(
        False, flag="--cpu-annotations", help="annotations: the CPU-side ranges instead of the GPU-side", kind="switch"
    )
    """The CPU-side `user_annotation` spans (as `use_gpu_annotation=False`)."""

    @property
    def gpu_side(self) -> bool:
        return self.use_gpu_annotation and not self.cpu_side


def table(traces: TraceSet, options: AnnotationOptions) -> pl.DataFrame | NotedTable:
    """Per rank and annotation name: count, total and mean time (GPU-side spans; --cpu-annotations the CPU-side).

    Empty of GPU-side spans where CPU-side ones exist, it says so (ROCm and CPU-only traces have
    no GPU-side copies)."""
    frame = compute(traces, options)
    if frame.height or not options.gpu_side:
        return frame
    events = prepare(traces, options, columns=("cat",)).events
    host = events.filter(pl.col("cat") == "user_annotation").height
    if host == 0:
        return frame
    return NotedTable(
        frame,
        f"no GPU-side annotations (gpu_user_annotation) in the chosen steps: Kineto writes them for ranges "
        f"that ran GPU work on CUDA, not on ROCm or CPU-only traces; {host:,} CPU-side annotation"
        f"{'s' if host > 1 else ''} (user_annotation) are there: --cpu-annotations lists them",
    )


def compute(traces: TraceSet, options: AnnotationOptions) -> pl.DataFrame:
    """rank, name, count, sum_us, mean_us per annotation name (sorted by rank, name)."""
    events = prepare(traces, options, columns=("rank", "cat", "name", "dur")).events
    category = "gpu_user_annotation" if options.gpu_side else "user_annotation"
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
