"""Kernel breakdown: kernel-type states, per-kernel statistics, spread over ranks (docs/semantics-breakdowns.md).

Three views share this module:

* ``kernel-types`` (`compute_types`) — wall-clock time of each exclusive state of the kernel
  types COMPUTATION, COMMUNICATION and MEMORY ("COMPUTATION overlapping COMMUNICATION", …),
  per rank and summed over ranks (rank ``"all"``). Each type's intervals are merged, then a
  bit-flag sweep (COMPUTATION=1, COMMUNICATION=2, MEMORY=4) splits the time line into states.
* ``kernels`` (`compute`) — per rank, type and full kernel name: launch count and sum / mean /
  min / max / sample std of the launch durations, with the long tail folded into ``others``
  by HTA's rule (both the ``duration_ratio`` quantile of the cumulative sums and ``top_k``).
  Corrected mode keeps every row's true per-launch statistics; compat mode reproduces HTA's
  re-aggregation over per-name sums (max = min = mean = sum, std 0 for named rows).
* ``kernel-spread`` (`spread`) — for the ``top_k`` kernels of each type by total time across
  ranks, each rank's mean / min / max launch duration.

Corrected mode selects GPU activity by category and types it with htatui's rules; compat mode
uses HTA's selector S1 (``stream != -1``) and name-only typing. OTHER rows are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.columns import KERNEL_NAME, RANK, ColumnSpec, TableColumns
from htatui.analysis.core.intervals import state_durations
from htatui.analysis.core.kernel_types import (
    COMMUNICATION,
    COMPUTATION,
    KERNEL_TYPES,
    MEMORY,
    typed_gpu,
)
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import rank_by_rank
from htatui.trace.model import TraceSet

ALL_RANKS = "all"
OTHERS = "others"
TYPE_FLAGS = {COMPUTATION: 1, COMMUNICATION: 2, MEMORY: 4}
"""HTA's bit per kernel type; a sweep state names the types whose bits are set."""

STATE_LABELS = {
    state: " overlapping ".join(t for t, flag in TYPE_FLAGS.items() if state & flag) for state in range(1, 8)
}

KERNEL_TYPE = ColumnSpec(
    "kernel_type", pl.Utf8(), "COMPUTATION, COMMUNICATION or MEMORY (copies, memsets)", "low", label="type"
)
TYPES_SPEC = TableColumns(
    ColumnSpec("rank", pl.Utf8(), 'the rank, or "all" for the sum over the chosen ranks', "id"),
    ColumnSpec(
        "kernel_type",
        pl.Utf8(),
        'a state of the GPU: the kernel types running at once ("COMPUTATION overlapping COMMUNICATION")',
        "id",
        label="state",
    ),
    ColumnSpec("duration_us", pl.Float64(), "wall-clock time the GPU spent in the state", "key"),
    ColumnSpec("pct", pl.Float64(), "duration_us as a share of the rank's time in any state", "key", unit="%"),
)
TYPES_SCHEMA = TYPES_SPEC.schema

KERNELS_SPEC = TableColumns(
    RANK,
    ColumnSpec("name", pl.Utf8(), 'the kernel\'s name ("others": the kernels folded by --top/--duration-ratio)', "id"),
    KERNEL_TYPE,
    ColumnSpec("count", pl.Int64(), "launches of the kernel"),
    ColumnSpec("sum_us", pl.Float64(), "Σ of its launches' durations", "key"),
    ColumnSpec("mean_us", pl.Float64(), "mean duration of a launch"),
    ColumnSpec("min_us", pl.Float64(), "shortest launch", "low"),
    ColumnSpec("max_us", pl.Float64(), "longest launch", "low"),
    ColumnSpec("std_us", pl.Float64(), "sample standard deviation of the launches' durations", "low"),
)
KERNELS_SCHEMA = KERNELS_SPEC.schema

SPREAD_SPEC = TableColumns(
    KERNEL_NAME,
    KERNEL_TYPE,
    RANK,
    ColumnSpec("mean_us", pl.Float64(), "the rank's mean duration of a launch of the kernel", "key"),
    ColumnSpec("min_us", pl.Float64(), "the rank's shortest launch of it"),
    ColumnSpec("max_us", pl.Float64(), "the rank's longest launch of it"),
)
SPREAD_SCHEMA = SPREAD_SPEC.schema


@dataclass(frozen=True)
class KernelTypesOptions(CommonOptions):
    """The kernel-type table has no knobs of its own (memory kernels are always included)."""


@dataclass(frozen=True)
class KernelsOptions(CommonOptions):
    """``top_k``: named kernels kept per rank and type (HTA ``num_kernels``; None = no folding).

    ``duration_ratio``: kernels whose cumulative sum exceeds this quantile of the cumulative
    sums are folded into ``others`` too (HTA's rule; only applied when folding happens).
    """

    top_k: int | None = knob(
        10, flag="--top", help="how many names to keep (all: every name)", kind="int", label="top-k", minimum=1
    )
    duration_ratio: float = knob(
        0.8,
        flag="--duration-ratio",
        help="kernels: HTA's cumulative-time quantile",
        kind="float",
        label="duration ratio",
        minimum=0,
        maximum=1,
    )


@dataclass(frozen=True)
class KernelSpreadOptions(CommonOptions):
    """``top_k``: kernels per type, by total time over all ranks (None = all kernels)."""

    top_k: int | None = knob(
        10, flag="--top", help="how many names to keep (all: every name)", kind="int", label="top-k", minimum=1
    )


def typed_kernels(traces: TraceSet, options: CommonOptions) -> pl.DataFrame:
    """GPU rows typed in KERNEL_TYPES: rank, name (Categorical), kernel_type, ts, end, dur.

    Over a dataset the ranks are read one at a time (`rank_by_rank`): the kernels are a small
    part of a rank's events."""
    return rank_by_rank(traces, options, _typed_kernels)


def _typed_kernels(traces: TraceSet, options: CommonOptions) -> pl.DataFrame:
    gpu = typed_gpu(traces, options)
    return gpu.filter(pl.col("kind").is_in(KERNEL_TYPES)).select(
        "rank", "name", kernel_type="kind", ts="ts", end="end", dur="dur"
    )


def compute_types(traces: TraceSet, options: KernelTypesOptions) -> pl.DataFrame:
    """rank (str; "all" = sum over ranks), kernel_type state, duration_us, pct of the rank's total.

    Sorted with "all" first, then by rank, duration descending. Compat mode rounds pct to 1
    decimal as HTA does and keeps states whose segments all have zero length (duration 0).
    """
    kernels = typed_kernels(traces, options).rename({"kernel_type": "kind"})
    states = state_durations(kernels, TYPE_FLAGS, ["rank"])
    if not options.hta_compat:  # HTA lists states that only occur for zero-length segments
        states = states.filter(pl.col("duration") > 0)
    if states.height == 0:
        return pl.DataFrame(schema=TYPES_SCHEMA)
    per_rank = states.select(
        rank=pl.col("rank").cast(pl.Utf8),
        kernel_type=pl.col("state").replace_strict(STATE_LABELS, return_dtype=pl.Utf8),
        duration_us="duration",
    )
    overall = (
        per_rank.group_by("kernel_type")
        .agg(pl.col("duration_us").sum())
        .select(rank=pl.lit(ALL_RANKS), kernel_type="kernel_type", duration_us="duration_us")
    )
    out = (
        pl.concat([overall, per_rank])
        .with_columns(pct=100.0 * pl.col("duration_us") / pl.col("duration_us").sum().over("rank"))
        .with_columns(pct=pl.col("pct").fill_nan(None))
    )
    out = hta.outputs_rounded(out, options.hta_compat, 1, "pct")
    order = pl.when(pl.col("rank") == ALL_RANKS).then(-1).otherwise(pl.col("rank").cast(pl.Int64, strict=False))
    return out.sort([order, pl.col("duration_us")], descending=[False, True]).select(
        pl.col(c).cast(t) for c, t in TYPES_SCHEMA.items()
    )


def _launch_stats() -> list[pl.Expr]:
    """count and sum / mean / min / max / sample std (0 for one launch) of `dur`."""
    return [
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("dur").sum().alias("sum_us"),
        pl.col("dur").mean().alias("mean_us"),
        pl.col("dur").min().alias("min_us"),
        pl.col("dur").max().alias("max_us"),
        pl.col("dur").std(ddof=1).fill_null(0.0).fill_nan(0.0).alias("std_us"),
    ]


def compute(traces: TraceSet, options: KernelsOptions) -> pl.DataFrame:
    """rank, name, kernel_type, count, sum_us, mean_us, min_us, max_us, std_us.

    Sorted by rank, kernel type, then sum descending with ``others`` last.
    """
    kernels = typed_kernels(traces, options)
    if kernels.height == 0:
        return pl.DataFrame(schema=KERNELS_SCHEMA)
    key = ["rank", "kernel_type"]
    per_name = (
        kernels.group_by([*key, "name"])
        .agg(_launch_stats())
        .with_columns(name_utf8=pl.col("name").cast(pl.Utf8))
        .sort([*key, "sum_us", "name_utf8"], descending=[False, False, True, False])
    )
    if options.top_k is None:
        out = per_name.with_columns(name="name_utf8")
    else:
        position = pl.int_range(pl.len()).over(key)
        cumsum = pl.col("sum_us").cum_sum().over(key)
        ranked = per_name.with_columns(_pos=position, _cumsum=cumsum).with_columns(
            _folding=(pl.len().over(key) > options.top_k),
            _threshold=pl.col("_cumsum").quantile(options.duration_ratio, interpolation="linear").over(key),
        )
        folded = pl.col("_folding") & ((pl.col("_cumsum") > pl.col("_threshold")) | (pl.col("_pos") >= options.top_k))
        ranked = ranked.with_columns(out_name=pl.when(folded).then(pl.lit(OTHERS)).otherwise(pl.col("name_utf8")))
        if options.hta_compat:
            out = _fold_like_hta(ranked, key)
        else:
            mapping = ranked.select(*key, "name", "out_name")
            out = (
                kernels.join(mapping, on=[*key, "name"], how="left")
                .group_by([*key, "out_name"])
                .agg(_launch_stats())
                .rename({"out_name": "name"})
            )
    is_others = pl.col("name") == OTHERS
    return out.sort(
        [pl.col("rank"), pl.col("kernel_type"), is_others, pl.col("sum_us"), pl.col("name")],
        descending=[False, False, False, True, False],
    ).select(pl.col(c).cast(t) for c, t in KERNELS_SCHEMA.items())


def _fold_like_hta(ranked: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """HTA's second aggregation: stats over per-name *sums* once a (rank, type) was folded."""
    unfolded = ranked.filter(~pl.col("_folding")).with_columns(name="name_utf8")
    folded = (
        ranked.filter(pl.col("_folding"))
        .group_by([*key, "out_name"])
        .agg(
            count=pl.col("count").sum(),
            sum_us=pl.col("sum_us").sum(),
            mean_us=pl.col("sum_us").mean(),
            min_us=pl.col("sum_us").min(),
            max_us=pl.col("sum_us").max(),
            std_us=pl.col("sum_us").std(ddof=1).fill_null(0.0).fill_nan(0.0),
        )
        .rename({"out_name": "name"})
    )
    columns = list(KERNELS_SCHEMA)
    return pl.concat([unfolded.select(columns), folded.select(columns)])


def spread(traces: TraceSet, options: KernelSpreadOptions) -> pl.DataFrame:
    """name, kernel_type, rank, mean_us, min_us, max_us for the top kernels of each type."""
    kernels = typed_kernels(traces, options)
    if kernels.height == 0:
        return pl.DataFrame(schema=SPREAD_SCHEMA)
    totals = kernels.group_by("kernel_type", "name").agg(total=pl.col("dur").sum())
    if options.top_k is not None:
        totals = totals.sort([pl.col("total"), pl.col("name").cast(pl.Utf8)], descending=[True, False]).filter(
            pl.int_range(pl.len()).over("kernel_type") < options.top_k
        )
    per_rank = (
        kernels.join(totals, on=["kernel_type", "name"], how="inner")
        .group_by("name", "kernel_type", "rank")
        .agg(
            total=pl.col("total").first(),
            mean_us=pl.col("dur").mean(),
            min_us=pl.col("dur").min(),
            max_us=pl.col("dur").max(),
        )
    )
    per_rank = per_rank.with_columns(pl.col("name").cast(pl.Utf8))
    return per_rank.sort(["kernel_type", "total", "name", "rank"], descending=[False, True, False, False]).select(
        pl.col(c).cast(t) for c, t in SPREAD_SCHEMA.items()
    )
