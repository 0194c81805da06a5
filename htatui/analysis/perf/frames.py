"""The performance model over polars frames: per-call estimates, the GPU busy time and dtype of
the work each call launched, calls nested in a call of their own row, and the category summary
(docs/semantics-perf-model.md). The grouped rows and the roofline are `roofline.py`."""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.intervals import busy_time
from htatui.analysis.perf.call import parse_call
from htatui.analysis.perf.dispatch import CATEGORIES, category_of, estimate
from htatui.analysis.perf.dtypes import peak_dtype
from htatui.analysis.perf.kernels import kernel_dtype
from htatui.trace.plausible import CLOCK_RESOLUTION_US

PROFILER_MODEL = "profiler"
"""The `model` of a call whose FLOPs the profiler recorded (`with_flops=True`)."""
NO_MODEL = "none"

MATRIX_CATEGORIES = frozenset(("GEMM", "conv", "attention"))
"""The families whose arithmetic runs on matrix (tensor) cores; the rest use the vector units."""

ESTIMATE_SCHEMA: dict[str, pl.DataType] = {
    "model": pl.Utf8(),
    "category": pl.Utf8(),
    "call_flops": pl.Float64(),
    "call_bytes": pl.Float64(),
    "input_dtype": pl.Utf8(),
}
_ARG_COLUMNS = ("name", "dims_json", "types_json", "strides_json", "concrete_json")


def with_estimates(calls: pl.DataFrame) -> pl.DataFrame:
    """`calls` (columns name, flops and the op_args JSON columns) plus ESTIMATE_SCHEMA's columns
    and `unit` (matrix or vector, by the category).

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
        rows["input_dtype"].append(peak_dtype(found.dtype) if found else None)
    figures = pl.concat([keys, pl.DataFrame(rows, schema=ESTIMATE_SCHEMA)], how="horizontal")
    out = calls.join(figures, on=list(_ARG_COLUMNS), how="left", nulls_equal=True)
    profiled = pl.col("flops").is_not_null()
    return out.with_columns(
        model=pl.when(profiled).then(pl.lit(PROFILER_MODEL)).otherwise(pl.col("model")),
        call_flops=pl.when(profiled).then(pl.col("flops")).otherwise(pl.col("call_flops")),
        unit=pl.when(pl.col("category").is_in(list(MATRIX_CATEGORIES)))
        .then(pl.lit("matrix"))
        .otherwise(pl.lit("vector")),
    )


BUSY_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "pos": pl.Int64(),
    "busy_us": pl.Float64(),
    "kernel_dtype": pl.Utf8(),
}


def work_dtypes(work: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """`work` (rank, owner, name, …) plus `kernel_dtype`: the dtype the kernel's name says it
    computes in (`kernels.kernel_dtype`), else the input dtype of the op that launched it."""
    names = work.select(pl.col("name").cast(pl.Utf8)).unique()
    named = names.with_columns(named_dtype=pl.Series([kernel_dtype(n) for n in names["name"].to_list()], dtype=pl.Utf8))
    owners = calls.select("rank", pl.col("pos").alias("owner"), pl.col("input_dtype").alias("owner_dtype"))
    return (
        work.with_columns(pl.col("name").cast(pl.Utf8))
        .join(named, on="name", how="left")
        .join(owners, on=["rank", "owner"], how="left")
        .with_columns(kernel_dtype=pl.coalesce("named_dtype", "owner_dtype"))
        .drop("named_dtype", "owner_dtype")
    )


def busy_per_call(tree: pl.DataFrame, work: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """rank, pos, busy_us, kernel_dtype: for each call of `calls` (rank, pos), the GPU busy time
    (overlaps merged) of the device work its subtree launched, and the dtype of the longest of
    that work that names one (`work_dtypes`).

    `tree`: rank, pos, parent (the profiler's event tree); `work`: rank, owner, ts, end, dur,
    kernel_dtype (the device rows with the `pos` of the event that launched them). Each row climbs
    from its owner to the top, and counts for every call it passes."""
    wanted = calls.select("rank", "pos").unique()
    if wanted.height == 0 or work.height == 0:
        return pl.DataFrame(schema=BUSY_SCHEMA)
    parents = tree.select("rank", "pos", "parent")
    carried = ("ts", "end", "dur", "kernel_dtype")
    frontier = work.filter(pl.col("owner").is_not_null()).select("rank", pl.col("owner").alias("pos"), *carried)
    hits = []
    while frontier.height:
        hits.append(frontier.join(wanted, on=["rank", "pos"], how="semi"))
        frontier = (
            frontier.join(parents, on=["rank", "pos"], how="inner")
            .filter(pl.col("parent").is_not_null())
            .select("rank", pl.col("parent").alias("pos"), *carried)
        )
    spans = pl.concat(hits, how="vertical")
    if spans.height == 0:
        return pl.DataFrame(schema=BUSY_SCHEMA)
    dtypes = (
        spans.filter(pl.col("kernel_dtype").is_not_null())
        .group_by("rank", "pos")
        .agg(pl.col("kernel_dtype").sort_by("dur", descending=True).first())
    )
    busy = busy_time(spans.select("rank", "pos", "ts", "end"), ["rank", "pos"])
    out = busy.join(dtypes, on=["rank", "pos"], how="left")
    return out.select([pl.col(k).cast(t) for k, t in BUSY_SCHEMA.items()])


def nested_in_row(tree: pl.DataFrame, calls: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """rank, pos, nested: whether each call of `calls` (rank, pos and the `key` columns) runs
    inside another call with the same key (an op calling itself with the same arguments): its
    work is already counted by the outer call, so its row counts it once."""
    keyed = calls.select("rank", "pos", *key)
    parents = tree.select("rank", "pos", "parent")
    frontier = keyed.join(parents, on=["rank", "pos"], how="left").select(
        "rank", pl.col("pos").alias("call"), pl.col("parent").alias("pos"), *key
    )
    found: list[pl.DataFrame] = []
    while frontier.height:
        frontier = frontier.filter(pl.col("pos").is_not_null())
        same = frontier.join(keyed, on=["rank", "pos", *key], how="semi", nulls_equal=True)
        found.append(same.select("rank", "call"))
        frontier = (
            frontier.join(same.select("rank", "call"), on=["rank", "call"], how="anti")
            .join(parents, on=["rank", "pos"], how="left")
            .select("rank", "call", pl.col("parent").alias("pos"), *key)
        )
    inner = (
        pl.concat(found, how="vertical").unique()
        if found
        else pl.DataFrame(schema={"rank": pl.Int32(), "call": pl.Int64()})
    )
    return (
        keyed.select("rank", "pos")
        .join(inner.with_columns(nested=pl.lit(True)).rename({"call": "pos"}), on=["rank", "pos"], how="left")
        .with_columns(pl.col("nested").fill_null(False))
    )


def per_call_rates() -> list[pl.Expr]:
    """Each call's achieved TFLOP/s and TB/s over its busy time (FLOP/µs ÷ 1e6 = TFLOP/s), none
    over a busy time the clock cannot measure (`plausible.measurable`)."""
    busy = pl.col("busy_us")
    measured = busy > CLOCK_RESOLUTION_US
    return [
        pl.when(measured).then(pl.col("call_flops") / busy / 1e6).alias("call_tflop_per_s"),
        pl.when(measured).then(pl.col("call_bytes") / busy / 1e6).alias("call_tb_per_s"),
    ]


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
