"""The operator table of `prof.key_averages().table(...)`, from the trace (no HTA counterpart).

Per rank and row name, the rows key_averages lists for the host: operators, user annotations
(`ProfilerStep#N` listed as `ProfilerStep*`), runtime and driver calls and Triton launchers,
each with its `kind`; optionally the device rows too (kernels, copies, memsets, GPU
annotations). Counts and times follow the profiler's own event tree (`op_events`): self CPU =
duration minus the children's, GPU self = the work it launched itself, GPU total = its subtree's.
docs/semantics-ops.md has the rules. Default mode keeps every step, as key_averages does;
HTA-compatible mode applies HTA's ns rounding and last-step filter before the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis import op_events
from htatui.analysis.common import CommonOptions, prepare
from htatui.analysis.op_events import DEVICE_KINDS, HOST_KINDS
from htatui.trace.model import TraceSet, empty_events

COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "name": pl.Utf8(),
    "kind": pl.Utf8(),
    "count": pl.Int64(),
    "cpu_total_us": pl.Float64(),
    "cpu_self_us": pl.Float64(),
    "gpu_self_us": pl.Float64(),
    "gpu_total_us": pl.Float64(),
}


@dataclass(frozen=True)
class OpsOptions(CommonOptions):
    """Operator-table knobs."""

    sort_by: str = "gpu_self_us"
    """Any column of the table; rows are sorted within each rank."""
    descending: bool = True
    top_k: int | None = None
    """Keep the first `top_k` rows of each rank; None = all (`--top`)."""
    kinds: str = "host"
    """Which rows: "host" (what key_averages lists for the CPU), "all" (device rows too), or
    a comma list of kinds (op, annotation, runtime, driver, kernel-launcher, kernel, memcpy,
    memset, gpu-annotation)."""


def chosen_kinds(kinds: str) -> tuple[str, ...]:
    """The kinds a `kinds` option names; ValueError for an unknown one."""
    known = (*HOST_KINDS, *DEVICE_KINDS)
    chosen: list[str] = []
    for part in (p.strip() for p in kinds.split(",")):
        if part == "host":
            chosen.extend(HOST_KINDS)
        elif part == "all":
            chosen.extend(known)
        elif part in known:
            chosen.append(part)
        elif part:
            raise ValueError(f"kinds must be host, all or some of {', '.join(known)}; got {part!r}")
    return tuple(dict.fromkeys(chosen)) or HOST_KINDS


def tree(traces: TraceSet, options: CommonOptions) -> op_events.OpEvents:
    """The profiler's event tree of the chosen ranks (`op_events.build`).

    Default: every event, as the profiler keeps every step. Compat: HTA's ns rounding and last
    step filter (`prepare`) first.
    """
    if options.hta_compat:
        events = prepare(traces, options).events
    else:
        ranks = traces.rank_ids if options.ranks is None else [r for r in options.ranks if r in traces.ranks]
        frames = [traces.ranks[r].events.filter(pl.col("ph") == "X") for r in ranks]
        events = pl.concat(frames, how="vertical") if frames else empty_events()
    return op_events.build(events)


def instances(traces: TraceSet, options: CommonOptions) -> pl.DataFrame:
    """One row per host event of the profiler's tree: `op_events.EVENT_SCHEMA`."""
    return tree(traces, options).events


def compute(traces: TraceSet, options: OpsOptions) -> pl.DataFrame:
    """rank, name, kind, count, cpu_total_us, cpu_self_us, gpu_self_us, gpu_total_us per (rank,
    name, kind), sorted within each rank by `sort_by` (ties by name, kind), first `top_k` per rank."""
    if options.sort_by not in COLUMNS:
        raise ValueError(f"sort_by must be one of {', '.join(COLUMNS)}; got {options.sort_by!r}")
    kinds = chosen_kinds(options.kinds)
    built = tree(traces, options)
    host = built.events.filter(pl.col("kind").is_in(kinds)).select(
        "rank", "name", "kind", "cpu_total_us", "cpu_self_us", "gpu_self_us", "gpu_total_us"
    )
    device = built.work.filter(pl.col("kind").is_in(kinds)).select(
        "rank",
        "name",
        "kind",
        cpu_total_us=pl.lit(0.0),
        cpu_self_us=pl.lit(0.0),
        gpu_self_us="dur",
        gpu_total_us="dur",
    )
    rows = pl.concat([host, device], how="vertical")
    if rows.height == 0:
        return pl.DataFrame(schema=COLUMNS)
    table = rows.group_by("rank", "name", "kind").agg(
        count=pl.len(),
        cpu_total_us=pl.col("cpu_total_us").sum(),
        cpu_self_us=pl.col("cpu_self_us").sum(),
        gpu_self_us=pl.col("gpu_self_us").sum(),
        gpu_total_us=pl.col("gpu_total_us").sum(),
    )
    return _order(table, options).select([pl.col(name).cast(dtype) for name, dtype in COLUMNS.items()])


def _order(table: pl.DataFrame, options: OpsOptions) -> pl.DataFrame:
    ties = [c for c in ("name", "kind") if c != options.sort_by]
    keys = ["rank", options.sort_by, *ties]
    order = [False, options.descending] + [False] * len(ties)
    if options.sort_by == "rank":
        keys, order = ["rank", "name", "kind"], [options.descending, False, False]
    table = table.sort(keys, descending=order)
    if options.top_k is not None:
        table = table.filter(pl.int_range(pl.len()).over("rank") < max(options.top_k, 0))
    return table
