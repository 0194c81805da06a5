"""The operator table of `prof.key_averages().table(...)`, from the trace (no HTA counterpart).

Per rank and CPU operator name (category cpu_op): how many calls, their total CPU time, their
self CPU time (each call's duration minus its direct children's on the same thread, never below
zero), the GPU time of the work the op launched itself (runtime calls whose closest enclosing
cpu_op is this call) and the GPU time of everything launched beneath it (its own calls and its
descendants'). Nesting comes from `htatui.analysis.callstack`, per thread (the backward thread is
not linked to the main thread here). A name nested inside itself is counted at every level, as
PyTorch does. GPU work = kernels, copies and memsets linked to the runtime call by correlation
id. HTA has no such table, so HTA-compatible mode only applies HTA's ns rounding and step filter.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis import callstack
from htatui.analysis.common import CommonOptions, prepare
from htatui.trace.model import TraceSet

COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "name": pl.Utf8(),
    "count": pl.Int64(),
    "cpu_total_us": pl.Float64(),
    "cpu_self_us": pl.Float64(),
    "gpu_self_us": pl.Float64(),
    "gpu_total_us": pl.Float64(),
}

OP_CATEGORY = "cpu_op"


@dataclass(frozen=True)
class OpsOptions(CommonOptions):
    """Operator-table knobs."""

    sort_by: str = "gpu_self_us"
    """Any column of the table; rows are sorted within each rank."""
    descending: bool = True
    top: int | None = None
    """Keep the first `top` rows of each rank; None = all."""


def instances(traces: TraceSet, options: CommonOptions) -> pl.DataFrame:
    """One row per cpu_op call: rank, index, name, dur, self_us, gpu_self_us, gpu_total_us."""
    events = prepare(traces, options).events
    # HTA has no such table: compat mode only changes the times (HTA's ns rounding and step
    # filter, applied by `prepare`); nesting and GPU rows stay the corrected ones.
    stack = callstack.build(events)
    schema = {
        "rank": pl.Int32(),
        "index": pl.Int64(),
        "name": pl.Utf8(),
        "dur": pl.Float64(),
        "self_us": pl.Float64(),
        "gpu_self_us": pl.Float64(),
        "gpu_total_us": pl.Float64(),
    }
    if stack.height == 0:
        return pl.DataFrame(schema=schema)
    is_op = stack["cat"].cast(pl.Utf8) == OP_CATEGORY
    links = callstack.device_links(events, stack)
    # GPU time per launching call (its `pos`), then per subtree and per closest enclosing op.
    per_call = links.group_by("host_pos").agg(gpu_us=pl.col("dur").sum()).rename({"host_pos": "pos"})
    total = callstack.subtree_sum(stack, per_call, "gpu_us")
    nearest = callstack.nearest_ancestor(stack, is_op)
    owner = pl.DataFrame({"pos": stack["pos"], "is_op": is_op, "nearest": nearest}).select(
        "pos", owner=pl.when(pl.col("is_op")).then(pl.col("pos")).otherwise(pl.col("nearest"))
    )
    # An op owns what it launched directly: its own calls' work if it is a launching call itself,
    # else the work of calls whose closest enclosing op it is.
    direct = (
        per_call.join(owner, on="pos", how="inner")
        .drop_nulls("owner")
        .group_by("owner")
        .agg(gpu_self_us=pl.col("gpu_us").sum())
        .rename({"owner": "pos"})
    )
    children = (
        stack.drop_nulls("parent").group_by("parent").agg(child_us=pl.col("dur").clip(lower_bound=0.0).sum())
    ).rename({"parent": "pos"})
    ops = (
        stack.with_columns(gpu_total_us=total)
        .filter(is_op)
        .join(children, on="pos", how="left")
        .join(direct, on="pos", how="left")
        .select(
            "rank",
            "index",
            name=pl.col("name").cast(pl.Utf8),
            dur=pl.col("dur"),
            self_us=(pl.col("dur") - pl.col("child_us").fill_null(0.0)).clip(lower_bound=0.0),
            gpu_self_us=pl.col("gpu_self_us").fill_null(0.0),
            gpu_total_us=pl.col("gpu_total_us"),
        )
    )
    return ops.select([pl.col(name).cast(dtype) for name, dtype in schema.items()])


def compute(traces: TraceSet, options: OpsOptions) -> pl.DataFrame:
    """rank, name, count, cpu_total_us, cpu_self_us, gpu_self_us, gpu_total_us per (rank, op
    name), sorted within each rank by `sort_by` (ties by name), first `top` rows per rank."""
    if options.sort_by not in COLUMNS:
        raise ValueError(f"sort_by must be one of {', '.join(COLUMNS)}; got {options.sort_by!r}")
    calls = instances(traces, options)
    if calls.height == 0:
        return pl.DataFrame(schema=COLUMNS)
    table = calls.group_by("rank", "name").agg(
        count=pl.len(),
        cpu_total_us=pl.col("dur").sum(),
        cpu_self_us=pl.col("self_us").sum(),
        gpu_self_us=pl.col("gpu_self_us").sum(),
        gpu_total_us=pl.col("gpu_total_us").sum(),
    )
    keys = ["rank", options.sort_by] + (["name"] if options.sort_by != "name" else [])
    order = [False, options.descending] + ([False] if options.sort_by != "name" else [])
    if options.sort_by == "rank":
        keys, order = ["rank", "name"], [options.descending, False]
    table = table.sort(keys, descending=order)
    if options.top is not None:
        table = table.filter(pl.int_range(pl.len()).over("rank") < max(options.top, 0))
    return table.select([pl.col(name).cast(dtype) for name, dtype in COLUMNS.items()])
