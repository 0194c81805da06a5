"""The critical-path view in default mode: the step model's path, its summary and its what-ifs.

The API the diagnosis builds on (docs/semantics-critical-path.md, "API for diagnosis"):
`step_summary` (what bounds the step, with the path's coverage and the replay) and
`what_if_savings` (the step time a `Change` saves, by replaying the graph with it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.core.prepare import chosen_ranks, rank_steps_of
from htatui.analysis.model.step import changes
from htatui.analysis.model.step.assemble import StepGraph
from htatui.analysis.model.step.graph import BOUND_TYPES, EDGE_NAMES, UNEXPLAINED_WAIT, Kind
from htatui.analysis.model.step.replay import path_edges, replay_step_us
from htatui.analysis.views import ranks as ranks_view
from htatui.analysis.views.critical_path.columns import PATH_SPEC, SUMMARY_SPEC
from htatui.analysis.views.critical_path.options import CriticalPathOptions
from htatui.analysis.views.critical_path.path import summarise
from htatui.analysis.views.critical_path.step_graphs import Built, scope_graph
from htatui.analysis.views.ranks.phases import GPU_COMPUTE, OTHER_CPU_OPS, phase_excess
from htatui.trace.model import TraceSet

GROUPS = ("name", "annotation", "rank", "bound_by")

DETAIL_PHASES = 3
"""How many of a rank's slow phases a to-median saving names (largest excess first)."""


@dataclass(frozen=True)
class Change:
    """One what-if, as a user thinks of it.

    `group`: "name" (every instance of an op or kernel), "annotation" (a phase: the time inside a
    range and the device work launched from it), "rank" (all of a rank's work) or "bound_by" (a
    bound type; "communication" for both kinds). `key`: the name, annotation, rank number as text
    or bound type. Each matching edge's weight × `factor` (0 removes it); `rank` limits it to one
    rank's edges; `to_median` (group "rank"): that rank at the other ranks' median pace, phase by
    phase (the Ranks page's phases), `factor` ignored.
    """

    group: str
    key: str
    factor: float = 0.5
    rank: int | None = None
    to_median: bool = False


@dataclass(frozen=True)
class Saving:
    """What a change saves: the measured step, its replay, the replay with the change, the
    difference (µs and % of the replay), and what was scaled (`detail`, e.g. a rank's phases)."""

    change: Change
    step_us: float
    replay_us: float
    replay_if_us: float
    saved_us: float
    saved_pct: float
    detail: str = ""


@dataclass(frozen=True)
class StepSummary:
    """What bounds the step, in one line: the measured step (the chosen steps' span; the job's:
    from its first rank's start to its last rank's end), its replay, the path's length and its
    share of the step, the share of the path nothing in the trace explains, and the path's time by
    bound type (bound_by, time_us, pct)."""

    step_us: float
    replay_us: float
    path_us: float
    coverage_pct: float
    unexplained_pct: float
    bound_by: pl.DataFrame
    ranks: tuple[int, ...] = ()
    message: str | None = None

    def line(self) -> str:
        """'path 160.2 ms of a 162.5 ms step (98.6 %) · replay 162.5 ms · unexplained 1.2 %'."""
        if self.step_us <= 0:
            return self.message or "no step"
        return (
            f"path {self.path_us / 1000:,.1f} ms of a {self.step_us / 1000:,.1f} ms step ({self.coverage_pct:.1f} %)"
            f" · replay {self.replay_us / 1000:,.1f} ms · unexplained {self.unexplained_pct:.1f} %"
        )


PATH_SCHEMA = PATH_SPEC.schema
SUMMARY_SCHEMA = SUMMARY_SPEC.schema


def path_frame(g: StepGraph) -> pl.DataFrame:
    """The path's edges in time order (PATH_SCHEMA): the event charged, the edge's kind, its span
    on the step (the first one clipped at the window's start) and its bound type."""
    found = g.cache.get("path_frame")
    if isinstance(found, pl.DataFrame):
        return found
    made = _path_frame(g)
    g.cache["path_frame"] = made
    return made


def _path_frame(g: StepGraph) -> pl.DataFrame:
    e = path_edges(g)
    if len(e) == 0:
        return pl.DataFrame(schema=PATH_SCHEMA)
    start = np.maximum(g.time[g.src[e]], g.low_us)
    end = g.time[g.dst[e]]
    charged = g.charged[e]
    has = charged >= 0
    at = np.maximum(charged, 0)
    row_rank = g.rows["rank"].to_numpy()
    edge_rank = changes.edge_ranks(g)[e]
    charged_rows = g.rows.select("name", "index")[at].select(
        # A row without a name reads "None", as str() wrote it when the names were a list.
        name=pl.when(pl.Series(has)).then(pl.col("name").cast(pl.Utf8).fill_null("None")),
        index=pl.when(pl.Series(has)).then(pl.col("index")),
    )
    bound = g.bound[e]
    return pl.DataFrame(
        {
            "rank": np.where(has, row_rank[at], edge_rank),
            "step": np.arange(len(e), dtype=np.int64),
            "name": charged_rows["name"],
            "edge_type": pl.Series(EDGE_NAMES, dtype=pl.Utf8).gather(g.kind[e]),
            "start_us": start,
            "end_us": end,
            "duration_us": end - start,
            "bound_by": pl.Series([*BOUND_TYPES, ""], dtype=pl.Utf8).gather(
                np.where(bound >= 0, bound, len(BOUND_TYPES))
            ),
            "index": charged_rows["index"],
        },
        schema=PATH_SCHEMA,
    )


def summary_of(built: Built, ranks: tuple[int, ...]) -> StepSummary:
    """`StepSummary` of a built graph."""
    g = built.graph
    empty = pl.DataFrame(schema=SUMMARY_SCHEMA)
    if g is None:
        return StepSummary(0.0, 0.0, 0.0, 0.0, 0.0, empty, ranks, built.message)
    path = path_frame(g)
    path_us = float(path["duration_us"].sum())
    step_us = g.step_us
    unexplained = float(path.filter(pl.col("bound_by") == UNEXPLAINED_WAIT)["duration_us"].sum())
    return StepSummary(
        step_us=step_us,
        replay_us=replay_step_us(g),
        path_us=path_us,
        coverage_pct=100.0 * path_us / step_us if step_us > 0 else 0.0,
        unexplained_pct=100.0 * unexplained / path_us if path_us > 0 else 0.0,
        bound_by=summarise(path),
        ranks=ranks,
        message=built.message,
    )


def step_summary(traces: TraceSet, options: CriticalPathOptions) -> StepSummary:
    """What bounds the scope's step: the job's graph when two or more ranks are chosen, else the rank's."""
    return summary_of(scope_graph(traces, options), tuple(chosen_ranks(traces, options)))


def what_if_savings(traces: TraceSet, options: CriticalPathOptions, wanted: Sequence[Change]) -> list[Saving]:
    """Each change's saving on the scope's step graph (the job's when two or more ranks are chosen)."""
    built = scope_graph(traces, options)
    return savings_of(built.graph, traces, options, wanted)


def savings_of(
    g: StepGraph | None, traces: TraceSet, options: CriticalPathOptions, wanted: Sequence[Change]
) -> list[Saving]:
    """Each change replayed on `g`, an equal change once. A change that only shortens edges off
    the path saves nothing (the path keeps its length, every other chain only gets shorter): it
    is not replayed."""
    if g is None:
        return [Saving(change, 0.0, 0.0, 0.0, 0.0, 0.0, "no step graph") for change in wanted]
    base = replay_step_us(g)
    on_path = np.zeros(len(g.src), dtype=bool)
    on_path[path_edges(g)] = True
    found: dict[Change, Saving] = {}
    for change in wanted:
        if change in found:
            continue
        weight, detail = changed_weights(g, traces, options, change)
        changed = weight != g.weight
        off_path = not (changed & on_path).any() and bool((weight <= g.weight).all())
        after = base if off_path else replay_step_us(g, weight)
        saved = base - after
        found[change] = Saving(change, g.step_us, base, after, saved, 100.0 * saved / base if base > 0 else 0.0, detail)
    return [found[change] for change in wanted]


def changed_weights(
    g: StepGraph, traces: TraceSet, options: CriticalPathOptions, change: Change
) -> tuple[np.ndarray, str]:
    """The graph's weights with `change` applied, and what it scaled."""
    if change.group not in GROUPS:
        raise ValueError(f"what-if group {change.group!r} is not one of {', '.join(GROUPS)}")
    rank = change.rank
    if change.group == "rank":
        rank = int(change.key)
        if change.to_median:
            return median_pace(g, traces, options, rank)
        mask = changes.work(g) & changes.by_rank(g, rank)
    elif change.group == "name":
        named = changes.named_rows(g, change.key)
        on_device = g.rows["on_device"].to_numpy()
        mask = changes.work(g, with_transfer=True) & changes.charged_to(g, named & on_device)
        mask |= changes.inside(g, named & ~on_device, with_device=False)
        mask &= changes.by_rank(g, rank)
    elif change.group == "annotation":
        named = changes.named_rows(g, change.key) & ~g.rows["on_device"].to_numpy()
        mask = changes.inside(g, named, with_device=True) & changes.by_rank(g, rank)
    else:
        mask = changes.by_bound(g, change.key) & changes.by_rank(g, rank)
    return changes.scaled(g.weight, mask, change.factor), f"{int(mask.sum())} edges × {change.factor:g}"


def median_pace(g: StepGraph, traces: TraceSet, options: CriticalPathOptions, rank: int) -> tuple[np.ndarray, str]:
    """The weights with `rank` at the other ranks' median pace, phase by phase: each phase the
    Ranks page finds longer on it than the others' median (its CPU phases on the step's thread,
    its GPU compute) scaled down to that median."""
    factors = phase_factors(traces, options, rank)
    weight = g.weight
    done: list[str] = []
    on_device = g.rows["on_device"].to_numpy()
    compute = on_device & ~g.rows["comm"].to_numpy() & (g.rows["cat"] == "kernel").to_numpy()
    mine = changes.by_rank(g, rank)
    for phase, factor in factors:
        if phase == GPU_COMPUTE:
            mask = (g.kind == Kind.KERNEL) & changes.charged_to(g, compute) & mine
        else:
            named = changes.named_rows(g, phase) & ~on_device
            mask = changes.inside(g, named, with_device=False) & mine
        if mask.any():
            weight = changes.scaled(weight, mask, factor)
            done.append(f"{phase} ×{factor:.2f}")
    # The phases by excess, largest first; the first few say what the rank is slow at.
    shown = "; ".join(done[:DETAIL_PHASES]) + (
        f"; +{len(done) - DETAIL_PHASES} more" if len(done) > DETAIL_PHASES else ""
    )
    return weight, shown or "no phase slower than the median"


def phase_factors(traces: TraceSet, options: CriticalPathOptions, rank: int) -> list[tuple[str, float]]:
    """(phase, others' median ÷ the rank's) for each phase the rank spends longer in than the
    other ranks' median, over the chosen steps (the Ranks page's `phase_excess`)."""
    result = ranks_view.analyse(traces, ranks_view.RanksOptions(scope=options.scope))
    steps = sorted(rank_steps_of(traces, rank, options.scope).used)
    if result.phases.height == 0 or not steps:
        return []
    excess = phase_excess(result.phases, rank, steps).filter(
        (pl.col("excess_us") > 0) & (pl.col("rank_us") > 0) & (pl.col("phase") != OTHER_CPU_OPS)
    )
    excess = excess.filter(~pl.col("phase").str.starts_with("kernel "))
    return [
        (str(phase), float(median) / float(own))
        for phase, own, median in excess.select("phase", "rank_us", "others_median_us").iter_rows()
        # A phase the other ranks do not have is named differently there, not faster.
        if median is not None and median > 0
    ]
