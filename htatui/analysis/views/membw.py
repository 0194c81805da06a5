"""Memory-copy bandwidth counters per copy kind (docs/semantics-counters.md, membw).

Each copy or memset contributes its bandwidth (Kineto's `memory bandwidth (GB/s)` arg) from its
start to its end; concurrent operations of the same kind add up. The summary describes the
positive points of that step series (count, min, max, mean, std, p25/p50/p75 in GB/s), like
HTA — an unweighted statistic over change points.

Corrected (default): copies and memsets are selected by category (`gpu_memcpy`,
`gpu_memset`), a zero-duration operation lasts 1 µs (as in HTA, issue #20), events at one
timestamp merge into one change point, and values within 1e-9 GB/s of zero (float residue of
adding and removing bandwidths) count as zero. HTA-compatible mode reproduces HTA 0.6.1's
`get_memory_bw_time_series` / `get_memory_bw_summary` exactly (its `stream != -1` MEMORY
rows by name, one point per event, residues kept). docs/semantics-counters.md lists the
differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.kernel_types import MEMORY, gpu_events, kernel_type
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.pandas_like import describe, sort_like_pandas
from htatui.analysis.core.prepare import prepare
from htatui.trace.model import TraceSet

COPY_KIND = ColumnSpec("copy_kind", pl.Utf8(), "the copy's direction (Memcpy HtoD, DtoH, DtoD, PtoP …) or Memset", "id")
SERIES_SPEC = TableColumns(
    RANK,
    COPY_KIND,
    ColumnSpec("ts_us", pl.Float64(), "when the bandwidth in use changed", "key"),
    ColumnSpec("memory_bw_gbps", pl.Float64(), "bandwidth of the copies of this kind running from ts_us on", "key"),
)
SERIES_COLUMNS = SERIES_SPEC.schema

_BW = "bandwidth in use over the series points above zero"
SPEC = TableColumns(
    RANK,
    COPY_KIND,
    ColumnSpec("count", pl.Int64(), "series points above zero", "low"),
    ColumnSpec("min_gbps", pl.Float64(), f"smallest {_BW}", "low"),
    ColumnSpec("max_gbps", pl.Float64(), f"largest {_BW}", "key"),
    ColumnSpec("mean_gbps", pl.Float64(), f"mean {_BW}", "key"),
    ColumnSpec("std_gbps", pl.Float64(), f"sample standard deviation of the {_BW}", "low"),
    ColumnSpec("p25_gbps", pl.Float64(), f"first quartile of the {_BW}", "low"),
    ColumnSpec("p50_gbps", pl.Float64(), f"median {_BW}"),
    ColumnSpec("p75_gbps", pl.Float64(), f"third quartile of the {_BW}", "low"),
)
COLUMNS = SPEC.schema

ZERO_GBPS = 1e-9
"""Corrected mode: |bandwidth| below this is float residue of +bw/−bw sums, i.e. zero."""


@dataclass(frozen=True)
class MemoryBandwidthOptions(CommonOptions):
    """Memory-bandwidth knobs (none beyond the common ones)."""


MembwOptions = MemoryBandwidthOptions


def copy_kind() -> pl.Expr:
    """HTA's copy type from the name: 'Memset', the first 11 characters of a 'Memcpy…' name
    ('Memcpy HtoD', 'Memcpy DtoH', 'Memcpy DtoD', 'Memcpy PtoP', …), else 'Memcpy Unknown'."""
    name = pl.col("name").cast(pl.Utf8)
    return (
        pl.when(name.str.slice(0, 6) == "Memset")
        .then(pl.lit("Memset"))
        .when(name.str.slice(0, 6) != "Memcpy")
        .then(pl.lit("Memcpy Unknown"))
        .otherwise(name.str.slice(0, 11))
    )


def _copies(events: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """Copy/memset rows with rank, copy_kind, ts, dur (0 → 1 µs) and bandwidth (null → 0)."""
    if hta_compat:
        gpu = gpu_events(events, True)
        # HTA types by name only: classify each distinct name once.
        names = gpu.select(pl.col("name").unique())
        memory_names = names.filter(kernel_type(True) == MEMORY)["name"]
        rows = gpu.filter(pl.col("name").is_in(memory_names.implode()))
    else:
        rows = events.filter(pl.col("cat").is_in(["gpu_memcpy", "gpu_memset"]))
    return rows.sort("rank", "index").select(
        "rank",
        "index",
        copy_kind=copy_kind(),
        ts=pl.col("ts"),
        dur=pl.when(pl.col("dur") == 0).then(pl.lit(1.0)).otherwise(pl.col("dur")),
        bw=pl.col("memory_bw_gbps").fill_null(0.0),
    )


def series(traces: TraceSet, options: MemoryBandwidthOptions) -> pl.DataFrame:
    """Bandwidth in use per (rank, copy kind) as a step series: rank, copy_kind, ts_us,
    memory_bw_gbps; each value holds until the next row of the same kind."""
    columns = ("rank", "index", "cat", "name", "stream", "ts", "dur", "memory_bw_gbps")
    copies = _copies(prepare(traces, options, columns=columns).events, options.hta_compat)
    if copies.height == 0:
        return pl.DataFrame(schema=SERIES_COLUMNS)
    starts = copies.select("rank", "copy_kind", ts_us=pl.col("ts"), delta=pl.col("bw"))
    ends = copies.select("rank", "copy_kind", ts_us=pl.col("ts") + pl.col("dur"), delta=-pl.col("bw"))
    if options.hta_compat:
        # HTA: starts then ends, each in file order, sorted by ts with pandas' (unstable) sort.
        merged = pl.concat([starts, ends], how="vertical").with_columns(
            _order=pl.int_range(pl.len(), dtype=pl.Int64).over("rank")
        )
        ordered = sort_like_pandas(merged, "ts_us", integer_ts=False).drop("_order")
        out = ordered.with_columns(memory_bw_gbps=pl.col("delta").cum_sum().over("rank", "copy_kind"))
        out = out.sort("rank", "copy_kind", maintain_order=True)
    else:
        merged = (
            pl.concat([starts, ends], how="vertical")
            .group_by("rank", "copy_kind", "ts_us")
            .agg(pl.col("delta").sum())
            .sort("rank", "copy_kind", "ts_us")
        )
        out = merged.with_columns(memory_bw_gbps=pl.col("delta").cum_sum().over("rank", "copy_kind")).with_columns(
            memory_bw_gbps=pl.when(pl.col("memory_bw_gbps").abs() < ZERO_GBPS)
            .then(pl.lit(0.0))
            .otherwise(pl.col("memory_bw_gbps"))
        )
    return out.select([pl.col(name).cast(dtype) for name, dtype in SERIES_COLUMNS.items()])


def summarize(series_frame: pl.DataFrame) -> pl.DataFrame:
    """Statistics of the positive points of an already computed series (see `compute`)."""
    positive = series_frame.filter(pl.col("memory_bw_gbps") > 0)
    if positive.height == 0:
        return pl.DataFrame(schema=COLUMNS)
    out = positive.group_by("rank", "copy_kind").agg(*describe("memory_bw_gbps"))
    out = out.rename({c: f"{c}_gbps" for c in ("min", "max", "mean", "std", "p25", "p50", "p75")})
    return out.sort("rank", "copy_kind").select([pl.col(name).cast(dtype) for name, dtype in COLUMNS.items()])


def compute(traces: TraceSet, options: MemoryBandwidthOptions) -> pl.DataFrame:
    """Per (rank, copy kind): count, min, max, mean, std, p25, p50, p75 of the bandwidth (GB/s)
    over the series points where it is above zero (HTA's summary)."""
    return summarize(series(traces, options))


def summary(traces: TraceSet, options: MemoryBandwidthOptions) -> pl.DataFrame:
    """Alias of `compute`."""
    return compute(traces, options)
