"""The rows a view reads: the chosen ranks' complete events in the scope's steps, one rank at a time when asked.

The mask of each (rank, mode, steps) is made once and kept on the loaded job (`TraceSet.derived`),
so views that need a few columns filter only those. Over a dataset (ranks not read yet),
`each_rank` builds a rank at a time and drops it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import polars as pl

from htatui.analysis.core import cancel, hta, kept
from htatui.analysis.core.options import CommonOptions, OptionsT
from htatui.analysis.core.scope import RankSteps, Scope, choose_steps, common_steps, rank_steps, scope_mask
from htatui.trace.figures import valid_figures
from htatui.trace.model import DETAIL_SCHEMA, TraceSet, empty_details, empty_events, with_details


@dataclass(frozen=True)
class Prepared:
    """Events of the chosen ranks in the scope's steps (with HTA's rounding in compat mode)."""

    events: pl.DataFrame
    steps: dict[int, RankSteps]
    hta_compat: bool

    @property
    def steps_used(self) -> dict[int, list[int]]:
        """The steps each rank's numbers count."""
        return {rank: list(steps.used) for rank, steps in self.steps.items()}


_MASK_COLUMNS = ("ph", "cat", "name", "stream", "correlation", "ts", "end", "iteration")
"""What the scope's row filter reads: the mask is worked out on these alone, not on the whole frame."""


def _rounds(traces: TraceSet, rank: int, hta_compat: bool) -> bool:
    return hta_compat and traces.ranks[rank].meta.fractional_ts


def scope_key(scope: Scope) -> tuple[Any, ...]:
    return (scope.hta_compat, scope.steps, scope.job_steps)


def job_scope(traces: TraceSet, scope: Scope) -> Scope:
    """`scope` with the job's common steps set (`Scope.job_steps`), worked out once over every rank
    of `traces`: a rank one step short cuts the others to its steps, so no rank is measured over
    steps another lacks. A scope that has them already (a rank's part of a job) is kept as it is."""
    if scope.job_steps is not None or scope.hta_compat or scope.steps.kind == "all" or len(traces.ranks) < 2:
        return scope
    key = ("job_steps", scope.steps)
    common: tuple[int, ...] | None
    if key in traces.derived:
        common = traces.derived[key]
    else:
        common = common_steps(own_rank_steps(traces, rank, scope) for rank in traces.rank_ids)
        traces.derived[key] = common
    return scope if common is None else replace(scope, job_steps=common)


def with_job_steps(traces: TraceSet, options: OptionsT) -> OptionsT:
    """`options` with `job_scope`'s scope: every view's entry, before a job is split into ranks."""
    scope = job_scope(traces, options.scope)
    return options if scope is options.scope else replace(options, scope=scope)


def own_rank_steps(traces: TraceSet, rank: int, scope: Scope) -> RankSteps:
    """How `scope`'s steps fall on one rank by its own ProfilerSteps: from a dataset's summary or a
    cache entry's figures when the rank is not read (no events read), else from its events."""
    trace = traces.ranks[rank]
    # The steady state reads the steps' events (captures, durations): no stored list answers it.
    if not trace.loaded and not scope.hta_compat and scope.steps.kind != "steady":
        # A cache entry's figures list the steps by start, as the events do: before a summary's.
        kept = valid_figures(trace.stored_figures())
        if kept is not None:
            by_start = kept["steps_by_start"][0].to_list()
            return choose_steps(by_start, scope.steps, scope.job_steps, source=kept["step_source"][0])
        if traces.summary is not None:
            stored = traces.summary.filter(pl.col("rank") == rank).select("iterations", "step_source")
            if stored.height:  # a dataset's steps, by number (steps run in number order)
                steps, source = stored.row(0)
                return choose_steps(steps, scope.steps, scope.job_steps, source=source)
    return rank_steps(trace.events.select("ph", "cat", "name", "ts", "end", "dur"), scope)


def _prepared_mask(traces: TraceSet, rank: int, scope: Scope) -> tuple[pl.Series, RankSteps]:
    """Which of the rank's rows `prepare` keeps (X events in the scope's steps), and its steps.

    Kept on the loaded job (`TraceSet.derived`): a view that needs a few columns filters only
    those by the mask, instead of every view copying all ~35 columns twice.
    """
    scope = job_scope(traces, scope)
    key = ("prepared_mask", rank, *scope_key(scope), kept.code_digest())
    cached: tuple[pl.Series, RankSteps] | None = traces.derived.get(key)
    if cached is not None:
        return cached
    narrow = traces.ranks[rank].events.select(_MASK_COLUMNS)
    if _rounds(traces, rank, scope.hta_compat):
        narrow = hta.ns_rounded(narrow)
    result = scope_mask(narrow, scope)
    traces.derived[key] = result
    return result


def rank_steps_of(traces: TraceSet, rank: int, scope: Scope) -> RankSteps:
    """How the scope's steps fall on a rank (from the same mask every view reads)."""
    return _prepared_mask(traces, rank, scope)[1]


def _prepared_rank(traces: TraceSet, rank: int, scope: Scope) -> tuple[pl.DataFrame, RankSteps]:
    """Each rank's events in scope, kept on the loaded job (`TraceSet.derived`).

    Every view starts from the same filtered events, and a screen asks for several views of one
    job, so the filter runs once per (rank, mode, steps) instead of per call.
    """
    scope = job_scope(traces, scope)
    key = ("prepared", rank, *scope_key(scope), kept.code_digest())
    cached: tuple[pl.DataFrame, RankSteps] | None = traces.derived.get(key)
    if cached is not None:
        return cached
    keep, steps = _prepared_mask(traces, rank, scope)
    events = traces.ranks[rank].events.filter(keep)
    if _rounds(traces, rank, scope.hta_compat):
        events = hta.ns_rounded(events)
    result = (events, steps)
    traces.derived[key] = result
    return result


def _prepared_columns(
    traces: TraceSet, rank: int, scope: Scope, columns: tuple[str, ...]
) -> tuple[pl.DataFrame, RankSteps]:
    """`_prepared_rank`'s frame with only `columns`, filtering just those when the whole one is not made yet.

    Detail columns among `columns` (model.DETAIL_SCHEMA) are joined on from the rank's detail table.
    """
    scope = job_scope(traces, scope)
    detailed = tuple(c for c in columns if c in DETAIL_SCHEMA and c not in ("rank", "index"))
    own = tuple(dict.fromkeys((*(c for c in columns if c not in detailed), *(("index",) if detailed else ()))))
    whole: tuple[pl.DataFrame, RankSteps] | None = traces.derived.get(
        ("prepared", rank, *scope_key(scope), kept.code_digest())
    )
    if whole is not None:
        events, steps = whole[0].select(own), whole[1]
    else:
        keep, steps = _prepared_mask(traces, rank, scope)
        rounds = _rounds(traces, rank, scope.hta_compat)
        # Rounding recomputes dur from ts and end, so those come along when rounding.
        read = tuple(dict.fromkeys((*own, "ts", "end", "dur"))) if rounds else own
        events = traces.ranks[rank].events.select(read).filter(keep)
        if rounds:
            events = hta.ns_rounded(events)
    if detailed:
        events = with_details(events, traces.ranks[rank].details, detailed)
    return events.select(columns), steps


def prepare(traces: TraceSet, options: CommonOptions, columns: tuple[str, ...] | None = None) -> Prepared:
    """The chosen ranks' complete events in the scope's steps (HTA's ns rounding first in compat mode).

    `columns`: only these columns of the events (cheaper on big ranks: only they are filtered).
    """
    scope = options.scope
    frames: list[pl.DataFrame] = []
    steps: dict[int, RankSteps] = {}
    for rank in chosen_ranks(traces, options):
        cancel.check()
        if columns is None:
            events, steps[rank] = _prepared_rank(traces, rank, scope)
        else:
            events, steps[rank] = _prepared_columns(traces, rank, scope, columns)
        frames.append(events)
    if frames:
        events = pl.concat(frames, how="vertical")
    else:
        empty = pl.concat([empty_events(), empty_details().drop("rank", "index")], how="horizontal")
        events = empty_events() if columns is None else empty.select(columns)
    return Prepared(events=events, steps=steps, hta_compat=scope.hta_compat)


_T = TypeVar("_T")


def rank_by_rank(
    traces: TraceSet, options: OptionsT, build: Callable[[TraceSet, OptionsT], pl.DataFrame]
) -> pl.DataFrame:
    """`build(traces, options)`; over ranks not read yet (a dataset), a rank at a time instead.

    `build` must give each rank's rows from that rank alone, in rank order (a per-rank extract
    such as the typed kernels). Each unread rank is read, built and dropped, so only the extracts
    are held together, not every rank's events.
    """
    return tables_rank_by_rank(traces, options, lambda part, opts: [build(part, opts)])[0]


def tables_rank_by_rank(
    traces: TraceSet, options: OptionsT, build: Callable[[TraceSet, OptionsT], list[pl.DataFrame]]
) -> list[pl.DataFrame]:
    """`rank_by_rank` for a `build` that makes several per-rank tables from the same ranks."""
    unread = [rank for rank in chosen_ranks(traces, options) if not traces.ranks[rank].loaded]
    if len(unread) < 2:
        return build(traces, options)
    parts = each_rank(traces, options, build)
    return [pl.concat(tables, how="vertical") for tables in zip(*parts, strict=True)]


def chosen_ranks(traces: TraceSet, options: CommonOptions) -> list[int]:
    """The ranks `options` names that the job has, in the order named; every rank when none is named."""
    return traces.rank_ids if options.ranks is None else [r for r in options.ranks if r in traces.ranks]


def each_rank(traces: TraceSet, options: OptionsT, build: Callable[[TraceSet, OptionsT], _T]) -> list[_T]:
    """`build` on each chosen rank as a job of its own (with its summary row), in order.

    When two or more of those ranks are not read yet (a dataset), each is dropped again once built,
    so only the results are held together; a single unread rank is kept, as reading it again would
    cost more than holding it.
    """
    chosen = chosen_ranks(traces, options)
    unread = {rank for rank in chosen if not traces.ranks[rank].loaded}
    # The job's steps are chosen before it is split: a rank alone would choose its own.
    alone = with_job_steps(traces, options).with_ranks(None)
    results: list[_T] = []
    for rank in chosen:
        cancel.check()
        # The rank's summary row goes along, so a view that answers from it still does.
        summary = traces.summary.filter(pl.col("rank") == rank) if traces.summary is not None else None
        part = TraceSet(ranks={rank: traces.ranks[rank]}, summary=summary, captures=traces.captures)
        results.append(build(part, alone))
        if len(unread) >= 2 and rank in unread:
            traces.ranks[rank].unload()
    return results
