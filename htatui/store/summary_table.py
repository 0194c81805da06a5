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


ENTRY_SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    **SUMMARY_SCHEMA,
    "own_first_us": pl.Float64(),
    "own_last_us": pl.Float64(),
}
"""A trace file's summary row as its parse-cache entry keeps it (`htatui.jobs.summary.entry_summary`):
the dataset's columns, made with the rank number and shift the worker gave it, plus the least and
greatest time (`ts`, `end`) of its events on the file's own time base."""

ENTRY_SUMMARY = "summary"
"""The name of that row among the entry's untagged tables (`trace.cache.store`'s `tables`)."""


def translates_exactly(own_first_us: float, own_last_us: float, shift_us: float) -> bool:
    """Whether adding `shift_us` to every time in [own_first_us, own_last_us] is exact in floating
    point: no shift, or a shift against times within a factor of two of it (Sterbenz's lemma:
    x − y is exact when y/2 ≤ x ≤ 2y), as a job's shift is against a file's epoch or monotonic-clock
    times. Times moved exactly keep every difference and every order, so the figures made of
    them (spans, busy times, their shares, the steps) are the same to the bit under either shift."""
    if shift_us == 0.0:
        return True
    back = -shift_us
    return back > 0.0 and back / 2.0 <= own_first_us and own_last_us <= 2.0 * back


def entry_summary_for(row: pl.DataFrame | None, rank: int, shift_us: float, made_with: str) -> dict[str, object] | None:
    """A cache entry's summary row (`ENTRY_SUMMARY_SCHEMA`) as the `SUMMARY_SCHEMA` row of rank
    `rank` shifted by `shift_us`, when it holds there: made by the code of now (`made_with`), for
    this rank number, and under this shift or one that moves the rank's times exactly as this one
    does (both `translates_exactly`). Else None: the figures are made from the events."""
    if row is None or row.height != 1 or row.schema != pl.Schema(ENTRY_SUMMARY_SCHEMA):
        return None
    values = row.row(0, named=True)
    first, last, stored_shift = values.pop("own_first_us"), values.pop("own_last_us"), values["shift_us"]
    if values["made_with"] != made_with or values["rank"] != rank or first is None or last is None:
        return None
    if stored_shift != shift_us and not (
        translates_exactly(first, last, stored_shift) and translates_exactly(first, last, shift_us)
    ):
        return None
    return values | {"shift_us": shift_us}
