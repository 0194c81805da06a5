"""pandas' own rules, where HTA's numbers depend on them: `describe()` and `sort_values()`."""

from __future__ import annotations

import polars as pl


def describe(column: str) -> list[pl.Expr]:
    """pandas describe() of one column: count, min, max, mean, std (ddof 1), p25/p50/p75
    with linear interpolation (the queue-length and memory-bandwidth views)."""
    col = pl.col(column)
    return [
        pl.len().alias("count"),
        col.min().cast(pl.Float64).alias("min"),
        col.max().cast(pl.Float64).alias("max"),
        col.mean().alias("mean"),
        col.std().alias("std"),
        col.quantile(0.25, interpolation="linear").alias("p25"),
        col.quantile(0.5, interpolation="linear").alias("p50"),
        col.quantile(0.75, interpolation="linear").alias("p75"),
    ]


def sort_like_pandas(frame: pl.DataFrame, ts: str, integer_ts: bool) -> pl.DataFrame:
    """Sort each rank's rows by `ts` as HTA's `DataFrame.sort_values(by="ts")` does.

    `frame` must hold each rank's rows in HTA's order before its sort, numbered by `_order`.
    pandas sorts with numpy's unstable quicksort, whose order at equal timestamps depends on
    the numpy build and CPU, so the same numpy call is made here and ties fall the same way;
    numpy is a declared dependency so the result never depends on what else is installed.
    """
    import numpy as np

    frame = frame.sort("rank", "_order")
    parts = []
    for part in frame.partition_by("rank", maintain_order=True):
        values = part[ts].cast(pl.Int64 if integer_ts else pl.Float64).to_numpy()
        parts.append(part[np.argsort(values, kind="quicksort")])
    return pl.concat(parts, how="vertical")
