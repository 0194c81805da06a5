"""The `info` table: what each rank's trace holds, one row per rank."""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.rank_figures import trace_figures
from htatui.trace import TraceSet
from htatui.trace.step_sources import PROFILER_STEPS
from htatui.trace.timings import PHASES, recorded

INFO_COLUMNS = (
    "rank",
    "file",
    "rank_source",
    "device",
    "events",
    "kernels",
    "streams",
    "span_ms",
    "steps",
    "steps_from",
    "warnings",
)
"""`steps_from` only where a rank's steps come from elsewhere than ProfilerStep."""


def load_notes(traces: TraceSet) -> list[str]:
    """What loading left aside, one line each: the files skipped and why, then the loader's notes
    (printed under a table so the sign outlasts the stderr lines)."""
    return [f"skipped {problem}" for problem in traces.problems] + [f"note: {note}" for note in traces.notes]


def info_frame(traces: TraceSet) -> pl.DataFrame:
    stored = _stored_rows(traces)
    rows = []
    for rank in traces.rank_ids:
        rank_trace = traces.ranks[rank]
        if rank in stored:
            rows.append(stored[rank])
            continue
        was_read = rank_trace.loaded
        figures = trace_figures(rank_trace)  # kept in a cached rank's entry: its events stay unread
        if not was_read and rank_trace.loaded:
            rank_trace.unload()  # a rank held unread (a folder, a dataset) is read and dropped again: one at a time
        rows.append(
            {
                "rank": rank,
                "file": rank_trace.path.name,
                "rank_source": rank_trace.rank_source,
                "device": rank_trace.meta.device_name,
                "events": figures.events,
                "kernels": figures.kernels,
                "streams": figures.streams,
                "span_ms": figures.span_us / 1000.0,
                "steps": format_ranges(figures.iterations, empty=""),
                "steps_from": _steps_from(figures.step_source),
                "warnings": "; ".join(rank_trace.warnings),
            }
        )
    frame = pl.DataFrame(rows, schema=INFO_SCHEMA)
    # Steps from ProfilerStep (or none) on every rank: no column to say so.
    return frame if (frame["steps_from"] != "").any() else frame.drop("steps_from")


def _stored_rows(traces: TraceSet) -> dict[int, dict[str, object]]:
    """Info rows from a dataset's summary (no rank read), keyed by rank; empty without one."""
    if traces.summary is None:
        return {}
    rows = {}
    for row in traces.summary.iter_rows(named=True):
        rank_trace = traces.ranks[row["rank"]]
        rows[row["rank"]] = {
            "rank": row["rank"],
            "file": rank_trace.path.name,
            "rank_source": rank_trace.rank_source,
            "device": rank_trace.meta.device_name,
            "events": row["events"],
            "kernels": row["kernels"],
            "streams": row["streams"],
            "span_ms": row["span_us"] / 1000.0,
            "steps": format_ranges(row["iterations"], empty=""),
            "steps_from": _steps_from(row["step_source"]),
            "warnings": "; ".join(rank_trace.warnings),
        }
    return rows


def _steps_from(label: str | None) -> str:
    """Where a rank's steps come from, when not from ProfilerStep ("" for ProfilerStep or none)."""
    return "" if label in (None, PROFILER_STEPS.label) else str(label)


INFO_SCHEMA = {
    "rank": pl.Int64,
    "file": pl.Utf8,
    "rank_source": pl.Utf8,
    "device": pl.Utf8,
    "events": pl.Int64,
    "kernels": pl.Int64,
    "streams": pl.Int64,
    "span_ms": pl.Float64,
    "steps": pl.Utf8,
    "steps_from": pl.Utf8,
    "warnings": pl.Utf8,
}


TIMINGS_SCHEMA = {
    "rank": pl.Int64,
    "file": pl.Utf8,
    **{f"{phase.replace(' ', '_')}_s": pl.Float64 for phase in PHASES},
    "wall_s": pl.Float64,
}
"""`info --timings`: per file, the seconds of each load phase (summed over the processes and threads that
ran it) and the wall seconds of the file's whole parse; null for a rank read from the cache or a dataset."""

TIMINGS_TITLE = "seconds per load phase (workers overlap, so phases can add up past the wall; empty: cached)"


def timings_frame(traces: TraceSet) -> pl.DataFrame:
    """Each rank's load, phase by phase, as this process parsed it (trace/timings.py)."""
    rows = []
    for rank in traces.rank_ids:
        rank_trace = traces.ranks[rank]
        timings = recorded(str(rank_trace.path))
        row: dict[str, object] = {"rank": rank, "file": rank_trace.path.name}
        if timings is not None:
            row |= {f"{phase.replace(' ', '_')}_s": timings.seconds.get(phase, 0.0) for phase in PHASES}
            row["wall_s"] = timings.wall_s
        rows.append(row)
    return pl.DataFrame(rows, schema=TIMINGS_SCHEMA)


SHARED_COLUMNS = ("device", "rank_source", "steps_from")
"""Columns that often hold one value for the whole job: said once above a table, not per row."""


def folded_for_table(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[str], list[str]]:
    """`frame` as a table shows it: a column with one value on every rank is said once in the
    title, and each rank's warnings become a line under the table, so an 80-column table keeps
    the file names, figures and steps (CSV and JSON keep every column)."""
    said: list[str] = []
    for column in SHARED_COLUMNS:
        if column not in frame.columns:
            continue
        values = frame[column].unique()
        if frame.height > 0 and values.len() == 1 and values[0]:
            said.append(f"{column.replace('_', ' ')}: {values[0]}")
            frame = frame.drop(column)
    lines = [
        f"rank {rank}: {warning}"
        for rank, warnings in frame.select("rank", "warnings").iter_rows()
        for warning in (warnings or "").split("; ")
        if warning
    ]
    return frame.drop("warnings"), said, lines
