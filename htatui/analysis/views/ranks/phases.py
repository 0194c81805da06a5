"""What a rank spent each step on: its top-level CPU phases, GPU compute and each compute kernel,
and one rank's phases against the other ranks' median (a straggler's cause candidates)."""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.columns import ColumnSpec, TableColumns
from htatui.analysis.core.intervals import busy_time
from htatui.analysis.core.kernel_types import COMPUTATION
from htatui.analysis.core.names import readable_name
from htatui.trace.step_sources import is_step_row, step_source

GPU_COMPUTE = "GPU compute"


OTHER_CPU_OPS = "other CPU ops"


MAX_CPU_PHASES = 12
"""CPU phases shown by name (by total time); the rest are summed as OTHER_CPU_OPS."""


PHASE_SPEC = TableColumns(
    ColumnSpec("phase", pl.Utf8(), "a CPU phase of the step (a ProfilerStep child), GPU compute or comm", "id"),
    ColumnSpec("rank_us", pl.Float64(), "the straggler's time in the phase over the steps it held up", "key"),
    ColumnSpec("others_median_us", pl.Float64(), "the other ranks' median time in it over those steps"),
    ColumnSpec("excess_us", pl.Float64(), "rank_us minus others_median_us", "key"),
)
PHASE_COLUMNS = PHASE_SPEC.schema


def cpu_phases(events: pl.DataFrame) -> pl.DataFrame:
    """rank, step, phase, dur_us: the ProfilerStep's children on its own thread — record_function
    ranges such as data_loader, forward, backward, and operators outside any range. The
    MAX_CPU_PHASES names with the most time keep their name; the rest become OTHER_CPU_OPS."""
    return fold_cpu_phases(cpu_phase_times(events))


def cpu_phase_times(events: pl.DataFrame) -> pl.DataFrame:
    """rank, step, phase, dur_us: each top-level range's time per step, by its own name (a rank's
    rows from that rank alone; `fold_cpu_phases` names the job's biggest)."""
    host = events.filter(
        pl.col("cat").cast(pl.Utf8).is_in(["user_annotation", "cpu_op"]) & pl.col("iteration").is_not_null()
    )
    name = pl.col("name").cast(pl.Utf8)
    # The step ranges themselves (ProfilerStep, or a framework's iteration annotations) are no phase.
    is_step = is_step_row(host, step_source(host))
    step_threads = host.filter(is_step).select("rank", "pid", "tid").unique()
    inside = host.filter(~is_step).join(step_threads, on=["rank", "pid", "tid"], how="semi")
    if inside.height == 0:
        return pl.DataFrame(schema=CPU_PHASE_SCHEMA)
    # Sorted by start (longer first at equal starts), a range is top-level when it starts at or
    # after every earlier range of its step has ended.
    ordered = inside.sort(["rank", "pid", "tid", "iteration", "ts", "end"], descending=[False] * 5 + [True])
    group = ["rank", "pid", "tid", "iteration"]
    top = ordered.with_columns(_before=pl.col("end").cum_max().shift(1).over(group)).filter(
        pl.col("_before").is_null() | (pl.col("ts") >= pl.col("_before"))
    )
    per_name = top.group_by("rank", "iteration", name.alias("phase")).agg(dur_us=pl.col("dur").sum())
    return per_name.select(pl.col("rank").cast(pl.Int32), step="iteration", phase="phase", dur_us="dur_us").sort(
        "rank", "step", "phase"
    )


CPU_PHASE_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "step": pl.Int64(),
    "phase": pl.Utf8(),
    "dur_us": pl.Float64(),
}


def fold_cpu_phases(per_name: pl.DataFrame) -> pl.DataFrame:
    """`cpu_phase_times` of the job with the MAX_CPU_PHASES names of most time kept and the rest
    summed as OTHER_CPU_OPS."""
    if per_name.height == 0:
        return pl.DataFrame(schema=CPU_PHASE_SCHEMA)
    # Eager loops without record_function have one phase per top-level operator: keep the big ones.
    kept = (
        per_name.group_by("phase")
        .agg(pl.col("dur_us").sum())
        .sort(["dur_us", "phase"], descending=[True, False])
        .head(MAX_CPU_PHASES)["phase"]
    )
    folded = pl.when(pl.col("phase").is_in(kept.implode())).then(pl.col("phase")).otherwise(pl.lit(OTHER_CPU_OPS))
    return per_name.group_by("rank", "step", phase=folded, maintain_order=True).agg(pl.col("dur_us").sum())


def gpu_phases(gpu: pl.DataFrame) -> pl.DataFrame:
    """rank, step, phase, dur_us: GPU compute busy time and each compute kernel name's total time."""
    compute = gpu.filter((pl.col("kind") == COMPUTATION) & pl.col("iteration").is_not_null())
    busy = busy_time(compute, ["rank", "iteration"]).select(
        "rank", step="iteration", phase=pl.lit(GPU_COMPUTE), dur_us="busy_us"
    )
    names = compute["name"].cast(pl.Utf8).unique().drop_nulls().to_list()  # a kernel without a name keeps none
    short = {n: "kernel " + readable_name(n) for n in names}
    kernels = compute.group_by(
        "rank", step="iteration", phase=pl.col("name").cast(pl.Utf8).replace_strict(short, return_dtype=pl.Utf8)
    ).agg(dur_us=pl.col("dur").sum())
    return pl.concat([busy, kernels], how="vertical_relaxed")


def phase_excess(phases: pl.DataFrame, rank: int, steps: list[int]) -> pl.DataFrame:
    """phase, rank_us, others_median_us, excess_us over `steps`: this rank's total per phase next
    to the median over the other ranks of theirs, sorted by excess (largest first)."""
    chosen = phases.filter(pl.col("step").is_in(pl.Series(steps, dtype=pl.Int64).implode()))
    ranks = chosen["rank"].unique()
    totals = chosen.group_by("rank", "phase").agg(dur_us=pl.col("dur_us").sum())
    # A rank without a phase spent 0 µs in it.
    grid = pl.DataFrame({"rank": ranks}).join(totals.select("phase").unique(), how="cross")
    full = grid.join(totals, on=["rank", "phase"], how="left").with_columns(pl.col("dur_us").fill_null(0.0))
    mine = full.filter(pl.col("rank") == rank).select("phase", rank_us="dur_us")
    others = full.filter(pl.col("rank") != rank).group_by("phase").agg(others_median_us=pl.col("dur_us").median())
    out = mine.join(others, on="phase", how="left").with_columns(
        excess_us=pl.col("rank_us") - pl.col("others_median_us")
    )
    # Ties: a named CPU phase or kernel before the GPU compute total (it says more).
    return (
        out.with_columns(_general=pl.col("phase") == GPU_COMPUTE)
        .sort(["excess_us", "_general", "phase"], descending=[True, False, False], nulls_last=True)
        .drop("_general")
        .select([pl.col(c).cast(t) for c, t in PHASE_COLUMNS.items()])
    )
