"""The per-rank summary row written at ingest: a rank's size, span, steps and GPU time figures.

Computed from the one rank alone (temporal, idle and overlap figures do not depend on the other
ranks nor on the shift that aligns ranks), with the views' default options, so a browser of a
thousand-rank dataset can show the job at a glance without reading any rank's events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from htatui.analysis import overlap, steps, temporal
from htatui.trace.model import RANK_FROM_TRACE, RankTrace, TraceMeta, TraceSet

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "file": pl.Utf8(),
    "events": pl.Int64(),
    "kernels": pl.Int64(),
    "span_us": pl.Float64(),
    "steps": pl.Int64(),
    "step_mean_us": pl.Float64(),
    "step_max_us": pl.Float64(),
    "gpu_span_us": pl.Float64(),
    "idle_us": pl.Float64(),
    "compute_us": pl.Float64(),
    "non_compute_us": pl.Float64(),
    "idle_pct": pl.Float64(),
    "compute_pct": pl.Float64(),
    "non_compute_pct": pl.Float64(),
    "overlap_pct": pl.Float64(),
}
"""`rank` is filled in once every file's rank is known; `span_us` covers all timed events."""


def rank_summary(source: Path, events: pl.DataFrame, meta: TraceMeta) -> dict[str, Any]:
    """One summary row for a parsed trace file (rank still unset)."""
    alone = TraceSet(ranks={0: RankTrace(rank=0, path=source, rank_source=RANK_FROM_TRACE, events=events, meta=meta)})
    timed = events.filter(pl.col("ph") == "X")
    row: dict[str, Any] = dict.fromkeys(SUMMARY_SCHEMA)
    row.update(
        file=source.name,
        events=events.height,
        kernels=int(events.filter(pl.col("cat") == "kernel").height),
        span_us=_number(timed["end"].max()) - _number(timed["ts"].min()) if timed.height else 0.0,
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


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0
