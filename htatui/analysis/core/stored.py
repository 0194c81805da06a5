"""Answers read from a job's summary rows (`TraceSet.summary`) instead of the ranks' events.

An ingest stores, per rank, the figures the temporal and overlap views and the step filter give
with their default options (`htatui.jobs.summary`: the shipped rules), with the digest of the code
that made them, and so does a trace folder's parse worker in each rank's cache entry: the job's
summary holds only rows made with the code of now (`store.summary_table.summary_for`,
`entry_summary_for`). When a view is asked for exactly those options, its rows are
the stored ones: a job of a thousand ranks answers without reading a rank. Any other option
computes from events.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from htatui.analysis.core.kept import made_with
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import with_job_steps
from htatui.analysis.core.scope import Scope
from htatui.trace.model import TraceSet


def summary_rows(traces: TraceSet, options: CommonOptions) -> pl.DataFrame | None:
    """The chosen ranks' stored rows (ranks with GPU activity) if `options` are the defaults, else None."""
    summary = traces.summary
    if summary is not None:
        options = with_job_steps(traces, options)
    if (
        summary is None
        or dataclasses.replace(options, scope=Scope()) != type(options)()
        or not options.scope.is_default
        or (summary.height and summary["made_with"][0] != made_with())  # the code changed since load
    ):
        return None
    rows = summary.filter(pl.col("gpu_span_us").is_not_null())
    if options.ranks is not None:
        rows = rows.filter(pl.col("rank").is_in(list(options.ranks)))
    return rows.sort("rank")


def stored_memory_events(traces: TraceSet) -> int | None:
    """How many `[memory]` rows the job's ranks hold, if stored."""
    return None if traces.summary is None else int(traces.summary["memory_events"].sum())
