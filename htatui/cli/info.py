"""The `info` table: what each rank's trace holds, one row per rank."""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.rank_figures import rank_figures
from htatui.trace import TraceSet

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
    "warnings",
)


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
        events = rank_trace.events
        figures = rank_figures(events)
        rows.append(
            {
                "rank": rank,
                "file": rank_trace.path.name,
                "rank_source": rank_trace.rank_source,
                "device": rank_trace.meta.device_name,
                "events": events.height,
                "kernels": figures.kernels,
                "streams": figures.streams,
                "span_ms": figures.span_us / 1000.0,
                "steps": format_ranges(figures.iterations, empty=""),
                "warnings": "; ".join(rank_trace.warnings),
            }
        )
    return pl.DataFrame(rows, schema=INFO_SCHEMA)


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
            "warnings": "; ".join(rank_trace.warnings),
        }
    return rows


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
    "warnings": pl.Utf8,
}
