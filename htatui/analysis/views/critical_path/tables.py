"""The critical-path view's tables in default mode, from the step model.

`summary`, `edges` and `top_events` follow one rank's path (waiting for the other ranks at
collectives); `job` and `job_edges` the job's path across ranks; the what-ifs replay the graph
with one group of edges faster (by name, annotation, bound type, and on the job each rank at the
median's pace). Each table's sentence is the path's coverage line.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.options import NotedTable
from htatui.analysis.core.prepare import chosen_ranks
from htatui.analysis.model.step.assemble import StepGraph
from htatui.analysis.model.step.graph import COLLECTIVE_WAIT
from htatui.analysis.views.critical_path.columns import STEP_WHAT_IF_SPEC
from htatui.analysis.views.critical_path.options import CriticalPathOptions
from htatui.analysis.views.critical_path.path import summarise
from htatui.analysis.views.critical_path.step_graphs import Built, job_graph, rank_graph
from htatui.analysis.views.critical_path.step_model import (
    PATH_SCHEMA,
    Change,
    Saving,
    path_frame,
    savings_of,
    summary_of,
)
from htatui.trace.kineto import PROFILER_STEP
from htatui.trace.model import TraceSet

JOB_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "name": pl.Utf8(),
    "bound_by": pl.Utf8(),
    "time_us": pl.Float64(),
    "pct": pl.Float64(),
    "instances": pl.Int64(),
    "index": pl.Int64(),
}
"""The job's path by rank and name: time on it, share of it, how many instances, and the first
instance's file index (what `t` opens)."""

WHAT_IF_SCHEMA = STEP_WHAT_IF_SPEC.schema
"""One what-if a row: the change (group, key, rank, factor; what it scaled), the measured step,
its replay, the replay with the change, and the step time it saves."""

ANNOTATIONS_TRIED = 5
"""How many of the step thread's longest annotations the what-ifs try."""


def _rank(traces: TraceSet, options: CriticalPathOptions) -> int | None:
    if options.rank is not None:
        return options.rank if options.rank in traces.ranks else None
    ranks = chosen_ranks(traces, options)
    return ranks[0] if ranks else None


def rank_built(traces: TraceSet, options: CriticalPathOptions) -> Built:
    """The chosen rank's graph (the scope's first rank when none is named)."""
    rank = _rank(traces, options)
    if rank is None:
        return Built(None, f"rank {options.rank} is not in the job")
    return rank_graph(traces, options, rank)


def _noted(built: Built, frame: pl.DataFrame, ranks: tuple[int, ...]) -> NotedTable:
    """`frame` with the coverage line (and what was clamped or left out) as its sentence."""
    if built.graph is None:
        return NotedTable(frame, built.message or "no step graph")
    notes = [summary_of(built, ranks).line()]
    notes += [f"{count} {what}" for what, count in built.graph.clamped.items()]
    if built.message:
        notes.append(built.message)
    return NotedTable(frame, "; ".join(notes))


def rank_path(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The chosen rank's path (PATH_SCHEMA) and its coverage line."""
    built = rank_built(traces, options)
    frame = path_frame(built.graph) if built.graph is not None else pl.DataFrame(schema=PATH_SCHEMA)
    return _noted(built, frame, tuple(r for r in (_rank(traces, options),) if r is not None))


def job_path(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The job's path across the chosen ranks (PATH_SCHEMA) and its coverage line."""
    built = job_graph(traces, options)
    frame = path_frame(built.graph) if built.graph is not None else pl.DataFrame(schema=PATH_SCHEMA)
    return _noted(built, frame, tuple(chosen_ranks(traces, options)))


def summary(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """Time on the rank's path by what bounds it."""
    found = rank_path(traces, options)
    return NotedTable(summarise(found.frame), found.message)


def by_name(path: pl.DataFrame, top: int | None) -> pl.DataFrame:
    """The path's time by rank, name and bound type (JOB_SCHEMA), longest first, the first `top`."""
    total = path["duration_us"].sum()
    grouped = (
        path.filter(pl.col("duration_us") > 0)
        .group_by("rank", "name", "bound_by")
        .agg(
            time_us=pl.col("duration_us").sum(),
            instances=pl.col("index").n_unique(),
            index=pl.col("index").first(),
        )
        .with_columns(pct=pl.col("time_us") / total * 100 if total else pl.lit(0.0))
        .sort("time_us", "rank", "name", descending=[True, False, False], nulls_last=True)
        .select([pl.col(c).cast(t) for c, t in JOB_SCHEMA.items()])
    )
    return grouped if top is None else grouped.head(top)


def job(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """Which ranks and names bound the job's step: time on the job's path by rank and name (`--top`)."""
    found = job_path(traces, options)
    return NotedTable(by_name(found.frame, options.top_k), found.message)


def candidate_changes(g: StepGraph, path: pl.DataFrame, options: CriticalPathOptions, job: bool) -> list[Change]:
    """The what-ifs tried on a path: its longest names (on their rank), the step thread's longest
    annotations, each bound type on it, and on a job each rank at the median's pace."""
    factor = 1.0 - options.faster_pct / 100.0
    tried: list[Change] = []
    top = by_name(path.filter(pl.col("name").is_not_null()), None)
    seen: set[tuple[int, str]] = set()
    for rank, name in top.select("rank", "name").iter_rows():
        if (rank, name) in seen or len(seen) >= (options.top_k or len(top)):
            continue
        seen.add((rank, name))
        tried.append(Change("name", name, factor, rank=rank))
    for rank, name in _annotations(g):
        tried.append(Change("annotation", name, factor, rank=rank))
    for bound in summarise(path)["bound_by"].to_list():
        if bound != COLLECTIVE_WAIT:
            tried.append(Change("bound_by", bound, factor))
    if job:
        ranks = sorted(set(g.rows["rank"].unique().to_list()))
        tried += [Change("rank", str(rank), to_median=True) for rank in ranks] if len(ranks) > 1 else []
    return tried


def _annotations(g: StepGraph) -> list[tuple[int, str]]:
    """Per rank, the longest annotations on its step's thread (ProfilerStep's own aside)."""
    rows = g.rows
    steps = rows.filter(pl.col("name").str.contains(PROFILER_STEP.pattern) & (pl.col("cat") == "user_annotation"))
    ranges = rows.filter(
        (pl.col("cat") == "user_annotation") & ~pl.col("name").str.contains(PROFILER_STEP.pattern)
    ).join(steps.select("rank", "lane").unique(), on=["rank", "lane"], how="semi")
    longest = (
        ranges.group_by("rank", "name")
        .agg(total=(pl.col("end") - pl.col("ts")).sum())
        .sort("total", "rank", "name", descending=[True, False, False])
    )
    return [(int(r), str(n)) for r, n in longest.select("rank", "name").head(ANNOTATIONS_TRIED).iter_rows()]


def savings_table(found: list[Saving]) -> pl.DataFrame:
    """WHAT_IF_SCHEMA rows: first the ranks at the others' median pace that save time (what the
    other ranks show can be done), then every change by the time it saves."""
    rows = [
        {
            "group": s.change.group,
            "key": s.change.key,
            "rank": s.change.rank if s.change.group != "rank" else int(s.change.key),
            "factor": None if s.change.to_median else s.change.factor,
            "detail": s.detail,
            "step_us": s.step_us,
            "replay_us": s.replay_us,
            "replay_if_us": s.replay_if_us,
            "saved_us": s.saved_us,
            "saved_pct": s.saved_pct,
        }
        for s in found
    ]
    frame = pl.DataFrame(rows, schema=WHAT_IF_SCHEMA)
    paced = (pl.col("group") == "rank") & pl.col("factor").is_null() & (pl.col("saved_us") > 0)
    return (
        frame.with_columns(_paced=paced)
        .sort("_paced", "saved_us", "group", "key", descending=[True, True, False, False])
        .drop("_paced")
    )


def _what_if(
    built: Built, traces: TraceSet, options: CriticalPathOptions, job: bool, ranks: tuple[int, ...]
) -> NotedTable:
    g = built.graph
    if g is None:
        return NotedTable(pl.DataFrame(schema=WHAT_IF_SCHEMA), built.message or "no step graph")
    if not 0 <= options.faster_pct <= 100:
        return NotedTable(pl.DataFrame(schema=WHAT_IF_SCHEMA), f"--faster-pct {options.faster_pct:g} is not in 0–100")
    path = path_frame(g)
    tried = candidate_changes(g, path, options, job)
    table = savings_table(savings_of(g, traces, options, tried))
    return _noted(built, table.head(options.top_k) if options.top_k else table, ranks)


def what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The rank's step replayed with its longest names, annotations and bound types faster (`--faster-pct`)."""
    rank = _rank(traces, options)
    return _what_if(rank_built(traces, options), traces, options, False, (rank,) if rank is not None else ())


def job_what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The job's step replayed with each change: names, annotations, bound types, each rank at the median's pace."""
    return _what_if(job_graph(traces, options), traces, options, True, tuple(chosen_ranks(traces, options)))


def straggler_what_if(traces: TraceSet, options: CriticalPathOptions) -> NotedTable:
    """The job's step replayed with each rank at the other ranks' median pace, phase by phase."""
    built = job_graph(traces, options)
    g = built.graph
    if g is None:
        return NotedTable(pl.DataFrame(schema=WHAT_IF_SCHEMA), built.message or "no step graph")
    ranks = sorted(set(g.rows["rank"].unique().to_list()))
    if len(ranks) < 2:
        return NotedTable(pl.DataFrame(schema=WHAT_IF_SCHEMA), "the straggler what-if needs two or more ranks")
    tried = [Change("rank", str(rank), to_median=True) for rank in ranks]
    return _noted(built, savings_table(savings_of(g, traces, options, tried)), tuple(ranks))


def top_events(path: pl.DataFrame) -> pl.DataFrame:
    """Each event's time on a path, longest first (rank, index, name, bound_by, time_us, pct, edges)."""
    total = path["duration_us"].sum()
    return (
        path.filter(pl.col("index").is_not_null() & (pl.col("duration_us") > 0))
        .group_by("rank", "index", "name", "bound_by")
        .agg(time_us=pl.col("duration_us").sum(), edges=pl.len())
        .with_columns(pct=pl.col("time_us") / total * 100 if total else pl.lit(0.0))
        .sort("time_us", "rank", "index", "bound_by", descending=[True, False, False, False])
        .select(
            pl.col("rank").cast(pl.Int32),
            pl.col("index").cast(pl.Int64),
            pl.col("name").cast(pl.Utf8),
            pl.col("bound_by").cast(pl.Utf8),
            pl.col("time_us").cast(pl.Float64),
            pl.col("pct").cast(pl.Float64),
            pl.col("edges").cast(pl.Int64),
        )
    )
