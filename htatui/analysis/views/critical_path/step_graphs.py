"""The step model's graphs of a loaded job (default mode): one rank's, and the job's.

The window is the scope's steps (the first chosen step's start to the last one's end, the last
ProfilerStep's end being the step's end), or an annotation's instance; the collectives are the
Ranks view's meeting points (`views/ranks/meeting.py`): one rank's graph waits for the other
ranks' last arrival at each call (from the Ranks analysis, on this rank's clock), the job's
graph joins the ranks at a meeting node per call. A rank whose clock is off the others' at the
collectives (the Ranks view's `clock_offsets`) is moved onto theirs in the job's graph.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.prepare import chosen_ranks, rank_steps_of
from htatui.analysis.model.step.assemble import RankCalls, StepGraph, assemble
from htatui.analysis.model.step.build import Window, rank_part
from htatui.analysis.model.step.graph import RankPart
from htatui.analysis.model.step.rows import READS
from htatui.analysis.views import ranks as ranks_view
from htatui.analysis.views.critical_path.options import CriticalPathOptions
from htatui.analysis.views.critical_path.window import WindowError, annotation_span
from htatui.analysis.views.ranks.meeting import CALL_KEY, KERNELS, SOURCES, source_calls
from htatui.trace.kineto import GPU_ACTIVITY_CATS, GPU_ANNOTATION, PROFILER_STEP
from htatui.trace.model import TraceSet, with_details

DEVICE_WORK = list(GPU_ACTIVITY_CATS)

CALL_READS = ("iteration", "pg_name", "group_size", "in_msg_nelems", "out_msg_nelems", "in_msg_size", "msg_dtype")
"""What the meeting points read besides the graph's columns."""


@dataclass(frozen=True)
class Built:
    """A step graph (None when there is none) and why not, or what was left out."""

    graph: StepGraph | None
    message: str | None = None


def _step_rows(events: pl.DataFrame) -> pl.DataFrame:
    """The rank's host ProfilerStep rows: index, ts, end, step (the pattern runs on distinct names)."""
    names = events["name"].unique()
    steps = names.filter(names.cast(pl.Utf8).str.contains(PROFILER_STEP.pattern).fill_null(False))
    rows = events.filter(pl.col("name").is_in(steps.implode()) & (pl.col("cat") != GPU_ANNOTATION))
    name = pl.col("name").cast(pl.Utf8)
    return rows.select("index", "ts", "end", step=name.str.extract(PROFILER_STEP.pattern, 1).cast(pl.Int64))


def window_of(events: pl.DataFrame, traces: TraceSet, options: CriticalPathOptions, rank: int) -> Window:
    """The rank's window: the annotation's instance, else its chosen steps (WindowError: none)."""
    if options.annotation:
        named = events.select(
            pl.col("name").cast(pl.Utf8),
            "ts",
            "end",
            "dur",
            "index",
            hstream=pl.when(pl.col("cat").cast(pl.Utf8).is_in(["kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"]))
            .then(0)
            .otherwise(-1),
            cat=pl.col("cat").cast(pl.Utf8),
        )
        low, high = annotation_span(named, options.annotation, options.instance or 0, False)
        found = named.filter((pl.col("ts") == low) & (pl.col("end") == high) & (pl.col("hstream") == -1))
        return Window(low, high, int(found["index"][0]) if found.height else None)
    steps = rank_steps_of(traces, rank, options.scope)
    used = _step_rows(events).filter(pl.col("step").is_in(pl.Series(steps.used, dtype=pl.Int64).implode()))
    if not steps.whole_trace and used.height:
        last = used.sort("end").tail(1)
        return Window(float(used["ts"].min()), float(last["end"][0]), int(last["index"][0]))  # type: ignore[arg-type]
    real = events.filter(pl.col("cat").cast(pl.Utf8) != "Trace")
    if real.height == 0:
        raise WindowError("no events")
    return Window(float(real["ts"].min()), float(real["end"].max()), None)  # type: ignore[arg-type]


def _near(traces: TraceSet, rank: int, window: Window, shift_us: float = 0.0) -> pl.DataFrame:
    """The rank's rows a graph of `window` can read (the window's: overlapping it, or launched in
    it), with the meeting points' detail columns; times moved by −`shift_us` (a skewed clock)."""
    trace = traces.ranks[rank]
    own = [c for c in (*READS, "rank", "iteration") if c in trace.events.columns]
    low, high = window.low_us + shift_us, window.high_us + shift_us
    # Categorical is_in compares codes: no text copy of a million-row column.
    events = trace.events.lazy()
    calls = (
        events.filter(pl.col("ts").is_between(low, high) & pl.col("cat").is_in(["cuda_runtime", "cuda_driver"]))
        .select("correlation")
        .drop_nulls()
        .collect()["correlation"]
    )
    kept = (
        events.filter(
            ((pl.col("end") > low) & (pl.col("ts") < high))
            | (pl.col("correlation").is_in(calls.implode()) & pl.col("cat").is_in(DEVICE_WORK))
        )
        .select(list(dict.fromkeys(own)))
        .collect()
    )
    if shift_us:
        kept = kept.with_columns(ts=pl.col("ts") - shift_us, end=pl.col("end") - shift_us)
    return with_details(kept, trace.details, CALL_READS)


def own_calls(events: pl.DataFrame, source: str) -> pl.DataFrame:
    """The rank's collective calls from `source` with their row's file index (pg, kind, step, seq, index)."""
    calls = source_calls(events, False, source, None)
    if calls.height == 0:
        return pl.DataFrame(
            schema={
                **{k: pl.Utf8() for k in ("pg", "kind")},
                "step": pl.Int64(),
                "seq": pl.Int64(),
                "index": pl.Int64(),
            }
        )
    device = pl.col("cat").cast(pl.Utf8).is_in(["kernel", "gpu_memcpy", "gpu_memset"])
    rows = events.filter(device if source == KERNELS else ~device).select("ts", "end", "index")
    rows = rows.unique(["ts", "end"], keep="first", maintain_order=True)
    return calls.join(rows, on=["ts", "end"], how="inner").select(*CALL_KEY, "index")


def rank_graph(traces: TraceSet, options: CriticalPathOptions, rank: int) -> Built:
    """One rank's step graph, waiting at each collective for the other ranks' last arrival."""
    key = ("step_graphs.rank", *selection_key(traces, options, "annotation", "instance", "data_loading"), rank)
    return memoised(traces, key, lambda: _rank_graph(traces, options, rank))


def _rank_graph(traces: TraceSet, options: CriticalPathOptions, rank: int) -> Built:
    try:
        window = window_of(traces.ranks[rank].events, traces, options, rank)
    except WindowError as err:
        return Built(None, f"rank {rank}: {err}")
    events = _near(traces, rank, window)
    part = rank_part(rank, events, window)
    calls = None
    found = _last_arrivals(traces, options, rank)
    if found is not None:
        source, arrivals = found
        mine = own_calls(events, source).join(arrivals, on=CALL_KEY, how="inner")
        if mine.height:
            calls = RankCalls(index=mine["index"].to_numpy(), last_arrival_us=mine["last_arrival_us"].to_numpy())
    return Built(assemble([part], [calls], options.data_loading))


def _last_arrivals(traces: TraceSet, options: CriticalPathOptions, rank: int) -> tuple[str, pl.DataFrame] | None:
    """The Ranks view's meeting points' source, and the last arrival of any rank at each of
    `rank`'s calls on `rank`'s clock (CALL_KEY, last_arrival_us); None for a one-rank job."""
    if len(traces.ranks) < 2:
        return None
    result = ranks_view.analyse(traces, ranks_view.RanksOptions(scope=options.scope.with_ranks(None)))
    if result.calls.height == 0 or result.source is None:
        return None
    offset = 0.0
    if result.clocks is not None and result.clocks.height:
        mine = result.clocks.filter(pl.col("rank") == rank)
        offset = float(mine["offset_us"][0]) if mine.height else 0.0
    arrivals = (
        result.calls.filter((pl.col("rank") == rank) & (pl.col("call_ranks") > 1))
        .select(*CALL_KEY, last_arrival_us=pl.col("arrival_last_us") + offset)
        .unique(CALL_KEY, keep="first")
    )
    return result.source, arrivals


def job_graph(traces: TraceSet, options: CriticalPathOptions) -> Built:
    """The job's step graph: the chosen ranks joined at a meeting node per collective call."""
    key = ("step_graphs.job", *selection_key(traces, options, "annotation", "instance", "data_loading"))
    return memoised(traces, key, lambda: _job_graph(traces, options))


def _job_graph(traces: TraceSet, options: CriticalPathOptions) -> Built:
    chosen = chosen_ranks(traces, options)
    if not chosen:
        return Built(None, "no ranks")
    offsets = ranks_view.clock_offsets(traces, ranks_view.RanksOptions(scope=options.scope))
    shift = dict(offsets.select("rank", "offset_us").iter_rows()) if offsets.height else {}
    problems: list[str] = []
    windows: dict[int, Window] = {}
    for rank in chosen:
        try:
            window = window_of(traces.ranks[rank].events, traces, options, rank)
        except WindowError as err:
            problems.append(f"rank {rank}: {err}")
            continue
        off = shift.get(rank, 0.0)
        windows[rank] = replace(window, low_us=window.low_us - off, high_us=window.high_us - off)
    if not windows:
        return Built(None, "; ".join(problems) or "no ranks")
    # Every rank from the job's first start, so the path can cross to any rank at any time.
    low = min(w.low_us for w in windows.values())
    parts: list[RankPart] = []
    calls: dict[str, list[pl.DataFrame]] = {source: [] for source in SOURCES}
    for rank, window in windows.items():
        window = replace(window, low_us=low)
        events = _near(traces, rank, window, shift.get(rank, 0.0))
        parts.append(rank_part(rank, events, window))
        for source in SOURCES:
            found = own_calls(events, source)
            if found.height:
                calls[source].append(found.with_columns(rank=pl.lit(rank)))
                break
        del events
    # The job's source: the first any rank has (a rank with a worse one has none of these).
    chosen_source = next((calls[s] for s in SOURCES if calls[s]), [])
    calls_of: list[RankCalls | None] = [None] * len(parts)
    if chosen_source:
        every = pl.concat(chosen_source, how="vertical_relaxed").with_columns(
            group=pl.struct(CALL_KEY).rank("dense").cast(pl.Int64)
        )
        for i, part in enumerate(parts):
            mine = every.filter(pl.col("rank") == part.rank)
            if mine.height:
                calls_of[i] = RankCalls(index=mine["index"].to_numpy(), group=mine["group"].to_numpy())
    return Built(assemble(parts, calls_of, options.data_loading), "; ".join(problems) or None)


def scope_graph(traces: TraceSet, options: CriticalPathOptions) -> Built:
    """The job's graph when two or more ranks are chosen, else the one rank's."""
    chosen = chosen_ranks(traces, options)
    if len(chosen) >= 2:
        return job_graph(traces, options)
    if not chosen:
        return Built(None, "no ranks")
    return rank_graph(traces, options, chosen[0])
