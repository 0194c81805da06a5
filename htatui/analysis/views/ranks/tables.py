"""The small per-rank tables the cross-rank analysis reads, instead of every rank's events.

Each table's rows of a rank come from that rank's events alone (its collective calls from every
meeting-point source, its merged GPU work, its per-step GPU and CPU phase times, its step spans,
the communication kernels and step extents HTA's late-start method reads), so they are made a rank
at a time — at ingest into the dataset (`htatui.jobs.ingest`), or rank by rank when a view asks,
then kept in the parse cache for a trace folder (`htatui.jobs.cached_tables`) — and only they are
held together, except `busy` (merged GPU work, the big one), read a rank at a time. `analyse` and
the late starts combine them across ranks; the in-memory path and the stored tables go through
the same functions, so their answers are identical.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.intervals import busy_time, merge_intervals
from htatui.analysis.core.kernel_types import COMMUNICATION, typed_gpu_events
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import chosen_ranks, each_rank, prepare, with_job_steps
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.views import steps as steps_view
from htatui.analysis.views.ranks.meeting import CALL_SCHEMA, SOURCES, source_calls
from htatui.analysis.views.ranks.op_bytes import op_bytes
from htatui.analysis.views.ranks.phases import cpu_phase_times, gpu_phases
from htatui.trace.model import KeptTables, TraceSet

READS = (
    *("rank", "index", "ph", "cat", "name", "pid", "tid", "ts", "dur", "end", "stream", "correlation", "iteration"),
    *("collective_name", "in_msg_nelems", "out_msg_nelems", "in_msg_size", "out_msg_size", "group_size"),
    *("pg_name", "msg_dtype"),
)
"""The event columns the tables are made from (14 of the frame's 21, and 7 of the detail table's
columns, joined on by `prepare`); tests/analysis/test_ranks.py checks it."""


SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "calls": {"source": pl.Utf8(), **CALL_SCHEMA},
    "busy": {"rank": pl.Int32(), "ts": pl.Float64(), "end": pl.Float64()},
    "gpu_steps": {"rank": pl.Int32(), "step": pl.Int64(), "gpu_busy_us": pl.Float64(), "comm_kernel_us": pl.Float64()},
    "gpu_phases": {"rank": pl.Int32(), "step": pl.Int64(), "phase": pl.Utf8(), "dur_us": pl.Float64()},
    "cpu_phases": {"rank": pl.Int32(), "step": pl.Int64(), "phase": pl.Utf8(), "dur_us": pl.Float64()},
    "steps": dict(steps_view.COLUMNS),
    "rank_steps": {"rank": pl.Int32(), "steps_used": pl.List(pl.Int64())},
    "late_kernels": dict(steps_view.LATE_KERNEL_COLUMNS),
    "late_spans": dict(steps_view.LATE_SPAN_COLUMNS),
}
"""Every table and its columns. `calls`: each rank's collective calls from each meeting-point
source (`meeting.SOURCES`); `busy`: the merged intervals of its GPU work other than communication
(what hides a wait); `gpu_steps`: per step, GPU busy and communication-kernel time; `gpu_phases`
and `cpu_phases`: per step, GPU compute and kernel-name times, and every top-level CPU range's
time by name (folded across ranks later); `steps`: the step view's rows; `rank_steps`: the steps
the scope keeps, one row per rank; `late_kernels` and `late_spans`: what HTA's late-start method
reads. Kept, they are served under the rules and code that made them (`core.kept`)."""

NAMES = tuple(SCHEMAS)

RankTables = dict[str, pl.DataFrame]


def rank_tables(traces: TraceSet, options: CommonOptions) -> RankTables:
    """The tables of the chosen ranks of `traces`, from their events (all at once: every table is
    made per rank, so one rank at a time gives the same rows)."""
    prepared = prepare(traces, options, columns=READS)
    events = prepared.events

    def bytes_of(ranks: list[int]) -> pl.DataFrame:
        return op_bytes(traces, ranks, options.scope.rules)

    calls = pl.concat(
        [
            source_calls(events, options.hta_compat, options.scope.rules, source, bytes_of).with_columns(
                source=pl.lit(source)
            )
            for source in SOURCES
        ],
        how="vertical_relaxed",
    )
    gpu = typed_gpu_events(events, options.hta_compat, options.scope.rules, "rank", "ts", "end", "dur", "iteration")
    by_step = gpu.filter(pl.col("iteration").is_not_null()).rename({"iteration": "step"})
    keys = ["rank", "step"]
    comm = busy_time(by_step.filter(pl.col("kind") == COMMUNICATION), keys).rename({"busy_us": "comm_kernel_us"})
    gpu_steps = busy_time(by_step, keys).rename({"busy_us": "gpu_busy_us"}).join(comm, on=keys, how="left")
    ranks = list(prepared.steps)
    rank_steps = pl.DataFrame(
        {"rank": ranks, "steps_used": [list(prepared.steps[rank].used) for rank in ranks]},
        schema=SCHEMAS["rank_steps"],
    )
    late_kernels, late_spans = steps_view.late_start_inputs(prepared.events, options.scope.rules)
    tables = {
        "calls": calls,
        "busy": busy_intervals(events, options.hta_compat, options.scope.rules, gpu),
        "gpu_steps": gpu_steps,
        "gpu_phases": gpu_phases(gpu),
        "cpu_phases": cpu_phase_times(events),
        "steps": steps_view.compute(traces, steps_view.StepsOptions(options.scope)),
        "rank_steps": rank_steps,
        "late_kernels": late_kernels,
        "late_spans": late_spans,
    }
    return {name: _ordered(name, tables[name]) for name in NAMES}


def busy_intervals(
    events: pl.DataFrame, hta_compat: bool, rules: Rules, gpu: pl.DataFrame | None = None
) -> pl.DataFrame:
    """rank, ts, end: the merged intervals of the ranks' GPU work other than communication."""
    if gpu is None:
        gpu = typed_gpu_events(events, hta_compat, rules, "rank", "ts", "end", "dur", "iteration")
    return merge_intervals(gpu.filter(pl.col("kind") != COMMUNICATION).select("rank", "ts", "end"), ["rank"])


_ORDER = {
    "calls": ["rank", "source", "ts", "pg", "kind", "step", "seq"],
    "busy": ["rank", "ts"],
    "gpu_steps": ["rank", "step"],
    "gpu_phases": ["rank", "step", "phase"],
    "cpu_phases": ["rank", "step", "phase"],
    "steps": ["rank", "step"],
    "rank_steps": ["rank"],
    "late_kernels": ["rank", "ts", "index"],
    "late_spans": ["rank", "iteration"],
}


def _ordered(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """The table in its schema's columns and types, in a fixed row order (rank first)."""
    schema = SCHEMAS[name]
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()]).sort(
        _ORDER[name], nulls_last=True, maintain_order=True
    )


PER_RANK = ("busy",)
"""Tables kept a file per rank and read a rank at a time (`JobTables.busy_of`): `busy` grows with
the kernel count (82 % of the tables), and only a rank's own calls read its intervals."""

SHARED = tuple(name for name in NAMES if name not in PER_RANK)
"""Tables read whole, every chosen rank's rows together."""


@dataclass(frozen=True)
class JobTables:
    """The chosen ranks' `SHARED` tables, and a reader of one rank's `busy` intervals."""

    tables: RankTables
    busy_of: Callable[[int], pl.DataFrame]

    def __getitem__(self, name: str) -> pl.DataFrame:
        return self.tables[name]


def job_tables(traces: TraceSet, options: CommonOptions) -> JobTables:
    """The chosen ranks' tables: stored ones (a dataset's, or a trace folder's kept in the parse
    cache) when they hold for `options`, else made from the events — a rank at a time over ranks
    not read yet, so only the tables are held together — and kept in the parse cache."""
    return memoised(traces, ("ranks.tables", *selection_key(traces, options)), lambda: _job_tables(traces, options))


def _job_tables(traces: TraceSet, options: CommonOptions) -> JobTables:
    options = with_job_steps(traces, options)
    chosen = chosen_ranks(traces, options)
    stored = stored_tables(traces, options, chosen)
    if stored is not None:
        return stored
    unread = [rank for rank in chosen if not traces.ranks[rank].loaded]
    parts = [rank_tables(traces, options)] if len(unread) < 2 else each_rank(traces, options, rank_tables)
    if traces.kept is not None and options.scope.is_default:
        for part in parts:
            for rank in part["rank_steps"]["rank"].to_list():
                traces.kept.keep(rank, {name: frame.filter(pl.col("rank") == rank) for name, frame in part.items()})
    # Rank order whatever order the ranks were chosen in, as one call over all of them gives.
    tables = {name: _ordered(name, pl.concat([part[name] for part in parts], how="vertical")) for name in NAMES}
    busy = dict(tables["busy"].partition_by("rank", as_dict=True))
    empty = pl.DataFrame(schema=SCHEMAS["busy"])
    return JobTables({name: tables[name] for name in SHARED}, lambda rank: busy.get((rank,), empty))


def stored_tables(traces: TraceSet, options: CommonOptions, chosen: list[int]) -> JobTables | None:
    """The chosen ranks' rows of the tables an ingest stored (or the parse cache kept), when the
    scope is the default one (the steps the default rule keeps, corrected mode); None otherwise.
    The store serves only rows made with the rules and code of now (`core.kept`)."""
    kept = traces.kept
    if kept is None or not options.scope.is_default or not chosen:
        return None
    tables: RankTables = {}
    for name in SHARED:
        frame = kept.read(name, chosen)
        if frame is None:
            return None
        tables[name] = frame
    return JobTables(tables, functools.partial(_stored_busy, traces, kept))


def _stored_busy(traces: TraceSet, kept: KeptTables, rank: int) -> pl.DataFrame:
    """One rank's stored `busy` intervals; made from its events when the parse cache lost them."""
    frame = kept.read("busy", [rank])
    if frame is not None:
        return frame
    alone = TraceSet(ranks={rank: traces.ranks[rank]})
    return _ordered("busy", busy_intervals(prepare(alone, CommonOptions(), columns=READS).events, False, SHIPPED_RULES))
