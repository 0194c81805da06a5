"""What every view shares: options, event selection, kernel typing, interval merging, steps.

Default semantics are corrected (docs/semantics-breakdowns.md, shared rules); `hta_compat=True` switches the few
places where HTA 0.6.1 differs (its selectors, name-only typing, ns rounding). docs/semantics.md
lists every difference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

import polars as pl

from htatui.analysis import cancel
from htatui.analysis.comm_rules import comm_categories, is_comm_kernel
from htatui.analysis.scope import RankSteps, Scope, scope_mask
from htatui.trace.kineto import GPU_ACTIVITY_CATS
from htatui.trace.model import TraceSet, empty_events

COMPUTATION = "COMPUTATION"
COMMUNICATION = "COMMUNICATION"
MEMORY = "MEMORY"
OTHER = "OTHER"
KERNEL_TYPES = (COMPUTATION, COMMUNICATION, MEMORY)

IDLE_CATS_COMPAT = GPU_ACTIVITY_CATS
"""HTA's idle-time selector S3 (capitalised aliases are already folded by the loader)."""


@dataclass(frozen=True)
class CommonOptions:
    """What every view takes: the scope (ranks, steps, mode); a view's options add its knobs."""

    scope: Scope = field(default_factory=Scope)

    @property
    def ranks(self) -> tuple[int, ...] | None:
        """The scope's ranks (None = every rank)."""
        return self.scope.ranks

    @property
    def hta_compat(self) -> bool:
        """Whether the scope follows HTA 0.6.1's rules and quirks."""
        return self.scope.hta_compat

    def with_ranks(self, ranks: tuple[int, ...] | None) -> Self:
        """The same options over other ranks."""
        return dataclasses.replace(self, scope=self.scope.with_ranks(ranks))


@dataclass(frozen=True)
class NotedTable:
    """A table and the sentence that goes with it: why it is empty, or how it was made."""

    frame: pl.DataFrame
    message: str | None = None


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


def _scope_key(scope: Scope) -> tuple[Any, ...]:
    return (scope.hta_compat, scope.steps)


def _prepared_mask(traces: TraceSet, rank: int, scope: Scope) -> tuple[pl.Series, RankSteps]:
    """Which of the rank's rows `prepare` keeps (X events in the scope's steps), and its steps.

    Kept on the loaded job (`TraceSet.derived`): a view that needs a few columns filters only
    those by the mask, instead of every view copying all ~35 columns twice.
    """
    key = ("prepared_mask", rank, *_scope_key(scope))
    cached: tuple[pl.Series, RankSteps] | None = traces.derived.get(key)
    if cached is not None:
        return cached
    narrow = traces.ranks[rank].events.select(_MASK_COLUMNS)
    if _rounds(traces, rank, scope.hta_compat):
        narrow = round_like_hta(narrow)
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
    key = ("prepared", rank, *_scope_key(scope))
    cached: tuple[pl.DataFrame, RankSteps] | None = traces.derived.get(key)
    if cached is not None:
        return cached
    keep, steps = _prepared_mask(traces, rank, scope)
    events = traces.ranks[rank].events.filter(keep)
    if _rounds(traces, rank, scope.hta_compat):
        events = round_like_hta(events)
    result = (events, steps)
    traces.derived[key] = result
    return result


def _prepared_columns(
    traces: TraceSet, rank: int, scope: Scope, columns: tuple[str, ...]
) -> tuple[pl.DataFrame, RankSteps]:
    """`_prepared_rank`'s frame with only `columns`, filtering just those when the whole one is not made yet."""
    whole: tuple[pl.DataFrame, RankSteps] | None = traces.derived.get(("prepared", rank, *_scope_key(scope)))
    if whole is not None:
        return whole[0].select(columns), whole[1]
    keep, steps = _prepared_mask(traces, rank, scope)
    rounds = _rounds(traces, rank, scope.hta_compat)
    # Rounding recomputes dur from ts and end, so those come along when rounding.
    read = tuple(dict.fromkeys((*columns, "ts", "end", "dur"))) if rounds else columns
    events = traces.ranks[rank].events.select(read).filter(keep)
    if rounds:
        events = round_like_hta(events)
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
        events = empty_events() if columns is None else empty_events().select(columns)
    return Prepared(events=events, steps=steps, hta_compat=scope.hta_compat)


OptionsT = TypeVar("OptionsT", bound=CommonOptions)
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
    alone = options.with_ranks(None)
    results: list[_T] = []
    for rank in chosen:
        cancel.check()
        # The rank's summary row goes along, so a view that answers from it still does.
        summary = traces.summary.filter(pl.col("rank") == rank) if traces.summary is not None else None
        results.append(build(TraceSet(ranks={rank: traces.ranks[rank]}, summary=summary), alone))
        if len(unread) >= 2 and rank in unread:
            traces.ranks[rank].unload()
    return results


def round_like_hta(events: pl.DataFrame) -> pl.DataFrame:
    """HTA's ns rounding (docs/semantics.md, time rounding): ceil the start, floor the end, dur = end − start."""
    return events.with_columns(ts=pl.col("ts").ceil(), end=pl.col("end").floor()).with_columns(
        dur=pl.col("end") - pl.col("ts")
    )


def gpu_events(events: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """GPU activity: kernels, copies and memsets by category; HTA's `stream != -1` in compat."""
    if hta_compat:
        return events.filter(pl.col("stream").is_not_null() & (pl.col("stream") != -1) & (pl.col("cat") != "Trace"))
    return events.filter(pl.col("cat").cast(pl.Utf8).is_in(GPU_ACTIVITY_CATS))


def kernel_type(hta_compat: bool) -> pl.Expr:
    """COMPUTATION / COMMUNICATION / MEMORY / OTHER for each GPU row (docs/semantics-breakdowns.md, shared rules).

    Corrected: copies and memsets are MEMORY by category, syncs OTHER, and kernels are typed
    by the communication rules (`comm_rules.toml` plus the user's: NCCL/RCCL in every spelling,
    DeepEP, NVSHMEM, …, or collective args on the kernel) as COMMUNICATION, ROCm copy kernels
    MEMORY, the rest COMPUTATION.
    Compat: HTA's name-only prefix rules, quirks included.
    """
    name = pl.col("name").cast(pl.Utf8)
    if hta_compat:
        return _hta_name_type(name)
    cat = pl.col("cat").cast(pl.Utf8)
    comm_kernel = is_comm_kernel()
    copy_kernel = name.str.starts_with("__amd_rocclr_copyBuffer") | name.str.starts_with("__amd_rocclr_fillBuffer")
    return (
        pl.when(cat.is_in(comm_categories()))
        .then(pl.lit(COMMUNICATION))
        .when(cat.is_in(["gpu_memcpy", "gpu_memset"]))
        .then(pl.lit(MEMORY))
        .when(cat == "kernel")
        .then(
            pl.when(comm_kernel)
            .then(pl.lit(COMMUNICATION))
            .when(copy_kernel)
            .then(pl.lit(MEMORY))
            .otherwise(pl.lit(COMPUTATION))
        )
        # MTIA device events (jobs, DMA, collectives, waits) have no category split: HTA's name
        # rules are the best typing there is for them.
        .when(cat == "mtia_ccp_events")
        .then(_hta_name_type(name))
        .otherwise(pl.lit(OTHER))
    )


def _hta_name_type(name: pl.Expr) -> pl.Expr:
    """HTA's name-only typing (docs/semantics-breakdowns.md, shared rules), quirks included."""
    comm = (
        name.str.starts_with("nccl")
        | name.str.starts_with("hip")
        | name.str.starts_with("hccl")
        | name.str.contains("ncclKernel", literal=True)
    )
    memory = (
        name.str.starts_with("Memcpy")
        | name.str.starts_with("hipMemcpy")
        | name.str.starts_with("Memset")
        | name.str.starts_with("hipMemset")
        | name.str.starts_with("dma")
    )
    not_compute = (
        name.str.starts_with("nccl")
        | name.str.contains("Memcpy", literal=True)
        | name.str.contains("Memset", literal=True)
        | name.str.contains("dma", literal=True)
        | name.str.contains("Sync", literal=True)
        | name.str.starts_with("Stream Wait Event")
        | (name.str.starts_with("cuda") & name.str.contains("LaunchKernel", literal=True))
        | name.str.contains(
            r"^(runFunction|hip|job_exe|packet|pe_exe|cpum_exe_subgraph|hccl|collective_subgraph_execution)"
        )
    )
    return (
        pl.when(comm)
        .then(pl.lit(COMMUNICATION))
        .when(memory)
        .then(pl.lit(MEMORY))
        .when(~not_compute)
        .then(pl.lit(COMPUTATION))
        .otherwise(pl.lit(OTHER))
    )


def merge_intervals(intervals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Union of [ts, end) intervals per group (docs/semantics-breakdowns.md, shared rules): columns by + ts, end.

    A new merged interval starts when an interval starts strictly after the running maximum end
    of the group so far; touching intervals merge.
    """
    if intervals.height == 0:
        return intervals.select(*by, "ts", "end")
    # A stable sort: with HTA's rounding, equal starts with different ends must keep file order.
    ordered = intervals.select(*by, "ts", "end").sort([*by, "ts"], maintain_order=True)
    previous_max_end = pl.col("end").cum_max().shift(1).over(by) if by else pl.col("end").cum_max().shift(1)
    grouped = ordered.with_columns(
        _new=(pl.col("ts") > previous_max_end).fill_null(True),
    ).with_columns(_group=pl.col("_new").cast(pl.Int64).cum_sum())
    return (
        grouped.group_by([*by, "_group"], maintain_order=True)
        .agg(ts=pl.col("ts").min(), end=pl.col("end").max())
        .drop("_group")
    )


def busy_time(intervals: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Σ(merged end − merged start) per group, as column `busy_us`."""
    merged = merge_intervals(intervals, by)
    if not by:
        return pl.DataFrame({"busy_us": [float((merged["end"] - merged["ts"]).sum() or 0.0)]})
    return merged.group_by(by, maintain_order=True).agg(busy_us=(pl.col("end") - pl.col("ts")).sum())


_TEMPLATE_OR_ARGS = r"<[^<>]*>|\([^()]*\)"


def shorten_name(name: str) -> str:
    """HTA's shorten_name: drop '->', balanced <…> and (…) groups, keep the last word."""
    if name.startswith(("Memcpy", "Memset")) or ("<" not in name and "(" not in name):
        return name
    import re

    text = name.replace("->", "")
    previous = None
    while previous != text:
        previous = text
        text = re.sub(_TEMPLATE_OR_ARGS, "", text)
    parts = text.split()
    return parts[-1] if parts else name


def selection_key(traces: TraceSet, options: CommonOptions, *fields: str) -> tuple[Any, ...]:
    """What a derived frame depends on: the chosen ranks, the mode, the step filter, and the named options.

    Used in `memoised` keys, so two calls share a frame only when every option it reads is equal.
    The ranks are those `prepare` reads, in its order: "all ranks" and the same ranks named one by
    one share a frame (on a one-rank job the Ops and Patterns screens kept two copies of the op tree).
    """
    chosen = chosen_ranks(traces, options)
    extra = tuple((name, getattr(options, name)) for name in fields)
    return (tuple(chosen), *_scope_key(options.scope), *extra)


def memoised(traces: TraceSet, key: tuple[Any, ...], compute: Callable[[], _T]) -> _T:
    """`compute()`, kept on the loaded job (`TraceSet.derived`) under `key` and reused by later calls.

    The views' tables of one screen share one derived frame (idle's gaps, launch's pairs, queue's
    series), and it lives and dies with the TraceSet, so another job or a per-rank TraceSet made
    by `rank_by_rank` starts empty. Keys start with the deriving function's name.
    """
    found = traces.derived.get(key, _MISSING)
    if found is _MISSING:
        cancel.check()
        found = compute()
        traces.derived[key] = found
    return found  # type: ignore[no-any-return]


_MISSING = object()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: loops that make millions of small lists and tuples
    (the op tree) otherwise trigger a full collection many times over."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
