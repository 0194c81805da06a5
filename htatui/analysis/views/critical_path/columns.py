"""The critical-path tables' columns (one declaration each; `core/columns.py` says what a spec serves)."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from htatui.analysis.core.columns import RANK, STEP, ColumnSpec, TableColumns

BOUND_BY = ColumnSpec(
    "bound_by",
    pl.Utf8(),
    "what bounds the time: cpu_bound, gpu_compute_bound, gpu_communication_bound, a launch or kernel overhead …",
)
NAME = ColumnSpec("name", pl.Utf8(), "the event charged (an op, runtime call or GPU work)", "id")
INDEX = ColumnSpec("index", pl.Int64(), "the event's position in its trace file", "low")
SHARE = ColumnSpec("pct", pl.Float64(), "time_us as a share of the path's length", "key", unit="%")

SUMMARY_SPEC = TableColumns(
    ColumnSpec("bound_by", pl.Utf8(), BOUND_BY.meaning, "id"),
    ColumnSpec("time_us", pl.Float64(), "time on the path bound by it", "key"),
    SHARE,
)

PATH_SPEC = TableColumns(
    RANK,
    STEP,
    ColumnSpec("name", pl.Utf8(), "the event charged (null for dependency and sync edges)", "id"),
    ColumnSpec(
        "edge_type",
        pl.Utf8(),
        "the edge's kind: critical_path_ + operator, dependency, kernel_launch_delay, kernel_kernel_delay …",
        "key",
    ),
    ColumnSpec("start_us", pl.Float64(), "the edge's start"),
    ColumnSpec("end_us", pl.Float64(), "the edge's end", "low"),
    ColumnSpec("duration_us", pl.Float64(), "the edge's weight: time on the path", "key"),
    ColumnSpec("bound_by", pl.Utf8(), BOUND_BY.meaning, "key"),
    INDEX,
)
"""One row per path edge, in path order: the event charged (`index` in the file; null for
dependency and sync edges), the edge's kind, its span and weight, and what bounds it."""

TOP_SPEC = TableColumns(
    RANK,
    INDEX,
    NAME,
    replace(BOUND_BY, importance="key"),
    ColumnSpec("time_us", pl.Float64(), "Σ of the event's edges on the path", "key"),
    SHARE,
    ColumnSpec("edges", pl.Int64(), "edges charged to the event", "low"),
)

JOB_SPEC = TableColumns(
    RANK,
    INDEX,
    NAME,
    replace(BOUND_BY, importance="key"),
    ColumnSpec("time_us", pl.Float64(), "Σ of the path's time charged to the name on the rank", "key"),
    SHARE,
    ColumnSpec("instances", pl.Int64(), "the name's events on the path (the step model groups them)"),
    ColumnSpec("edges", pl.Int64(), "--hta-compat: edges charged to the event", "low"),
)
"""The job's path by rank and name (step model; `index` is the first instance's), or by event
(--hta-compat, as `top-events`)."""

HTA_WHAT_IF_SPEC = TableColumns(
    RANK,
    NAME,
    BOUND_BY,
    ColumnSpec("time_us", pl.Float64(), "the event's time on the path"),
    ColumnSpec("path_us", pl.Float64(), "the path's length as measured", "low"),
    ColumnSpec("path_if_faster_us", pl.Float64(), "the path solved again with the event --faster-pct % faster", "key"),
    ColumnSpec("saved_us", pl.Float64(), "path_us minus path_if_faster_us", "key"),
    ColumnSpec("saved_pct", pl.Float64(), "saved_us as a share of path_us", "key"),
)
"""--hta-compat: one row per event tried: its time on the path, the path's length now and with the event faster."""

HTA_RANK_WHAT_IF_SPEC = TableColumns(
    RANK,
    ColumnSpec("own_path_us", pl.Float64(), "the rank's own path (its edges alone; collectives weigh their transfer)"),
    ColumnSpec("median_own_path_us", pl.Float64(), "the median rank's own path", "low"),
    ColumnSpec("job_path_us", pl.Float64(), "the job's path as measured", "low"),
    ColumnSpec(
        "job_path_if_median_us", pl.Float64(), "the job's path with this rank's work at the median's pace", "key"
    ),
    ColumnSpec("saved_us", pl.Float64(), "job_path_us minus job_path_if_median_us", "key"),
    ColumnSpec("saved_pct", pl.Float64(), "saved_us as a share of job_path_us", "key"),
)
"""--hta-compat: one row per rank: its own path (its edges alone, collectives weighing their
transfer), the median of those, and the job's path with that rank's own work scaled to the median's length."""

_STEP_MODEL_WHAT_IF = (
    ColumnSpec("group", pl.Utf8(), "what the change scales: rank, op, kernel, annotation, bound type …", "id"),
    ColumnSpec("key", pl.Utf8(), "which one (a rank, a name, a bound type)", "id"),
    RANK,
    ColumnSpec("factor", pl.Float64(), "the time scale tried (0.5: twice as fast; empty: to the median rank's pace)"),
    ColumnSpec("detail", pl.Utf8(), "what the change scaled, in words", "low", sentence=True),
    ColumnSpec("step_us", pl.Float64(), "the step as measured", "low"),
    ColumnSpec("replay_us", pl.Float64(), "the step model's replay of the step", "low"),
    ColumnSpec("replay_if_us", pl.Float64(), "the replay with the change", "key"),
    ColumnSpec(
        "saved_us", pl.Float64(), "replay_us minus replay_if_us (--hta-compat: path_us minus the path if faster)", "key"
    ),
    ColumnSpec("saved_pct", pl.Float64(), "saved_us as a share of the step (--hta-compat: of the path)", "key"),
)

STEP_WHAT_IF_SPEC = TableColumns(*_STEP_MODEL_WHAT_IF)
"""The step model's what-if rows alone (`tables.savings_table`)."""

WHAT_IF_SPEC = TableColumns(
    *_STEP_MODEL_WHAT_IF,
    NAME,
    BOUND_BY,
    ColumnSpec("time_us", pl.Float64(), "--hta-compat: the event's time on the path"),
    ColumnSpec("path_us", pl.Float64(), "--hta-compat: the path's length as measured", "low"),
    ColumnSpec(
        "path_if_faster_us", pl.Float64(), "--hta-compat: the path solved again with the event --faster-pct % faster"
    ),
)
"""One what-if a row: the change, the step, its replay and the replay with the change (the step
model); --hta-compat: one event tried, the path's length now and with the event faster."""

RANK_WHAT_IF_SPEC = TableColumns(
    *_STEP_MODEL_WHAT_IF,
    ColumnSpec("own_path_us", pl.Float64(), "the rank's own path (its edges alone; collectives weigh their transfer)"),
    ColumnSpec("median_own_path_us", pl.Float64(), "the median rank's own path", "low"),
    ColumnSpec("job_path_us", pl.Float64(), "the job's path as measured", "low"),
    ColumnSpec(
        "job_path_if_median_us", pl.Float64(), "the job's path with this rank's work at the median's pace", "key"
    ),
)
"""The step model: each rank at the others' median pace (what-if rows); --hta-compat: one row per
rank, its own path, the median of those and the job's path with its work at the median's length."""
