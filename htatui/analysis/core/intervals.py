"""Unions of time intervals: merged spans and busy time per group."""

from __future__ import annotations

import polars as pl


def merge_intervals(intervals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Union of [ts, end) intervals per group (docs/semantics-breakdowns.md, shared rules): columns by + ts, end.

    A new merged interval starts when an interval starts strictly after the running maximum end
    of the group so far; touching intervals merge.
    """
    if intervals.height == 0:
        return intervals.select(*by, "ts", "end")
    # A stable sort: with HTA's rounding, equal starts with different ends must keep file order.
    ordered = intervals.select(*by, "ts", "end").sort([*by, "ts"], maintain_order=True)
    previous_max_end = pl.col("end").cum_max().shift(1).over(by) if by else pl.col("end").cum_max().shift(1)
    grouped = ordered.with_columns(
        _new=(pl.col("ts") > previous_max_end).fill_null(True),
    ).with_columns(_group=pl.col("_new").cast(pl.Int64).cum_sum())
    return (
        grouped.group_by([*by, "_group"], maintain_order=True)
        .agg(ts=pl.col("ts").min(), end=pl.col("end").max())
        .drop("_group")
    )


def busy_time(intervals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Σ(merged end − merged start) per group, as column `busy_us`."""
    merged = merge_intervals(intervals, by)
    if not by:
        return pl.DataFrame({"busy_us": [float((merged["end"] - merged["ts"]).sum() or 0.0)]})
    return merged.group_by(by, maintain_order=True).agg(busy_us=(pl.col("end") - pl.col("ts")).sum())
