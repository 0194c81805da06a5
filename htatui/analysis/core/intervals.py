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


def state_durations(intervals: pl.DataFrame, flags: dict[str, int], by: list[str]) -> pl.DataFrame:
    """Time spent in each combination of interval kinds: columns by + state (bit set), duration.

    ``intervals`` has by + kind, ts, end. Each kind's intervals are merged, then the start
    (+flag) and end (−flag) points are swept in time order; the segment up to the next point
    belongs to the running sum's state. States ≤ 0 (nothing active) are dropped.
    """
    schema = {**{c: intervals.schema[c] for c in by}, "state": pl.Int64(), "duration": pl.Float64()}
    typed = intervals.filter(pl.col("kind").is_in(list(flags)))
    if typed.height == 0:
        return pl.DataFrame(schema=schema)
    merged = merge_intervals(typed, [*by, "kind"]).with_columns(
        flag=pl.col("kind").replace_strict(flags, return_dtype=pl.Int64)
    )
    points = pl.concat(
        [
            merged.select(*by, time="ts", delta="flag"),
            merged.select(*by, time="end", delta=-pl.col("flag")),
        ]
    ).sort([*by, "time"])
    over = by or None
    running = pl.col("delta").cum_sum()
    next_time = pl.col("time").shift(-1)
    if over:
        running = running.over(over)
        next_time = next_time.over(over)
    swept = points.with_columns(state=running, duration=next_time - pl.col("time"))
    return (
        swept.filter((pl.col("state") > 0) & pl.col("duration").is_not_null())
        .group_by([*by, "state"])
        .agg(duration=pl.col("duration").sum())
        .select(pl.col(c).cast(t) for c, t in schema.items())
    )
