"""Temporal breakdown (docs/semantics-breakdowns.md, temporal): idle, compute and non-compute time of each rank's GPU.

Per rank, over its GPU activity (all streams together):

* ``span_us`` — first GPU activity start to last GPU activity end;
* ``idle_us`` — span minus the busy time of the union of all GPU activity;
* ``compute_us`` — busy time of the union of COMPUTATION kernels;
* ``non_compute_us`` — busy time not covered by any compute kernel (communication, memory, …);
  overlap of compute with anything else is credited to compute.

Corrected mode selects GPU activity by category (kernels, copies, memsets) and types kernels
with htatui's rules; compat mode uses HTA's selector S1 (``stream != -1``, so CUDA sync rows
and Triton launcher ``cpu_op`` rows count) and its name-only typing, and rounds the
percentages to 2 decimals as HTA does. A rank with no GPU activity gives no row.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.intervals import busy_time
from htatui.analysis.core.kernel_types import COMPUTATION, typed_gpu
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.stored import summary_rows
from htatui.trace.model import TraceSet

SPEC = TableColumns(
    RANK,
    ColumnSpec("idle_us", pl.Float64(), "GPU span minus the time any kernel, copy or memset ran"),
    ColumnSpec("compute_us", pl.Float64(), "time a computation kernel ran (overlap with anything else counts here)"),
    ColumnSpec("non_compute_us", pl.Float64(), "time GPU work ran with no computation kernel (comm, memory, …)"),
    ColumnSpec(
        "span_us",
        pl.Float64(),
        "the rank's GPU span: first GPU work's start to last GPU work's end in the chosen steps",
        "key",
        label="GPU span µs",
    ),
    ColumnSpec("idle_pct", pl.Float64(), "idle_us as a share of the GPU span", "key"),
    ColumnSpec("compute_pct", pl.Float64(), "compute_us as a share of the GPU span", "key"),
    ColumnSpec("non_compute_pct", pl.Float64(), "non_compute_us as a share of the GPU span", "key"),
)
SCHEMA = SPEC.schema


@dataclass(frozen=True)
class TemporalOptions(CommonOptions):
    """The temporal breakdown has no knobs of its own."""


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def compute(traces: TraceSet, options: TemporalOptions) -> pl.DataFrame:
    stored = summary_rows(traces, options)
    if stored is not None:
        return stored.select(
            pl.col(name).cast(dtype) if name != "span_us" else pl.col("gpu_span_us").alias(name)
            for name, dtype in SCHEMA.items()
        )
    gpu = typed_gpu(traces, options)
    if gpu.height == 0:
        return empty()
    span = gpu.group_by("rank").agg(span_us=pl.col("end").max() - pl.col("ts").min())
    busy = busy_time(gpu, ["rank"])
    compute_busy = busy_time(gpu.filter(pl.col("kind") == COMPUTATION), ["rank"]).rename({"busy_us": "compute_us"})
    out = (
        span.join(busy, on="rank", how="left")
        .join(compute_busy, on="rank", how="left")
        .with_columns(pl.col("compute_us").fill_null(0.0))
        .with_columns(
            idle_us=pl.col("span_us") - pl.col("busy_us"),
            non_compute_us=pl.col("busy_us") - pl.col("compute_us"),
        )
    )
    pct = {
        f"{part}_pct": pl.when(pl.col("span_us") > 0).then(100.0 * pl.col(f"{part}_us") / pl.col("span_us"))
        for part in ("idle", "compute", "non_compute")
    }
    out = hta.outputs_rounded(out.with_columns(**pct), options.hta_compat, 2, *pct)
    return out.select(pl.col(name).cast(dtype) for name, dtype in SCHEMA.items()).sort("rank")
