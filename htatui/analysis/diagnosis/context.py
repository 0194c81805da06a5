"""What every rule reads: registered tables (through the registry's reader), the scope's step
times, each rank's GPU busy time, and the rule thresholds."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from htatui.analysis.core.intervals import merge_intervals
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.prepare import chosen_ranks
from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.scope import Scope
from htatui.analysis.diagnosis.common import ranks_text
from htatui.analysis.diagnosis.facts import RankFacts, job_facts
from htatui.analysis.diagnosis.settings import Settings
from htatui.trace.model import TraceSet

TableReader = Callable[[str, str, Scope, Mapping[str, Any]], NotedTable]
"""A registered table as `report` makes it: (view, table, scope, knobs) → `report --view VIEW --TABLE`."""


@dataclass
class Context:
    """One diagnosis: the job, its scope, the table reader and the thresholds; what the rules share
    is made once here."""

    traces: TraceSet
    scope: Scope
    reader: TableReader
    settings: Settings
    _tables: dict[tuple[str, str, tuple[tuple[str, Any], ...]], pl.DataFrame] = field(default_factory=dict)
    _facts: dict[int, RankFacts] | None = None

    # ---- registered tables ---------------------------------------------------------------
    def read(self, view: str, table: str = "main", **knobs: Any) -> pl.DataFrame:
        """A registered table over the scope (`report --view VIEW [--TABLE]` with `knobs` as flags)."""
        key = (view, table, tuple(sorted(knobs.items())))
        if key not in self._tables:
            self._tables[key] = self.reader(view, table, self.scope, knobs).frame
        return self._tables[key]

    # ---- steps ---------------------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        return chosen_ranks(self.traces, CommonOptions(self.scope))

    def steps(self) -> pl.DataFrame:
        """rank, step, dur_us of each rank's used steps; a rank without steps has one row, its GPU
        span (null step), so every share has a step to be a share of."""
        used = self.read("steps").filter(pl.col("used")).select("rank", "step", "dur_us")
        stepless = [rank for rank in self.ranks if rank not in set(used["rank"].to_list())]
        if not stepless:
            return used
        spans = self.read("temporal").filter(pl.col("rank").is_in(stepless))
        whole = spans.select("rank", step=pl.lit(None, pl.Int64), dur_us="span_us")
        return pl.concat([used, whole], how="vertical_relaxed")

    def step_count(self, rank: int) -> int:
        return max(1, self.steps().filter(pl.col("rank") == rank).height)

    def step_us(self) -> float:
        """The mean step of the scope: each rank's mean step, averaged over the ranks."""
        means = self.steps().group_by("rank").agg(pl.col("dur_us").mean())["dur_us"]
        return float(means.mean()) if means.len() else 0.0  # type: ignore[arg-type]

    def per_step(self, total_us: float, rank: int) -> float:
        """A rank's total over the scope's steps, per step."""
        return total_us / self.step_count(rank)

    def pct(self, per_step_us: float) -> float:
        """A time per step as a share of the mean step."""
        step = self.step_us()
        return 100.0 * per_step_us / step if step > 0 else 0.0

    def steps_text(self, rank: int | None = None) -> str:
        """'steps 10-13' (the rank's used steps, or every rank's); '' without steps."""
        frame = self.steps() if rank is None else self.steps().filter(pl.col("rank") == rank)
        numbers = sorted({int(s) for s in frame["step"].drop_nulls().to_list()})
        if not numbers:
            return ""
        return f"step{'s' if len(numbers) > 1 else ''} {format_ranges(numbers, separator=',')}"

    def where(self, ranks: list[int], rank: int, *parts: str) -> str:
        """'rank 0 (of ranks 0-1) · steps 1-2 · cudaStreamSynchronize': the rank shown, the others
        the finding holds on, the rank's steps, then `parts` (empty ones left out)."""
        return " · ".join(part for part in (ranks_text(ranks, rank), self.steps_text(rank), *parts) if part)

    # ---- events --------------------------------------------------------------------------
    def facts(self, rank: int) -> RankFacts:
        """The rank's extracts of its events (every rank's made in one pass, a rank at a time)."""
        if self._facts is None:
            self._facts = job_facts(self.traces, CommonOptions(self.scope), self.settings)
        return self._facts[rank]

    def gpu_busy(self, rank: int) -> pl.DataFrame:
        """The rank's GPU busy intervals (ts, end): the union of its kernels, copies and memsets."""
        return self.facts(rank).busy

    def idle_after(self, rank: int, times: pl.Series) -> pl.Series:
        """For each time: how long the GPU stayed idle from then until its next work started (0 when
        it was busy then; the time to the last work's end is not counted past it)."""
        busy = self.gpu_busy(rank)
        if busy.height == 0 or times.len() == 0:
            return pl.Series([0.0] * times.len(), dtype=pl.Float64)
        starts = busy["ts"].to_numpy()
        ends = busy["end"].to_numpy()
        at = times.to_numpy()
        # The busy interval that starts last at or before each time, and the next one after it.
        before = np.searchsorted(starts, at, side="right") - 1
        inside = (before >= 0) & (ends[np.clip(before, 0, None)] > at)
        following = before + 1
        has_next = following < len(starts)
        gap = np.where(has_next, starts[np.clip(following, 0, len(starts) - 1)] - at, 0.0)
        return pl.Series(np.where(inside, 0.0, np.maximum(gap, 0.0)), dtype=pl.Float64)

    def loader_spans(self, rank: int) -> pl.DataFrame:
        """ts, end of the rank's data-loading ranges (the data_loader rule's names): the GPU idle
        inside them is that rule's, not the sync or step-edge rules'."""
        return self.facts(rank).loading.select("ts", "end")

    def idle_before(self, rank: int, starts: pl.Series) -> pl.Series:
        """For each start of GPU work: how long the GPU was idle just before it (0 when other work ran
        up to it; the first work of the trace has no idle before it)."""
        busy = self.gpu_busy(rank)
        if busy.height == 0 or starts.len() == 0:
            return pl.Series([0.0] * starts.len(), dtype=pl.Float64)
        begin, ends = busy["ts"].to_numpy(), busy["end"].to_numpy()
        at = starts.to_numpy()
        # The merged interval holding each start: it opens there unless other work ran into it.
        index = np.searchsorted(begin, at, side="right") - 1
        opens = (index >= 1) & (begin[np.clip(index, 0, None)] == at)
        gap = at - ends[np.clip(index - 1, 0, None)]
        return pl.Series(np.where(opens, np.maximum(gap, 0.0), 0.0), dtype=pl.Float64)

    def idle_within(self, rank: int, spans: pl.DataFrame) -> float:
        """How long the GPU was idle inside the spans (ts, end; merged first)."""
        if spans.height == 0:
            return 0.0
        merged = merge_intervals(spans.select("ts", "end"), [])
        total = float((merged["end"] - merged["ts"]).sum())
        busy = self.gpu_busy(rank)
        if busy.height == 0:
            return total
        covered = _busy_until(busy, merged["end"].to_numpy()) - _busy_until(busy, merged["ts"].to_numpy())
        return total - float(covered.sum())


def without(spans: pl.DataFrame, holes: pl.DataFrame) -> pl.DataFrame:
    """`spans` (ts, end) with the time of `holes` (ts, end) taken out of them."""
    if spans.height == 0 or holes.height == 0:
        return spans.select("ts", "end")
    merged = Holes(holes)
    out = [piece for ts, end in spans.select("ts", "end").iter_rows() for piece in merged.pieces(ts, end)]
    return pl.DataFrame(out, schema={"ts": pl.Float64(), "end": pl.Float64()}, orient="row")


class Holes:
    """Spans (ts, end) merged once, to take out of other spans (`without`) or to measure the time
    of a span outside them: a rule asks it once a step, so each ask looks only at the holes near."""

    def __init__(self, holes: pl.DataFrame) -> None:
        merged = merge_intervals(holes.select("ts", "end"), []).sort("ts") if holes.height else holes
        self.starts: list[float] = merged["ts"].to_list()
        self.ends: list[float] = merged["end"].to_list()

    def pieces(self, ts: float, end: float) -> list[tuple[float, float]]:
        """[ts, end) less the holes, in time order (nothing when it is empty or inside a hole)."""
        out: list[tuple[float, float]] = []
        cursor = ts
        # The holes are disjoint and sorted, so their ends rise: those ending by ts touch nothing.
        for at in range(bisect.bisect_right(self.ends, ts), len(self.starts)):
            hole_start, hole_end = self.starts[at], self.ends[at]
            if hole_start >= end:
                break
            if hole_end <= cursor:
                continue
            if hole_start > cursor:
                out.append((cursor, hole_start))
            cursor = max(cursor, hole_end)
        if cursor < end:
            out.append((cursor, end))
        return out

    def length_outside(self, ts: float, end: float) -> float:
        """The time of [ts, end) outside the holes, summed as a frame of `without`'s pieces sums
        (the whole span when there are no holes, as `without` keeps it)."""
        if not self.starts:
            return end - ts
        lengths = [stop - start for start, stop in self.pieces(ts, end)]
        return float(pl.Series(lengths, dtype=pl.Float64).sum()) if len(lengths) > 1 else sum(lengths, 0.0)


def _busy_until(busy: pl.DataFrame, times: np.ndarray) -> np.ndarray:
    """For each time t: the busy time of the sorted, disjoint intervals `busy` before t."""
    starts, ends = busy["ts"].to_numpy(), busy["end"].to_numpy()
    before = np.concatenate([[0.0], np.cumsum(ends - starts)])
    index = np.searchsorted(starts, times, side="right") - 1
    last = np.clip(index, 0, None)
    partial = np.clip(np.minimum(times, ends[last]) - starts[last], 0.0, None)
    return np.where(index >= 0, before[last] + partial, 0.0)
