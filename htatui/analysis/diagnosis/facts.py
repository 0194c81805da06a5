"""What the rules read from a rank's events, taken in one pass a rank at a time.

A dataset's ranks are each read once and dropped again (`each_rank`), so the diagnosis of a
256-rank job holds these small extracts, never every rank's events.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.intervals import merge_intervals
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import chosen_ranks, each_rank, prepare
from htatui.analysis.diagnosis.settings import Settings
from htatui.trace.kineto import GPU_ACTIVITY_CATS, MEMORY_EVENT
from htatui.trace.model import TraceSet

READS = ("rank", "cat", "name", "ts", "end", "dur", "stream")
"""The event columns the extracts are made from."""

HOST_CALL_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")
PHASE_CATS = ("user_annotation", "cpu_op", "python_function")


@dataclass(frozen=True)
class RankFacts:
    """One rank's extracts over the scope's steps."""

    busy: pl.DataFrame
    """ts, end: the union of its GPU kernels, copies and memsets, sorted."""
    kernels: pl.DataFrame
    """stream, ts, dur, name (Utf8) of its kernels, by stream and start."""
    sync_calls: pl.DataFrame
    """name, ts, end, dur of its host calls whose name is a sync rule's."""
    pageable: pl.DataFrame
    """name, dur of its copies whose name is a pageable-copy rule's."""
    loading: pl.DataFrame
    """name, ts, end of its ranges whose name is a data-loader rule's."""
    memory_events: bool
    """Whether its trace holds `[memory]` events (the memory rule reads them from the file)."""


def _named(events: pl.DataFrame, patterns: tuple[str, ...], cats: tuple[str, ...]) -> pl.DataFrame:
    """The events of `cats` whose name matches one of `patterns`."""
    if not patterns:
        return events.clear()
    name = pl.col("name")
    wanted = pl.any_horizontal([name.str.contains(pattern) for pattern in patterns])
    return events.filter(pl.col("cat").is_in(list(cats)) & wanted & (pl.col("dur") >= 0))


def rank_facts(part: TraceSet, options: CommonOptions, settings: Settings) -> RankFacts:
    """The extracts of the one rank of `part`."""
    rank = part.rank_ids[0]
    memory_events = bool((part.ranks[rank].events["name"].cast(pl.Utf8) == MEMORY_EVENT).any())
    events = prepare(part, options, columns=READS).events.with_columns(
        pl.col("cat").cast(pl.Utf8), pl.col("name").cast(pl.Utf8)
    )
    gpu = events.filter(pl.col("cat").is_in(list(GPU_ACTIVITY_CATS)) & (pl.col("dur") > 0))
    kernels = events.filter(pl.col("cat") == "kernel").select("stream", "ts", "dur", "name").sort("stream", "ts")
    return RankFacts(
        busy=merge_intervals(gpu.select("ts", "end"), []).sort("ts"),
        kernels=kernels,
        sync_calls=_named(events, settings.names("sync", "names"), HOST_CALL_CATS).select("name", "ts", "end", "dur"),
        pageable=_named(events, settings.names("pageable_copy", "names"), ("gpu_memcpy",)).select("name", "dur"),
        loading=_named(events, settings.names("data_loader", "names"), PHASE_CATS)
        .filter(pl.col("dur") > 0)
        .select("name", "ts", "end"),
        memory_events=memory_events,
    )


def job_facts(traces: TraceSet, options: CommonOptions, settings: Settings) -> dict[int, RankFacts]:
    """Each chosen rank's extracts, a rank at a time."""
    parts = each_rank(traces, options, lambda part, alone: rank_facts(part, alone, settings))
    return dict(zip(chosen_ranks(traces, options), parts, strict=True))
