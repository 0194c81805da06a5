"""A grouped row's model figures and its roofline (docs/semantics-perf-model.md, "The table's columns").

A row is one (op, input shapes, input types); its figures are over the calls that launched GPU
work the clock can measure and that do not run inside a call of the same row (`frames.nested_in_row`).
Its rate is total FLOPs over total busy time; the mean of the calls' own rates is kept beside it
(TraceLens's `TFLOPS/s_mean`). The roof is the device's for the row's dtype on its units (matrix
or vector) and its memory bandwidth; a row above it carries a `flag` saying why.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.perf.peaks import Device

CACHE_RESIDENT = "cache-resident"
"""Above the memory roof, yet possible when the last-level cache served up to its size of each
call's bytes (operands a kernel just wrote): real, and faster than the DRAM roof."""
MODEL_DOUBT = "model?"
"""Above the roof otherwise: the formula's FLOPs or bytes exceed what the kernels could do, or the
work ran on units (a dtype) other than the ones assumed."""


def counted() -> pl.Expr:
    """The calls a row's figures are over: with measured GPU work, not nested in their own row."""
    return pl.col("call_tflop_per_s").is_not_null() & ~pl.col("nested").fill_null(False)


def row_figures() -> list[pl.Expr]:
    """The grouped row's figures over its counted calls (`counted`)."""
    kept = counted()
    typed = kept & pl.col("dtype").is_not_null()
    flops, moved, busy = (pl.col(c).filter(kept) for c in ("call_flops", "call_bytes", "busy_us"))
    return [
        pl.col("model").drop_nulls().first().alias("model"),
        pl.col("category").drop_nulls().first().alias("category"),
        pl.col("unit").drop_nulls().first().alias("unit"),
        kept.sum().cast(pl.Int64).alias("gpu_calls"),
        (flops.mean() / 1e9).alias("gflop"),
        # Σ over the counted calls; a row none of whose calls ran on the GPU (a CPU op) keeps all.
        pl.when(flops.is_not_null().any())
        .then(flops.sum())
        .when(pl.col("call_flops").is_not_null().any())
        .then(pl.col("call_flops").sum())
        .alias("call_flop_count"),
        moved.mean().alias("bytes_moved"),
        pl.when(kept.any()).then(busy.sum()).alias("busy_incl_us"),
        pl.when(kept.any()).then(flops.sum() / busy.sum() / 1e6).alias("model_tflop_per_s"),
        pl.when(kept.any()).then(moved.sum() / busy.sum() / 1e6).alias("tb_per_s"),
        pl.col("call_tflop_per_s").filter(kept).mean().alias("mean_tflop_per_s"),
        pl.col("call_tb_per_s").filter(kept).mean().alias("mean_tb_per_s"),
        # The dtype the most busy time ran in (one row's calls nearly always agree).
        pl.col("dtype").filter(typed).sort_by(pl.col("busy_us").filter(typed), descending=True).first().alias("dtype"),
    ]


def roofline(table: pl.DataFrame, device_of_rank: dict[int, Device | None]) -> pl.DataFrame:
    """`table` (rank, gflop, bytes_moved, tflop_per_s, tb_per_s, busy_incl_us, gpu_calls, dtype, unit) plus
    flop_per_byte, pct_of_peak (achieved over the roof at the row's intensity: min(peak,
    intensity × bandwidth); a row of no FLOPs against the bandwidth), bound (compute when the
    intensity reaches the ridge point, else memory), flag (why a row is above its roof), and the
    roofs: peak_tflop_per_s (the device's peak for the row's dtype and units; none for a row of
    no FLOPs) and memory_tb_per_s."""
    pairs = table.select("rank", "dtype", "unit").unique()
    roofs = [_roofs(device_of_rank.get(r), d, u) for r, d, u in pairs.iter_rows()]
    peaks = pl.DataFrame(
        {
            "rank": pairs["rank"],
            "dtype": pairs["dtype"],
            "unit": pairs["unit"],
            "_peak": [r[0] for r in roofs],
            "_bw": [r[1] for r in roofs],
            "_l2": [r[2] for r in roofs],
        },
        schema={
            "rank": table.schema["rank"],
            "dtype": pl.Utf8(),
            "unit": pl.Utf8(),
            "_peak": pl.Float64(),
            "_bw": pl.Float64(),
            "_l2": pl.Float64(),
        },
    )
    out = table.join(peaks, on=["rank", "dtype", "unit"], how="left", nulls_equal=True)
    intensity = pl.when(pl.col("bytes_moved") > 0).then(pl.col("gflop") * 1e9 / pl.col("bytes_moved"))
    out = out.with_columns(flop_per_byte=intensity)
    # Both roofs must be known: min_horizontal would skip a missing peak.
    roof = pl.when(pl.col("_peak").is_not_null()).then(
        pl.min_horizontal(pl.col("_peak"), pl.col("flop_per_byte") * pl.col("_bw"))
    )
    compute_pct = pl.when((pl.col("gflop") > 0) & (roof > 0)).then(100.0 * pl.col("tflop_per_s") / roof)
    memory_pct = pl.when((pl.col("gflop") == 0) & (pl.col("_bw") > 0)).then(100.0 * pl.col("tb_per_s") / pl.col("_bw"))
    ridge = pl.col("_peak") / pl.col("_bw")
    bound = (
        pl.when(pl.col("flop_per_byte").is_null() | pl.col("_bw").is_null())
        .then(pl.lit(None, pl.Utf8))
        .when(pl.col("gflop") == 0)
        .then(pl.lit("memory"))
        .when(ridge.is_null())
        .then(pl.lit(None, pl.Utf8))
        .when(pl.col("flop_per_byte") < ridge)
        .then(pl.lit("memory"))
        .otherwise(pl.lit("compute"))
    )
    out = out.with_columns(pct_of_peak=pl.coalesce(compute_pct, memory_pct), bound=bound)
    # Above the memory roof but possible when the last cache served up to its size of each
    # call's bytes (a tensor the previous kernel just wrote): the rest must come from DRAM in time.
    from_dram = pl.col("gpu_calls") * (pl.col("bytes_moved") - pl.col("_l2") * 1e6).clip(lower_bound=0.0)
    cache_explains = (from_dram / pl.col("busy_incl_us") / 1e6 <= pl.col("_bw")).fill_null(False)
    over_peak = (pl.col("tflop_per_s") > pl.col("_peak")).fill_null(False)
    flag = (
        pl.when(pl.col("pct_of_peak").is_null() | (pl.col("pct_of_peak") <= 100.0))
        .then(pl.lit(None, pl.Utf8))
        .when(~over_peak & cache_explains)
        .then(pl.lit(CACHE_RESIDENT))
        .otherwise(pl.lit(MODEL_DOUBT))
    )
    modelled = pl.col("gflop").is_not_null() | pl.col("bytes_moved").is_not_null()
    return out.with_columns(
        flag=flag,
        peak_tflop_per_s=pl.when(modelled & (pl.col("gflop") > 0)).then(pl.col("_peak")),
        memory_tb_per_s=pl.when(modelled).then(pl.col("_bw")),
    ).drop("_peak", "_bw", "_l2")


def headroom() -> pl.Expr:
    """headroom_us: the GPU time the row would not need at the roof, busy_incl_us · (1 −
    pct_of_peak/100) (none when above the roof): time × distance from the roof, where
    optimisation pays."""
    return (pl.col("busy_incl_us") * (1.0 - pl.col("pct_of_peak") / 100.0)).clip(lower_bound=0.0).alias("headroom_us")


def _roofs(
    device: Device | None, dtype: str | None, unit: str | None
) -> tuple[float | None, float | None, float | None]:
    if device is None:
        return None, None, None
    peak = device.roof(dtype, "matrix" if unit == "matrix" else "vector")
    return peak, device.memory_tbps, device.l2_mb
