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
from htatui.analysis.core.prepare import chosen_ranks
from htatui.analysis.core.rules import Rules
from htatui.analysis.core.scope import choose_steps
from htatui.analysis.model.step.assemble import RankCalls, StepGraph, assemble
from htatui.analysis.model.step.build import Window, rank_part
from htatui.analysis.model.step.graph import RankPart
from htatui.analysis.model.step.rows import READS
from htatui.analysis.views.critical_path.options import CriticalPathOptions
from htatui.analysis.views.critical_path.window import WindowError, annotation_span
from htatui.analysis.views.ranks.meeting import CALL_KEY, KERNELS, SOURCES, skewed_clocks, source_calls
from htatui.trace.kineto import GPU_ACTIVITY_CATS, GPU_ANNOTATION, PROFILER_STEP, step_number
from htatui.trace.model import TraceSet, with_details
from htatui.trace.step_sources import steps_by_start

DEVICE_WORK = list(GPU_ACTIVITY_CATS)

CALL_READS = ("iteration", "pg_name", "group_size", "in_msg_nelems", "out_msg_nelems", "in_msg_size", "msg_dtype")
"""What the meeting points read besides the graph's columns."""


@dataclass(frozen=True)
class Built:
    """A step graph (None when there is none) and why not, or what was left out."""

    graph: StepGraph | None
    message: str | None = None


def _step_rows(traces: TraceSet, rank: int, events: pl.DataFrame) -> pl.DataFrame:
    """The rank's host ProfilerStep rows in start order: index, ts, end, step (kept on the job)."""
    key = ("step_graphs.step_rows", rank)
    found = traces.derived.get(key)
    if isinstance(found, pl.DataFrame):
        return found
    made = _find_step_rows(events)
    traces.derived[key] = made
    return made


def _find_step_rows(events: pl.DataFrame) -> pl.DataFrame:
    # The pattern runs on the distinct names; rows are picked by category code.
    names = events["name"].unique()
    steps = names.filter(names.cast(pl.Utf8).str.contains(PROFILER_STEP.pattern).fill_null(False))
    rows = events.filter(pl.col("name").is_in(steps.implode()) & (pl.col("cat") != GPU_ANNOTATION))
    name = pl.col("name").cast(pl.Utf8)
    found = rows.select("index", "ts", "end", step=step_number(name))
    return found.drop_nulls("step").sort("ts", "index")  # a number past int64 is no step


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
    # The scope's steps from the step rows alone (the scope's row mask is not needed here).
    step_rows = _step_rows(traces, rank, events)
    steps = choose_steps(steps_by_start(step_rows), options.scope.steps, options.scope.job_steps)
    used = step_rows.filter(pl.col("step").is_in(pl.Series(steps.used, dtype=pl.Int64).implode()))
    if not steps.whole_trace and used.height:
        last = used.sort("end").tail(1)
        return Window(float(used["ts"].min()), float(last["end"][0]), int(last["index"][0]))  # type: ignore[arg-type]
    real = events.filter(pl.col("cat") != "Trace")
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
    # Only the kept rows' details are joined (a rank's detail table has a row per kernel).
    details = trace.details.filter(pl.col("index").is_in(kept["index"].implode()))
    return with_details(kept, details, CALL_READS)


CALLS_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "pg": pl.Utf8(),
    "kind": pl.Utf8(),
    "step": pl.Int64(),
    "seq": pl.Int64(),
    "ts": pl.Float64(),
    "end": pl.Float64(),
    "dur_us": pl.Float64(),
    "index": pl.Int64(),
}


def own_calls(events: pl.DataFrame, source: str, rules: Rules) -> pl.DataFrame:
    """The rank's collective calls from `source` with their row's file index (CALLS_SCHEMA)."""
    calls = source_calls(events, False, rules, source, None)
    if calls.height == 0:
        return pl.DataFrame(schema=CALLS_SCHEMA)
    device = pl.col("cat").cast(pl.Utf8).is_in(DEVICE_WORK)
    rows = events.filter(device if source == KERNELS else ~device).select("ts", "end", "index")
    rows = rows.unique(["ts", "end"], keep="first", maintain_order=True)
    found = calls.join(rows, on=["ts", "end"], how="inner")
    return found.select([pl.col(c).cast(t) for c, t in CALLS_SCHEMA.items()])


@dataclass(frozen=True)
class JobCalls:
    """Every chosen rank's window (on its own clock) and collective calls from the job's source
    (the first any rank has), each rank's clock offset from the others' at the collectives (the
    Ranks view's `skewed_clocks`), and why a rank has no window."""

    windows: dict[int, Window]
    calls: pl.DataFrame
    """CALLS_SCHEMA, times on each rank's own clock."""
    offsets: dict[int, float]
    problems: tuple[str, ...] = ()

    def last_arrivals(self, rank: int) -> pl.DataFrame:
        """CALL_KEY, last_arrival_us: the last arrival of any rank at each of `rank`'s calls
        that two or more ranks share, on `rank`'s clock."""
        shift = pl.col("rank").replace_strict(self.offsets, default=0.0, return_dtype=pl.Float64)
        common = self.calls.with_columns(arrival=pl.col("ts") - shift)
        shared = common.group_by(CALL_KEY).agg(last=pl.col("arrival").max(), ranks=pl.col("rank").n_unique())
        mine = self.calls.filter(pl.col("rank") == rank).join(shared.filter(pl.col("ranks") >= 2), on=CALL_KEY)
        return mine.select(*CALL_KEY, "index", last_arrival_us=pl.col("last") + self.offsets.get(rank, 0.0))


def job_calls(traces: TraceSet, options: CriticalPathOptions) -> JobCalls:
    """`JobCalls` of the chosen ranks (kept on the job: one rank's graph and the job's share it)."""
    key = ("step_graphs.calls", *selection_key(traces, options, "annotation", "instance"))
    return memoised(traces, key, lambda: _job_calls(traces, options))


def _job_calls(traces: TraceSet, options: CriticalPathOptions, build: dict[int, RankPart] | None = None) -> JobCalls:
    """`JobCalls`; with `build`, each rank's part is built from the same rows, from the job's
    first start (its window's start then is that of every rank: the rows read once)."""
    windows: dict[int, Window] = {}
    problems: list[str] = []
    for rank in chosen_ranks(traces, options):
        try:
            windows[rank] = window_of(traces.ranks[rank].events, traces, options, rank)
        except WindowError as err:
            problems.append(f"rank {rank}: {err}")
    low = min((w.low_us for w in windows.values()), default=0.0)
    by_source: dict[str, list[pl.DataFrame]] = {source: [] for source in SOURCES}
    for rank, window in windows.items():
        wide = replace(window, low_us=low) if build is not None else window
        events = _near(traces, rank, wide)
        if build is not None:
            build[rank] = rank_part(rank, events, wide, options.scope.rules)
        # A rank's first source with calls is its best; the job's is the best any rank has.
        for source in SOURCES:
            found = own_calls(events, source, options.scope.rules)
            if found.height:
                by_source[source].append(found.with_columns(rank=pl.lit(rank, pl.Int32)))
                break
        del events
    chosen = next((frames for source, frames in by_source.items() if frames), [])
    calls = pl.concat(chosen, how="vertical_relaxed") if chosen else pl.DataFrame(schema=CALLS_SCHEMA)
    skewed = skewed_clocks(calls) if calls.height else None
    offsets = dict(skewed.select("rank", "offset_us").iter_rows()) if skewed is not None else {}
    return JobCalls(windows, calls, offsets, tuple(problems))


def rank_graph(traces: TraceSet, options: CriticalPathOptions, rank: int) -> Built:
    """One rank's step graph, waiting at each collective for the other ranks' last arrival."""
    key = ("step_graphs.rank", *selection_key(traces, options, "annotation", "instance", "data_loading"), rank)
    return memoised(traces, key, lambda: _rank_graph(traces, options, rank))


def _rank_graph(traces: TraceSet, options: CriticalPathOptions, rank: int) -> Built:
    try:
        window = window_of(traces.ranks[rank].events, traces, options, rank)
    except WindowError as err:
        return Built(None, f"rank {rank}: {err}")
    part = rank_part(rank, _near(traces, rank, window), window, options.scope.rules)
    calls = None
    if len(traces.ranks) >= 2:
        # Every rank's arrivals, whatever ranks the scope names: this rank waits for them all.
        arrivals = job_calls(traces, replace(options, scope=options.scope.with_ranks(None))).last_arrivals(rank)
        if arrivals.height:
            calls = RankCalls(
                index=arrivals["index"].to_numpy(), last_arrival_us=arrivals["last_arrival_us"].to_numpy()
            )
    return Built(assemble([part], [calls], options.data_loading))


def job_graph(traces: TraceSet, options: CriticalPathOptions) -> Built:
    """The job's step graph: the chosen ranks joined at a meeting node per collective call."""
    key = ("step_graphs.job", *selection_key(traces, options, "annotation", "instance", "data_loading"))
    return memoised(traces, key, lambda: _job_graph(traces, options))


def _job_graph(traces: TraceSet, options: CriticalPathOptions) -> Built:
    built: dict[int, RankPart] = {}
    key = ("step_graphs.calls", *selection_key(traces, options, "annotation", "instance"))
    found = traces.derived.get(key)
    if not isinstance(found, JobCalls):
        # The calls and the parts from one read of each rank's rows.
        found = _job_calls(traces, options, built)
        traces.derived[key] = found
    if not found.windows:
        return Built(None, "; ".join(found.problems) or "no ranks")
    # On the common clock, every rank from the job's first start: the path can cross to any rank.
    low = min(w.low_us - found.offsets.get(rank, 0.0) for rank, w in found.windows.items())
    parts: list[RankPart] = []
    calls_of: list[RankCalls | None] = []
    groups = found.calls.with_columns(group=pl.struct(CALL_KEY).rank("dense").cast(pl.Int64))
    for rank, window in found.windows.items():
        shift = found.offsets.get(rank, 0.0)
        common = replace(window, low_us=low, high_us=window.high_us - shift)
        part = built.pop(rank, None)
        if part is None or part.low_us != common.low_us or shift:
            part = rank_part(rank, _near(traces, rank, common, shift), common, options.scope.rules)
        parts.append(part)
        mine = groups.filter(pl.col("rank") == rank)
        calls_of.append(
            RankCalls(index=mine["index"].to_numpy(), group=mine["group"].to_numpy()) if mine.height else None
        )
    return Built(assemble(parts, calls_of, options.data_loading), "; ".join(found.problems) or None)


def scope_graph(traces: TraceSet, options: CriticalPathOptions) -> Built:
    """The job's graph when two or more ranks are chosen, else the one rank's."""
    chosen = chosen_ranks(traces, options)
    if len(chosen) >= 2:
        return job_graph(traces, options)
    if not chosen:
        return Built(None, "no ranks")
    return rank_graph(traces, options, chosen[0])
