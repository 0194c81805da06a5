"""The per-rank summary table's columns, and whether a dataset's table holds for a job as loaded.

Kept apart from `summary.py` (which computes the rows with the views' functions) so the trace
loader can attach a dataset's summary without importing the analysis layer.
"""

from __future__ import annotations

import polars as pl

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
    "steps_used": pl.List(pl.Int64()),
    "memory_events": pl.Int64(),
    "shift_us": pl.Float64(),
    "made_with": pl.Utf8(),
    "streams": pl.Int64(),
    "iterations": pl.List(pl.Int64()),
    "step_source": pl.Utf8(),
}
"""`span_us` covers all timed events; `steps_used` are the steps the default views keep;
`memory_events` counts `[memory]` rows; `streams` and `iterations` are what `info` lists;
`shift_us` is the alignment and `made_with` the digest of the rules and code the figures were
made with (`analysis.core.kept.made_with`); `step_source` where the steps come from
(`step_sources.StepSource.label`)."""


def summary_for(summary: pl.DataFrame, shifts: dict[int, float], made_with: str) -> pl.DataFrame | None:
    """The dataset's summary (read and verified by `Dataset.summary`) when its rows hold for ranks
    aligned with `shifts` and were made with `made_with` (the rules and code of now), else None:
    the figures are then made from the events."""
    if summary.schema != pl.Schema(SUMMARY_SCHEMA):
        return None
    if summary.height and set(summary["made_with"].to_list()) != {made_with}:
        return None
    if dict(zip(summary["rank"].to_list(), summary["shift_us"].to_list(), strict=True)) != shifts:
        return None
    return summary
