"""The performance model over polars frames: per-call estimates, per-call GPU busy time, the
roofline columns of a grouped table, and the category summary (docs/semantics-perf-model.md)."""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.intervals import busy_time
from htatui.analysis.perf.call import parse_call
from htatui.analysis.perf.dispatch import CATEGORIES, category_of, estimate
from htatui.analysis.perf.dtypes import peak_dtype
from htatui.analysis.perf.peaks import Device

PROFILER_MODEL = "profiler"
"""The `model` of a call whose FLOPs the profiler recorded (`with_flops=True`)."""
NO_MODEL = "none"

ESTIMATE_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.Utf8(),
    "category": pl.Utf8(),
    "call_flops": pl.Float64(),
    "call_bytes": pl.Float64(),
    "peak_dtype": pl.Utf8(),
}
_ARG_COLUMNS = ("name", "dims_json", "types_json", "strides_json", "concrete_json")


def with_estimates(calls: pl.DataFrame) -> pl.DataFrame:
    """`calls` (columns name, flops and the op_args JSON columns) plus ESTIMATE_SCHEMA's columns.

    The formula runs once per distinct (name, arguments); where the profiler recorded `flops`,
    those are the call's FLOPs and its model is "profiler" (bytes still come from the formula)."""
    keys = calls.select(*_ARG_COLUMNS).unique()
    rows: dict[str, list[object]] = {name: [] for name in ESTIMATE_SCHEMA}
    for name, dims, types, strides, concrete in keys.iter_rows():
        call = parse_call(name, dims, types, strides, concrete)
        found = estimate(call) if call is not None else None
        rows["model"].append(found.model if found else None)
        rows["category"].append(category_of(name) or "other")
        rows["call_flops"].append(found.flops if found else None)
        rows["call_bytes"].append(found.bytes if found else None)
        rows["peak_dtype"].append(peak_dtype(found.dtype) if found else None)
    figures = pl.concat([keys, pl.DataFrame(rows, schema=ESTIMATE_SCHEMA)], how="horizontal")
    out = calls.join(figures, on=list(_ARG_COLUMNS), how="left", nulls_equal=True)
    profiled = pl.col("flops").is_not_null()
    return out.with_columns(
        model=pl.when(profiled).then(pl.lit(PROFILER_MODEL)).otherwise(pl.col("model")),
        call_flops=pl.when(profiled).then(pl.col("flops")).otherwise(pl.col("call_flops")),
    )


BUSY_SCHEMA: dict[str, pl.DataType] = {"rank": pl.Int32(), "pos": pl.Int64(), "busy_us": pl.Float64()}


def busy_per_call(tree: pl.DataFrame, work: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """rank, pos, busy_us: for each call of `calls` (rank, pos), the GPU busy time (overlaps
    merged) of the device work its subtree launched.

    `tree`: rank, pos, parent (the profiler's event tree); `work`: rank, owner, ts, end (the device
    rows with the `pos` of the event that launched them). Each row climbs from its owner to the
    top, and counts for every call it passes."""
    wanted = calls.select("rank", "pos").unique()
    if wanted.height == 0 or work.height == 0:
        return pl.DataFrame(schema=BUSY_SCHEMA)
    parents = tree.select("rank", "pos", "parent")
    frontier = work.filter(pl.col("owner").is_not_null()).select("rank", pl.col("owner").alias("pos"), "ts", "end")
    hits = []
    while frontier.height:
        hits.append(frontier.join(wanted, on=["rank", "pos"], how="semi"))
        frontier = (
            frontier.join(parents, on=["rank", "pos"], how="inner")
            .filter(pl.col("parent").is_not_null())
            .select("rank", pl.col("parent").alias("pos"), "ts", "end")
        )
    spans = pl.concat(hits, how="vertical")
    if spans.height == 0:
        return pl.DataFrame(schema=BUSY_SCHEMA)
    return busy_time(spans, ["rank", "pos"]).select([pl.col(k).cast(t) for k, t in BUSY_SCHEMA.items()])


def per_call_rates() -> list[pl.Expr]:
    """Each call's achieved TFLOP/s and TB/s over its busy time (FLOP/µs ÷ 1e6 = TFLOP/s)."""
    busy = pl.col("busy_us")
    return [
        pl.when(busy > 0).then(pl.col("call_flops") / busy / 1e6).alias("call_tflop_per_s"),
        pl.when(busy > 0).then(pl.col("call_bytes") / busy / 1e6).alias("call_tb_per_s"),
    ]


def row_means() -> list[pl.Expr]:
    """The grouped row's figures: means over its calls (TraceLens's per-call means)."""
    return [
        pl.col("model").drop_nulls().first().alias("model"),
        pl.col("category").drop_nulls().first().alias("category"),
        (pl.col("call_flops").mean() / 1e9).alias("gflop"),
        pl.when(pl.col("call_flops").is_not_null().any()).then(pl.col("call_flops").sum()).alias("call_flop_count"),
        pl.col("call_bytes").mean().alias("bytes_moved"),
        pl.col("call_tflop_per_s").mean().alias("mean_tflop_per_s"),
        pl.col("call_tb_per_s").mean().alias("tb_per_s"),
        pl.col("peak_dtype").drop_nulls().first().alias("peak_dtype"),
    ]


def roofline(table: pl.DataFrame, device_of_rank: dict[int, Device | None]) -> pl.DataFrame:
    """`table` (rank, gflop, bytes_moved, tflop_per_s, tb_per_s, peak_dtype) plus flop_per_byte,
    pct_of_peak (achieved over the roof at the row's intensity: min(peak, intensity × bandwidth)),
    bound (compute when the intensity reaches the ridge point, else memory), and the roofs:
    peak_tflop_per_s (the device's peak for the row's dtype) and memory_tb_per_s."""
    pairs = table.select("rank", "peak_dtype").unique()
    peaks = pl.DataFrame(
        {
            "rank": pairs["rank"],
            "peak_dtype": pairs["peak_dtype"],
            "_peak": [_peak(device_of_rank.get(r), d) for r, d in pairs.iter_rows()],
            "_bw": [_bandwidth(device_of_rank.get(r)) for r, _ in pairs.iter_rows()],
        },
        schema={"rank": table.schema["rank"], "peak_dtype": pl.Utf8(), "_peak": pl.Float64(), "_bw": pl.Float64()},
    )
    out = table.join(peaks, on=["rank", "peak_dtype"], how="left", nulls_equal=True)
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
    modelled = pl.col("gflop").is_not_null() | pl.col("bytes_moved").is_not_null()
    return out.with_columns(
        peak_tflop_per_s=pl.when(modelled).then(pl.col("_peak")),
        memory_tb_per_s=pl.when(modelled).then(pl.col("_bw")),
    ).drop("_peak", "_bw")


def headroom() -> pl.Expr:
    """headroom_us: the row's GPU time it would not need at the roof, gpu_total_us · (1 −
    pct_of_peak/100) (none when above the roof): time × distance from the roof, where
    optimisation pays."""
    return (pl.col("gpu_total_us") * (1.0 - pl.col("pct_of_peak") / 100.0)).clip(lower_bound=0.0).alias("headroom_us")


def _peak(device: Device | None, dtype: str | None) -> float | None:
    return None if device is None else device.peak_tflops(dtype)


def _bandwidth(device: Device | None) -> float | None:
    return None if device is None else device.memory_tbps


CATEGORY_SPEC = TableColumns(
    RANK,
    ColumnSpec("category", pl.Utf8(), "an op family: gemm, attention, conv, elementwise, norm, reduce, other", "id"),
    ColumnSpec("count", pl.Int64(), "GPU operations of the family"),
    ColumnSpec("gpu_time_us", pl.Float64(), "Σ of their durations", "key"),
    ColumnSpec("gpu_time_pct", pl.Float64(), "gpu_time_us as a share of the rank's GPU time", "key"),
)
CATEGORY_SCHEMA = CATEGORY_SPEC.schema


def category_summary(tree: pl.DataFrame, work: pl.DataFrame) -> pl.DataFrame:
    """rank, category, count, gpu_time_us, gpu_time_pct: each device row's time goes to the
    innermost op above its launch that has a category (an `aten::linear` → `aten::addmm` launch is
    counted once, as GEMM, under addmm); work under no categorized op is "other". `count`: the
    calls the time went to; the share is of the rank's device time (kernels, copies, memsets).

    `tree`: rank, pos, parent, name; `work`: rank, owner, dur."""
    if work.height == 0:
        return pl.DataFrame(schema=CATEGORY_SCHEMA)
    names = tree.select("name").unique()
    known = names.with_columns(
        category=pl.Series([category_of(n) for n in names["name"].to_list()], dtype=pl.Utf8)
    ).filter(pl.col("category").is_not_null())
    nodes = tree.select("rank", "pos", "parent", "name").join(known, on="name", how="left")
    frontier = work.select("rank", "dur", pl.int_range(pl.len()).alias("_row"), pl.col("owner").alias("pos"))
    found = []
    while frontier.height:
        step = frontier.join(nodes, on=["rank", "pos"], how="left")
        found.append(step.filter(pl.col("category").is_not_null()).select("rank", "_row", "dur", "pos", "category"))
        frontier = step.filter(pl.col("category").is_null() & pl.col("parent").is_not_null()).select(
            "rank", "dur", "_row", pl.col("parent").alias("pos")
        )
    attributed = pl.concat(found, how="vertical") if found else pl.DataFrame()
    placed = attributed.select("_row") if attributed.height else pl.DataFrame(schema={"_row": pl.Int64()})
    rest = (
        work.select("rank", "dur", pl.int_range(pl.len()).alias("_row"), pl.col("owner").alias("pos"))
        .join(placed, on="_row", how="anti")
        .with_columns(category=pl.lit("other"))
        .select("rank", "_row", "dur", "pos", "category")
    )
    rows = pl.concat([attributed, rest], how="vertical_relaxed") if attributed.height else rest
    order = {name: i for i, name in enumerate(CATEGORIES)}
    summary = (
        # Sorted and in order: float sums then add up the same way on every run.
        rows.sort("rank", "_row")
        .group_by("rank", "category", maintain_order=True)
        .agg(count=pl.col("pos").drop_nulls().n_unique(), gpu_time_us=pl.col("dur").sum())
        .with_columns(
            gpu_time_pct=pl.when(pl.col("gpu_time_us").sum().over("rank") > 0).then(
                100.0 * pl.col("gpu_time_us") / pl.col("gpu_time_us").sum().over("rank")
            )
        )
        .with_columns(_order=pl.col("category").replace_strict(order, default=len(order), return_dtype=pl.Int64))
        .sort("rank", "_order")
    )
    return summary.select([pl.col(k).cast(t) for k, t in CATEGORY_SCHEMA.items()])
