"""A rank's headline figures (`info`'s columns and the dataset summary's): span, kernels, streams, steps.

Computed in one select over the few columns they read (`trace.figures.file_figures`): filtering a
whole event frame first copies all of its columns, which on a 2 M-event rank was ~400 MB more peak
memory than the frame itself. A cached rank keeps that row in its cache entry (`stored_figures`),
so its figures are had without reading its events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from htatui.trace.figures import file_figures
from htatui.trace.model import RankTrace


@dataclass(frozen=True)
class RankFigures:
    span_us: float
    """Last end minus first start over complete ("X") events; 0 when there are none."""
    kernels: int
    streams: int
    """Streams that carry GPU activity (kernels, memcpy, memset)."""
    memory_events: int
    iterations: list[int]
    """The step numbers present, ascending."""
    events: int = 0
    """Rows of the rank's event frame."""
    step_source: str | None = None
    """Where the steps come from (`step_sources.StepSource.label`); None without steps."""
    graph_launches: int = 0
    """CUDA/HIP graph launches (cudaGraphLaunch, hipGraphLaunch)."""
    graph_kernels: int = 0
    """Device rows those graph launches replayed (they share the launch's correlation id)."""


def rank_figures(events: pl.DataFrame) -> RankFigures:
    return figures_of(file_figures(events).row(0, named=True), 0.0)


def figures_of(row: dict[str, Any], shift_us: float) -> RankFigures:
    """A `file_figures` row of a file's events as the figures of those events shifted by `shift_us`:
    the shift is added to the first start and last end before they are subtracted, as it is to
    every event's `ts` and `end` when a rank is aligned, so the span is the aligned frame's to the bit."""
    start, end = row["first_start_us"], row["last_end_us"]
    span = _shifted(end, shift_us) - _shifted(start, shift_us) if start is not None else 0.0
    return RankFigures(
        span,
        int(row["kernels"]),
        int(row["streams"]),
        int(row["memory_events"]),
        list(row["iterations"]),
        int(row["events"]),
        row.get("step_source"),
        int(row.get("graph_launches") or 0),
        int(row.get("graph_kernels") or 0),
    )


def stored_figures(trace: RankTrace) -> RankFigures | None:
    """The rank's figures as its cache entry keeps them (its events unread), or None when none are kept."""
    row = trace.stored_figures()
    return figures_of(row.row(0, named=True), trace.shift_us) if row is not None else None


def trace_figures(trace: RankTrace) -> RankFigures:
    """The rank's figures: kept ones when its cache entry has them, else made from its events."""
    return stored_figures(trace) or rank_figures(trace.events)


def _shifted(value: object, shift_us: float) -> float:
    return float(value) + shift_us if isinstance(value, (int, float)) else 0.0
