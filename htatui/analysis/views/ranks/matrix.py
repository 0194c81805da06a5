"""The rank × step matrix: step time, GPU busy and idle, communication, waits, and one column per CPU phase."""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.columns import RANK, STEP, ColumnSpec, TableColumns
from htatui.analysis.core.intervals import busy_time
from htatui.analysis.views.ranks.meeting import KERNELS

MATRIX_SPEC = TableColumns(
    RANK,
    STEP,
    ColumnSpec(
        "step_us", pl.Float64(), "the host ProfilerStep span's length (what the step took)", "key", label="step µs"
    ),
    ColumnSpec("gpu_busy_us", pl.Float64(), "time in the step any GPU work ran"),
    ColumnSpec("gpu_idle_us", pl.Float64(), "step_us minus gpu_busy_us"),
    ColumnSpec("comm_us", pl.Float64(), "time in the step a collective ran (kernels, or CPU calls without them)"),
    ColumnSpec("wait_us", pl.Float64(), "Σ of the rank's waits at collectives for the last rank to arrive", "key"),
    ColumnSpec("*_us", pl.Float64(), "time in the step in the CPU phase the column is named after", "low"),
)
MATRIX_BASE = MATRIX_SPEC.schema
"""The fixed columns of the rank × step matrix; one `<phase>_us` column per CPU phase follows."""


def step_matrix(
    step_table: pl.DataFrame, gpu_steps: pl.DataFrame, calls: pl.DataFrame, source: str | None, phases: pl.DataFrame
) -> pl.DataFrame:
    """`gpu_steps`: rank, step, gpu_busy_us, comm_kernel_us (`tables.rank_tables`)."""
    keys = ["rank", "step"]
    base = step_table.select("rank", "step", step_us="dur_us")
    busy = gpu_steps.select(*keys, "gpu_busy_us")
    if source == KERNELS:
        comm = gpu_steps.select(*keys, busy_us="comm_kernel_us").drop_nulls("busy_us")
    else:
        comm = busy_time(calls.filter(pl.col("step").is_not_null()), keys)
    waits = calls.group_by(keys).agg(wait_us=pl.col("wait_us").sum())
    out = (
        base.join(busy, on=keys, how="left")
        .join(comm.rename({"busy_us": "comm_us"}), on=keys, how="left")
        .join(waits, on=keys, how="left")
        .with_columns(
            pl.col("gpu_busy_us").fill_null(0.0),
            pl.col("comm_us").fill_null(0.0),
            pl.col("wait_us").fill_null(0.0),
        )
        .with_columns(gpu_idle_us=(pl.col("step_us") - pl.col("gpu_busy_us")).clip(lower_bound=0.0))
        .select([pl.col(c).cast(t) for c, t in MATRIX_BASE.items()])
    )
    if phases.height:
        # Phases in the order they first start is not known here; alphabetical keeps it stable.
        wide = phases.with_columns(phase=pl.col("phase") + "_us").pivot(
            on="phase", index=keys, values="dur_us", aggregate_function="sum", sort_columns=True
        )
        reserved = set(MATRIX_BASE)
        wide = wide.rename({c: f"phase {c}" for c in wide.columns if c in reserved and c not in keys})
        out = out.join(wide.with_columns(pl.col("rank").cast(pl.Int32)), on=keys, how="left")
        out = out.with_columns(pl.col(c).fill_null(0.0) for c in wide.columns if c not in keys)
    return out.sort(keys)
