"""Per process group and collective kind: calls, message sizes, durations, bandwidths and cross-rank skew."""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.columns import ColumnSpec, TableColumns
from htatui.trace.model import TraceSet

COLLECTIVE_SPEC = TableColumns(
    ColumnSpec("pg", pl.Utf8(), "the process group (its name or ranks as recorded)", "id"),
    ColumnSpec("kind", pl.Utf8(), "the collective (all_reduce, all_gather …)", "id"),
    ColumnSpec("ranks", pl.Int64(), "chosen ranks that took part", "low"),
    ColumnSpec("group_size", pl.Int64(), "ranks in the process group (busbw's n)", "low"),
    ColumnSpec("calls", pl.Int64(), "calls per rank (the most any rank made)"),
    ColumnSpec("msg_bytes", pl.Float64(), "mean message size of a call", unit="B", label="msg B"),
    ColumnSpec("total_bytes", pl.Float64(), "Σ of the calls' message sizes", "low", unit="B", label="total B"),
    ColumnSpec("dur_us", pl.Float64(), "mean duration of a call"),
    ColumnSpec("total_dur_us", pl.Float64(), "Σ of the calls' durations", "key"),
    ColumnSpec("algbw_gbps", pl.Float64(), "algorithm bandwidth: message bytes / duration"),
    ColumnSpec("busbw_gbps", pl.Float64(), "bus bandwidth: algbw × the collective's factor for group_size", "key"),
    ColumnSpec("skew_mean_us", pl.Float64(), "mean over calls of the longest wait of a rank for the last to arrive"),
    ColumnSpec("skew_max_us", pl.Float64(), "the longest such wait", "key"),
    ColumnSpec("msg_bytes_from", pl.Utf8(), "where the bytes come from: message args or op input shapes", "low"),
)
COLLECTIVE_COLUMNS = COLLECTIVE_SPEC.schema


def collective_table(calls: pl.DataFrame, delays: pl.DataFrame, traces: TraceSet) -> pl.DataFrame:
    if calls.height == 0:
        return pl.DataFrame(schema=COLLECTIVE_COLUMNS)
    world = _world_size(traces)
    per_kind = calls.group_by("pg", "kind").agg(
        ranks=pl.col("rank").n_unique().cast(pl.Int64),
        group_size=pl.col("group_size").max(),
        msg_bytes=pl.col("msg_bytes").mean(),
        total_bytes=pl.when(pl.col("msg_bytes").count() > 0).then(pl.col("msg_bytes").sum()),
        msg_bytes_from=_bytes_from(),
        dur_us=pl.col("dur_us").mean(),
        total_dur_us=pl.col("dur_us").sum(),
    )
    per_rank_calls = (
        calls.group_by("pg", "kind", "rank")
        .agg(n=pl.len())
        .group_by("pg", "kind")
        .agg(calls=pl.col("n").max().cast(pl.Int64))
    )
    skew = delays.group_by("pg", "kind").agg(skew_mean_us=pl.col("skew_us").mean(), skew_max_us=pl.col("skew_us").max())
    out = (
        per_kind.join(per_rank_calls, on=["pg", "kind"])
        .join(skew, on=["pg", "kind"], how="left")
        .with_columns(group_size=pl.coalesce(pl.col("group_size"), pl.lit(world), pl.col("ranks")))
        .with_columns(algbw_gbps=pl.col("msg_bytes") / pl.col("dur_us") / 1e3)
    )
    # Imported here: the meeting points need numpy, which a cached `info` never imports.
    from htatui.analysis.views.ranks.meeting import busbw_factor

    factors = [busbw_factor(kind, int(n)) for kind, n in zip(out["kind"], out["group_size"], strict=True)]
    out = out.with_columns(busbw_gbps=pl.col("algbw_gbps") * pl.Series(factors, dtype=pl.Float64))
    return out.select([pl.col(c).cast(t) for c, t in COLLECTIVE_COLUMNS.items()]).sort("total_dur_us", descending=True)


BYTES_FROM_ARGS = "message args"
BYTES_FROM_OPS = "op input shapes"


def _bytes_from() -> pl.Expr:
    """Where a row's message bytes come from: the kernels' message args, the host ops' input
    shapes (calls without args, meeting.py), or both; null when no call has bytes."""
    derived = pl.col("bytes_derived").fill_null(False)
    from_args = (pl.col("msg_bytes").is_not_null() & ~derived).any()
    from_ops = derived.any()
    return (
        pl.when(from_args & from_ops)
        .then(pl.lit(f"{BYTES_FROM_ARGS} + {BYTES_FROM_OPS}"))
        .when(from_ops)
        .then(pl.lit(BYTES_FROM_OPS))
        .when(from_args)
        .then(pl.lit(BYTES_FROM_ARGS))
    )


def _world_size(traces: TraceSet) -> int | None:
    for rank in traces.ranks.values():
        value = (rank.meta.distributed_info or {}).get("world_size")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
