"""What bounds a step: the critical path through one rank's ops, runtime calls and GPU work.

A graph of the annotation window's events (docs/semantics-critical-path.md), its longest path,
and each edge on it charged to an event and a bound type. Tables: the summary (main), the path's
edges in order (`edges`), the events on the path by time (`top-events`), the job's path across
ranks joined at their collectives (`job`, `job-edges`), and the path solved again with an event
faster (`what-if`, `job-what-if`) or a slow rank at the median's pace (`straggler-what-if`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from htatui.analysis.core.memo import held, memoised, selection_key
from htatui.analysis.core.options import NotedTable
from htatui.analysis.core.prepare import chosen_ranks, prepare
from htatui.analysis.views.critical_path import tables
from htatui.analysis.views.critical_path.columns import SUMMARY_SPEC, TOP_SPEC
from htatui.analysis.views.critical_path.job import JobPart, job_part
from htatui.analysis.views.critical_path.longest import CycleError
from htatui.analysis.views.critical_path.options import CriticalPathOptions
from htatui.analysis.views.critical_path.path import PATH_SCHEMA, RankGraph, build_graph, path_frame, summarise
from htatui.analysis.views.critical_path.pieces import Build, JobSolution, rank_what_if_by_pieces, solve_by_pieces
from htatui.analysis.views.critical_path.step_model import Change, Saving, StepSummary, step_summary, what_if_savings
from htatui.analysis.views.critical_path.whatif import RANK_WHAT_IF_SCHEMA, WHAT_IF_SCHEMA, rank_what_if, what_if
from htatui.analysis.views.critical_path.window import COLUMNS, WindowError
from htatui.trace.model import TraceSet, with_details

__all__ = [
    "Change",
    "CriticalPathOptions",
    "Saving",
    "StepSummary",
    "step_summary",
    "summarise",
    "what_if_savings",
]

SUMMARY_SCHEMA = SUMMARY_SPEC.schema
NOTHING_TO_FOLLOW = "no op, runtime call or GPU work with a duration in the window"

WHAT_IF_EVENTS = 10
"""How many of the path's longest events the what-if tables try (one longest-path solve each)."""

TOP_SCHEMA = TOP_SPEC.schema


def _rank(traces: TraceSet, options: CriticalPathOptions) -> int | None:
    ranks = chosen_ranks(traces, options)
    if options.rank is not None:
        return options.rank if options.rank in traces.ranks else None
    return ranks[0] if ranks else None


Solved = tuple[RankGraph | None, NotedTable]
"""A path's graph (None when there is none) and its edges, or an empty table and why."""


def chosen_rank(traces: TraceSet, options: CriticalPathOptions) -> int | None:
    """The rank whose path the per-rank tables follow (None when `rank` is not in the job)."""
    return _rank(traces, options)


def rank_graph(traces: TraceSet, options: CriticalPathOptions) -> Solved:
    """The chosen rank's graph (None when it has no path) and its path's edges, or why not."""
    return _rank_solved(traces, options)


def rank_path(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The chosen rank's path (PATH_SCHEMA), or an empty one with why."""
    return _rank_solved(traces, options)[1]


def _rank_key(traces: TraceSet, options: CriticalPathOptions, rank: int | None) -> tuple[object, ...]:
    # The rank followed, not the option: no rank and the first rank named are one path.
    fields = selection_key(traces, options, "annotation", "instance", "data_loading")
    return ("critical_path.rank_path", *fields, ("rank", rank))


def _rank_solved(traces: TraceSet, options: CriticalPathOptions) -> Solved:
    key = _rank_key(traces, options, _rank(traces, options) if options.rank is None else options.rank)
    return memoised(traces, key, lambda: _solve_rank(traces, options))


def _solve_rank(traces: TraceSet, options: CriticalPathOptions) -> Solved:
    rank = _rank(traces, options)
    empty = pl.DataFrame(schema=PATH_SCHEMA)
    if rank is None:
        return None, NotedTable(empty, f"rank {options.rank} is not in the job")
    events = rank_rows(traces, options, rank)
    try:
        g = build_graph(events, options.annotation, options.instance or 0, options.data_loading, options.hta_compat)
        path = path_frame(g, options.hta_compat, options.data_loading, rules=options.scope.rules)
        return g, NotedTable(path, None if path.height else f"rank {rank}: {NOTHING_TO_FOLLOW}")
    except WindowError as err:
        return None, NotedTable(empty, f"rank {rank}: {err}")
    except CycleError:
        return None, NotedTable(
            empty, f"rank {rank}: the graph has a cycle (the trace's order of events is inconsistent)"
        )


def job_path(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The job's path: the scope's ranks joined at their collectives (PATH_SCHEMA; `rank` says where)."""
    return _job_solved(traces, options).table


def _job_solved(traces: TraceSet, options: CriticalPathOptions) -> JobSolution:
    key = ("critical_path.job_path", *selection_key(traces, options, "annotation", "instance", "data_loading"))
    return memoised(traces, key, lambda: _solve_job(traces, options))


def _part_builder(traces: TraceSet, options: CriticalPathOptions, problems: list[str] | None) -> Build:
    """A rank's part of the job, built (None when it has no window: why, into `problems`)."""
    # Over a dataset each rank is read, its graph built and the rank dropped again (`each_rank`'s rule).
    unread = {rank for rank in chosen_ranks(traces, options) if not traces.ranks[rank].loaded}

    def build(rank: int) -> JobPart | None:
        # A rank whose own path was solved already (the page's rank tables) lends its graph.
        solved: Solved | None = held(traces, _rank_key(traces, options, rank))
        if solved is not None and solved[0] is not None:
            return job_part(solved[0], options.hta_compat, options.scope.rules)
        events = rank_rows(traces, options, rank)
        try:
            g = build_graph(events, options.annotation, options.instance or 0, options.data_loading, options.hta_compat)
            # Only the rank's part is kept: its window's full frame and wide columns go with `g`.
            return job_part(g, options.hta_compat, options.scope.rules)
        except WindowError as err:
            if problems is not None:
                problems.append(f"rank {rank}: {err}")
            return None
        finally:
            del events
            if len(unread) >= 2 and rank in unread:
                traces.ranks[rank].unload()

    return build


def _solve_job(traces: TraceSet, options: CriticalPathOptions) -> JobSolution:
    problems: list[str] = []
    empty = pl.DataFrame(schema=PATH_SCHEMA)
    try:
        solved = solve_by_pieces(chosen_ranks(traces, options), _part_builder(traces, options, problems))
    except CycleError:
        return JobSolution(NotedTable(empty, "the job's graph has a cycle (ranks' clocks disagree)"))
    note = "; ".join(problems) or None
    if solved is None:
        return JobSolution(NotedTable(empty, note or "no ranks"))
    path = path_frame(solved.graph, options.hta_compat, options.data_loading, solved.path, rules=options.scope.rules)
    return JobSolution(NotedTable(path, note if path.height else note or NOTHING_TO_FOLLOW), solved)


def job(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """Which ranks and names bound the job's step: time on the job's path by rank and name (`--top`)."""
    if not options.hta_compat:
        return tables.job(traces, options)
    return hta_job(traces, options)


def hta_job(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """Time on the job's HTA path by rank and event."""
    found = job_path(traces, options)
    return NotedTable(by_event(found.frame), found.message)


def job_edges(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The job's path in order, across ranks: every instance."""
    if not options.hta_compat:
        return tables.job_path(traces, options)
    return job_path(traces, options)


def _what_if(solved: Solved, options: CriticalPathOptions, others_us: float = -np.inf) -> NotedTable:
    """`solved`: a path's graph (a piece of the job's: the other pieces' longest path `others_us`)."""
    g, found = solved
    if not 0 <= options.faster_pct <= 100:
        return NotedTable(pl.DataFrame(schema=WHAT_IF_SCHEMA), f"--faster-pct {options.faster_pct:g} is not in 0–100")
    if g is None or found.frame.height == 0:
        return NotedTable(pl.DataFrame(schema=WHAT_IF_SCHEMA), found.message)
    # Each event once, under its largest part (a kernel's span, not the gap after it).
    events = by_event(found.frame).unique(["rank", "index"], keep="first", maintain_order=True)
    return NotedTable(what_if(g, events, options.faster_pct, WHAT_IF_EVENTS, others_us), found.message)


def straggler_what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The job's step if each rank ran at the other ranks' median pace, phase by phase (compat: HTA's path)."""
    if not options.hta_compat:
        return tables.straggler_what_if(traces, options)
    return hta_straggler_what_if(traces, options)


def hta_straggler_what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """Per rank: its own HTA path, the median rank's, and the job's HTA path were it no slower than the median."""
    solved = _job_solved(traces, options)
    found = solved.table
    if solved.pieces is None or found.frame.height == 0:
        return NotedTable(pl.DataFrame(schema=RANK_WHAT_IF_SCHEMA), found.message)
    if len(solved.pieces.pieces) == 1:
        return NotedTable(rank_what_if(solved.pieces.graph), found.message)
    return NotedTable(rank_what_if_by_pieces(solved.pieces, _part_builder(traces, options, None)), found.message)


def path_what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The rank's step replayed with its longest names, annotations and bound types `faster_pct` % faster."""
    if not options.hta_compat:
        return tables.what_if(traces, options)
    return hta_path_what_if(traces, options)


def hta_path_what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The rank's HTA path length if each of its longest events took `faster_pct` % less (solved again)."""
    return _what_if(_rank_solved(traces, options), options)


def job_what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The job's step replayed with each change: names, annotations, bound types, each rank at the median's pace."""
    if not options.hta_compat:
        return tables.job_what_if(traces, options)
    return hta_job_what_if(traces, options)


def hta_job_what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The job's HTA path length if each of its longest events took `faster_pct` % less."""
    solved = _job_solved(traces, options)
    others = -np.inf if solved.pieces is None else solved.pieces.others_us()
    return _what_if((solved.graph, solved.table), options, others)


def rank_rows(traces: TraceSet, options: CriticalPathOptions, rank: int) -> pl.DataFrame:
    """The rows the window is cut from.

    Compat: the scope's rows, as HTA reads its trace (it drops the last step's rows at load, and
    rounds ns timestamps). Default: the scope's steps when no annotation is named, else the whole
    rank, so an annotation is found wherever it lies.
    """
    if options.hta_compat or options.annotation == "":
        return prepare(traces, options.with_ranks((rank,)), columns=COLUMNS).events
    trace = traces.ranks[rank]
    own = [c for c in COLUMNS if c in trace.events.columns]
    return with_details(trace.events.select(own), trace.details, COLUMNS).select(COLUMNS)


def compute(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The summary: time on the critical path by what bounds it."""
    if not options.hta_compat:
        return tables.summary(traces, options)
    found = rank_path(traces, options)
    return NotedTable(summarise(found.frame), found.message)


def edges(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The path's edges in order."""
    if not options.hta_compat:
        return tables.rank_path(traces, options)
    return rank_path(traces, options)


def by_event(path: pl.DataFrame) -> pl.DataFrame:
    """Each event's time on a path (TOP_SCHEMA), longest first."""
    total = path["duration_us"].sum()
    return (
        path.filter(pl.col("index").is_not_null())
        .group_by("rank", "index", "name", "bound_by")
        .agg(time_us=pl.col("duration_us").sum(), edges=pl.len())
        .with_columns(pct=pl.col("time_us") / total * 100 if total else pl.lit(0.0))
        .sort("time_us", "rank", "index", "bound_by", descending=[True, False, False, False])
        .select([pl.col(c).cast(t) for c, t in TOP_SCHEMA.items()])
    )


def top_events(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The events on the path by their time on it: what to make faster first."""
    if not options.hta_compat:
        found = tables.rank_path(traces, options)
        return NotedTable(tables.top_events(found.frame), found.message)
    found = rank_path(traces, options)
    return NotedTable(by_event(found.frame), found.message)
