"""Communication/computation overlap (docs/semantics-breakdowns.md, overlap).

Per rank: the time during which at least one COMMUNICATION kernel and at least one
COMPUTATION kernel run at once, divided by the busy time of the communication kernels, ×100.
Memory kernels and other rows are ignored.

A rank with GPU activity but no communication kernels gets ``overlap_pct`` null (HTA returns
NaN with a divide warning); a rank with no GPU activity at all gives no row. Compat mode uses
HTA's selector S1 and name-only typing and rounds to 2 decimals.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import cancel, hta
from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.comm_rules import cpu_collective_names
from htatui.analysis.core.intervals import busy_time, state_durations
from htatui.analysis.core.kernel_types import COMMUNICATION, COMPUTATION, typed_gpu
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.prepare import chosen_ranks, prepare, rank_by_rank
from htatui.analysis.core.stored import summary_rows
from htatui.trace.model import TraceSet

SPEC = TableColumns(
    RANK,
    ColumnSpec(
        "overlap_pct", pl.Float64(), "share of the rank's communication time that computation ran beside", "key"
    ),
)
SCHEMA = SPEC.schema

_FLAGS = {COMMUNICATION: 1, COMPUTATION: 2}
_BOTH = 3


@dataclass(frozen=True)
class OverlapOptions(CommonOptions):
    """The overlap view has no knobs of its own."""


NO_COMM = "no communication kernels on the chosen ranks: overlap is undefined (a single-GPU job?)"
CPU_COLLECTIVES = (
    "no communication kernels on the chosen ranks: the collectives run on the CPU (gloo:, shm, c10d ops: the "
    "communication rules' host collectives), "
    "so there is no GPU communication to overlap; the Ranks view shows their cost and waits"
)


def table(traces: TraceSet, options: OverlapOptions) -> NotedTable:
    """`compute`, and why every rank's overlap is undefined when no rank has communication kernels.

    Over a dataset a rank at a time, as a per-rank table is: only the rows are held together."""
    frame = rank_by_rank(traces, options, compute)
    if frame.height == 0 or frame["overlap_pct"].null_count() < frame.height:
        return NotedTable(frame)
    return NotedTable(frame, CPU_COLLECTIVES if has_cpu_collectives(traces, options) else NO_COMM)


def has_cpu_collectives(traces: TraceSet, options: CommonOptions) -> bool:
    """True when the chosen ranks run collectives as CPU ops (gloo:*, nccl:*, …, or c10d::*).

    A rank at a time, stopping at the first that has them (a gloo job: its first rank), so over a
    dataset one rank is read where every rank's names were (15 s for 1,024 ranks of 13 MB); a rank
    read here that was not read before is dropped again."""
    chosen = chosen_ranks(traces, options)
    # As `each_rank`: a lone unread rank is kept (reading it again would cost more than holding it).
    drop = sum(not traces.ranks[rank].loaded for rank in chosen) >= 2
    for rank in chosen:
        cancel.check()
        unread = drop and not traces.ranks[rank].loaded
        events = prepare(traces, options.with_ranks((rank,)), columns=("cat", "name")).events
        names = events.filter(pl.col("cat").is_in(["user_annotation", "cpu_op"]))["name"].cast(pl.Utf8).unique()
        if unread:
            traces.ranks[rank].unload()
        if cpu_collective_names(names, options.scope.rules).len():
            return True
    return False


def compute(traces: TraceSet, options: OverlapOptions) -> pl.DataFrame:
    stored = summary_rows(traces, options)
    if stored is not None:
        return stored.select(pl.col(c).cast(t) for c, t in SCHEMA.items())
    gpu = typed_gpu(traces, options).select("rank", "kind", "ts", "end")
    if gpu.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    ranks = gpu.select(pl.col("rank").unique())
    comm = busy_time(gpu.filter(pl.col("kind") == COMMUNICATION), ["rank"]).rename({"busy_us": "comm_us"})
    both = state_durations(gpu, _FLAGS, ["rank"]).filter(pl.col("state") == _BOTH).select("rank", overlap_us="duration")
    out = (
        ranks.join(comm, on="rank", how="left")
        .join(both, on="rank", how="left")
        .with_columns(
            overlap_pct=pl.when(pl.col("comm_us") > 0).then(
                100.0 * pl.col("overlap_us").fill_null(0.0) / pl.col("comm_us")
            )
        )
    )
    out = hta.outputs_rounded(out, options.hta_compat, 2, "overlap_pct")
    return out.select(pl.col(c).cast(t) for c, t in SCHEMA.items()).sort("rank")
