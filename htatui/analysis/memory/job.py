"""A loaded job's GPU memory: the `[memory]` events of its chosen ranks in the scope's steps.

The event frame holds each `[memory]` row (its time on the job's time base, its step); what it
does not keep (device, address, bytes, the allocator's totals) is read again from the rank's file
by position (`trace.memory_events.read_memory_args`, through the one re-reader, so a remote job
reads as any other). The scope is the one every view obeys: the ranks, the steps' rows
(`core.scope.host_rows_mask`: HTA's cut-off in compat mode), and the step and annotation spans
of those steps. Several ranks make one recording whose devices are named `rank R cuda:N`.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import chosen_ranks, rank_steps_of
from htatui.analysis.core.scope import host_rows_mask
from htatui.analysis.memory.usage import MemoryAnalysis, analyse
from htatui.trace.kineto import MEMORY_EVENT
from htatui.trace.memory_events import Span, read_memory_args, recording_from_events, span_kind
from htatui.trace.memory_recording import MemoryRecording, ranks_together
from htatui.trace.model import TraceSet

NO_MEMORY_EVENTS = (
    "no [memory] events in the chosen steps: record with torch.profiler.profile(profile_memory=True), "
    "or open a CUDA memory snapshot (htatui memory snapshot.pickle)"
)

_READS = ("index", "ph", "cat", "name", "tid", "ts", "end", "iteration", "stream", "correlation")
"""The frame's columns the memory rows and their spans are found by (and the compat cut-off reads)."""


def has_memory_events(traces: TraceSet) -> bool:
    """Whether any rank's trace holds `[memory]` events (a dataset's summary says, without reading)."""
    if traces.summary is not None:
        return int(traces.summary["memory_events"].sum()) > 0
    return memoised(traces, ("memory.present",), lambda: any(_has_rows(r.events) for r in traces.ranks.values()))


def _has_rows(events: pl.DataFrame) -> bool:
    return bool((events["name"] == MEMORY_EVENT).any())


def job_analysis(traces: TraceSet, options: CommonOptions) -> MemoryAnalysis | None:
    """The memory analysis of the chosen ranks in the scope; None when they hold no `[memory]` event."""
    return memoised(traces, ("memory.analysis", *selection_key(traces, options)), lambda: _analysis(traces, options))


def _analysis(traces: TraceSet, options: CommonOptions) -> MemoryAnalysis | None:
    recordings = [(rank, found) for rank in chosen_ranks(traces, options) if (found := _rank(traces, options, rank))]
    if not recordings:
        return None
    if len(recordings) == 1:
        return analyse(recordings[0][1])
    return analyse(ranks_together(traces.ranks[recordings[0][0]].path, recordings))


def _rank(traces: TraceSet, options: CommonOptions, rank: int) -> MemoryRecording | None:
    trace = traces.ranks[rank]
    events = trace.events.select(_READS)
    if not _has_rows(events):
        return None
    kept = events.filter(host_rows_mask(events, options.scope, rank_steps_of(traces, rank, options.scope)))
    rows = kept.filter(pl.col("name") == MEMORY_EVENT).select("index", "ts")
    if rows.height == 0:
        return None
    args = read_memory_args(trace.path).drop("time_us")
    memory = rows.join(args, on="index", how="inner").rename({"ts": "time_us"})
    spans: list[Span] = []
    for cat, name, start, end, tid in kept.filter(pl.col("ph") == "X").select("cat", "name", "ts", "end", "tid").rows():
        kind = span_kind(str(cat), str(name))
        if kind is not None:
            spans.append((kind, str(name), float(start), float(end), tid))
    return recording_from_events(trace.path, memory, spans, rank)
