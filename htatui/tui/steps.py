"""Labels for the header: which ranks are chosen and which profiler steps the numbers use."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from htatui.analysis.common import CommonOptions, filter_last_step
from htatui.trace import TraceSet
from htatui.trace.frame import PROFILER_STEP


def steps_in_use(traces: TraceSet, options: CommonOptions) -> dict[int, list[int]]:
    """The ProfilerSteps each chosen rank's numbers cover, after the analyses' last-step rule."""
    chosen = traces.rank_ids if options.ranks is None else [r for r in options.ranks if r in traces.ranks]
    used: dict[int, list[int]] = {}
    for rank in chosen:
        events = traces.ranks[rank].events
        step_rows = events.filter(
            (pl.col("ph") == "X") & pl.col("name").cast(pl.Utf8).str.contains(PROFILER_STEP.pattern)
        )
        _kept, steps = filter_last_step(
            step_rows, include_last_step=options.include_last_step, hta_compat=options.hta_compat
        )
        used[rank] = steps
    return used


def format_ranks(values: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] → '0-2,5,7-8'."""
    ordered = sorted(set(values))
    if not ordered:
        return "none"
    runs: list[str] = []
    start = previous = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if value is not None:
            start = previous = value
    return ",".join(runs)


def steps_label(used: dict[int, list[int]]) -> str:
    """'3-4', 'none (whole trace)', or '3-4 (varies by rank)'."""
    step_sets = {tuple(steps) for steps in used.values()}
    every = sorted({step for steps in used.values() for step in steps})
    if not every:
        return "none (whole trace)"
    label = format_ranks(every)
    return label if len(step_sets) == 1 else f"{label} (varies by rank)"
