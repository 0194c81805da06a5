"""Labels for the header: which ranks are chosen and which profiler steps the numbers use."""

from __future__ import annotations

from htatui.analysis.common import CommonOptions, prepare
from htatui.analysis.ranges import format_ranges
from htatui.analysis.stored import stored_steps_used
from htatui.trace import TraceSet


def steps_in_use(traces: TraceSet, options: CommonOptions) -> dict[int, list[int]]:
    """The ProfilerSteps each chosen rank's numbers cover: the steps `prepare` keeps for the views."""
    stored = stored_steps_used(traces, options)
    # One column: the header needs the steps, not a filtered copy of every event.
    return stored if stored is not None else prepare(traces, options, columns=("rank",)).steps_used


def steps_label(used: dict[int, list[int]]) -> str:
    """'3-4', 'none (whole trace)', or '3-4 (varies by rank)'."""
    step_sets = {tuple(steps) for steps in used.values()}
    every = sorted({step for steps in used.values() for step in steps})
    if not every:
        return "none (whole trace)"
    label = format_ranges(every, separator=",")
    return label if len(step_sets) == 1 else f"{label} (varies by rank)"
