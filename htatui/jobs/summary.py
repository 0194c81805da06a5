"""The per-rank summary row written at ingest: a rank's size, span, steps and GPU time figures.

Computed from each rank's events exactly as loading the dataset aligns them (its rank number and
time shift), with the views' default options, by the views' own functions on that one rank, so
a browser of a thousand-rank dataset shows the job at once without reading any rank's events,
and the numbers are those the views would compute. A row holds only while the ranks are aligned
as at ingest: `summary_for` checks the shifts and gives nothing when the dataset is opened with
other traces (which move the job's time origin).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from htatui.analysis.core.kept import made_with
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare
from htatui.analysis.core.rank_figures import RankFigures, figures_of, rank_figures
from htatui.analysis.views import overlap, steps, temporal
from htatui.analysis.views.ranks import tables
from htatui.store.summary_table import ENTRY_SUMMARY, ENTRY_SUMMARY_SCHEMA, SUMMARY_SCHEMA
from htatui.trace.discover import rank_from_filename
from htatui.trace.loader import ParsedFile, aligned_events, shifts_us
from htatui.trace.model import EVENT_SCHEMA, RANK_FROM_TRACE, RankTrace, TraceMeta, TraceSet

SUMMARY_COLUMNS = (
    *("index", "ph", "cat", "name", "pid", "tid", "ts", "dur", "end"),
    *("stream", "device", "correlation", "external_id", "flow_id", "iteration", "collective_name"),
)
"""The event columns the summary's views read; ingest reads only these back (16 of 21)."""


TABLE_COLUMNS = tuple(
    dict.fromkeys((*SUMMARY_COLUMNS, *(c for c in tables.READS if c != "rank" and c in EVENT_SCHEMA)))
)
"""What ingest reads back of a rank's events for its summary row and its cross-rank tables (16 of
21 columns; the tables' detail columns come from the rank's detail table)."""


def rank_summary(source: Path, events: pl.DataFrame, meta: TraceMeta, rank: int, shift_us: float) -> dict[str, Any]:
    """One summary row for a parsed trace file, given its events as rank `rank` shifted by `shift_us`."""
    trace = RankTrace(rank, source, RANK_FROM_TRACE, events, meta, shift_us)
    return _summary_row(TraceSet(ranks={rank: trace}), source, events, rank, shift_us)


def rank_summary_and_tables(
    source: Path, events: pl.DataFrame, details: pl.DataFrame, meta: TraceMeta, rank: int, shift_us: float
) -> tuple[dict[str, Any], tables.RankTables]:
    """The rank's summary row and its cross-rank tables (`analysis.views.ranks.tables`), made with
    the default options from its events as rank `rank` shifted by `shift_us` (what the Ranks
    views read of a dataset instead of its events); `details` is its detail table as rank `rank`."""
    trace = RankTrace(rank, source, RANK_FROM_TRACE, events, meta, shift_us, details=details)
    alone = TraceSet(ranks={rank: trace})
    return _summary_row(alone, source, events, rank, shift_us), tables.rank_tables(alone, CommonOptions())


def entry_summary(parsed: ParsedFile, start_ns: int) -> dict[str, pl.DataFrame]:
    """The rank's summary row for its parse-cache entry (`trace.loader.EntryTables`), made by the
    parse worker while it holds the events: as the rank it claims (or its file name says) on its
    own time base (a folder of that file alone), with the least and greatest time of its events
    before that shift. A folder loaded from the cache serves it where it holds
    (`store.summary_table.entry_summary_for`); nothing for a file with no rank of its own, nor for
    a download (a remote file's ranks are not opened from their entries)."""
    rank = parsed.meta.claimed_rank
    rank = rank if rank is not None else rank_from_filename(parsed.path)
    if rank is None or not isinstance(parsed.path, Path):
        return {}
    shift = shifts_us({rank: start_ns}, {rank: parsed.meta.base_time_ns})[rank]
    events = aligned_events(parsed.events, rank, shift)
    trace = RankTrace(rank, parsed.path, RANK_FROM_TRACE, events, parsed.meta, shift)
    # The parse made the file's figures already: shifted as the aligned frame is (`figures_of`).
    made = figures_of(parsed.figures.row(0, named=True), shift) if parsed.figures is not None else None
    row = _summary_row(TraceSet(ranks={rank: trace}), parsed.path, events, rank, shift, made)
    first, last = parsed.events.select(
        first=pl.min_horizontal(pl.col("ts").min(), pl.col("end").min()),
        last=pl.max_horizontal(pl.col("ts").max(), pl.col("end").max()),
    ).row(0)
    row.update(own_first_us=first, own_last_us=last)
    return {ENTRY_SUMMARY: pl.DataFrame([row], schema=ENTRY_SUMMARY_SCHEMA)}


def _summary_row(
    alone: TraceSet, source: Path, events: pl.DataFrame, rank: int, shift_us: float, figures: RankFigures | None = None
) -> dict[str, Any]:
    figures = figures if figures is not None else rank_figures(events)
    row: dict[str, Any] = dict.fromkeys(SUMMARY_SCHEMA)
    row.update(
        rank=rank,
        shift_us=shift_us,
        made_with=made_with(),
        memory_events=figures.memory_events,
        streams=figures.streams,
        iterations=figures.iterations,
        step_source=figures.step_source,
        steps_used=prepare(alone, CommonOptions(), columns=("rank",)).steps_used[rank],
        file=source.name,
        events=events.height,
        kernels=figures.kernels,
        span_us=figures.span_us,
    )
    step_rows = steps.compute(alone, steps.StepsOptions()).filter(pl.col("used"))
    row.update(
        steps=step_rows.height,
        step_mean_us=step_rows["dur_us"].mean() if step_rows.height else None,
        step_max_us=step_rows["dur_us"].max() if step_rows.height else None,
    )
    breakdown = temporal.compute(alone, temporal.TemporalOptions())
    if breakdown.height:
        first = breakdown.row(0, named=True)
        row.update({key: first[key] for key in ("idle_us", "compute_us", "non_compute_us", "idle_pct", "compute_pct")})
        row.update(non_compute_pct=first["non_compute_pct"], gpu_span_us=first["span_us"])
    shared = overlap.compute(alone, overlap.OverlapOptions())
    if shared.height:
        row["overlap_pct"] = shared["overlap_pct"][0]
    return row


def summary_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    return pl.DataFrame(rows, schema=SUMMARY_SCHEMA).sort("rank")
