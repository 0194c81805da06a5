"""The predicted saving of each finding's change: the one place the diagnosis asks the step model.

A saving is the step model's replay of the scope's steps with the change (`what_if_savings`,
issue 33): `saved_pct` is its share of the replayed step, `saved_us` the saving per step (the
replay's over the scope's steps ÷ their number).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from htatui.analysis.core.prepare import chosen_ranks
from htatui.analysis.core.scope import Scope
from htatui.analysis.diagnosis.change import Change
from htatui.analysis.views.critical_path import CriticalPathOptions, step_summary, what_if_savings
from htatui.trace.model import TraceSet

BOUND_TYPES_SHOWN = 2
"""How many bound types the step line names."""


@dataclass(frozen=True)
class Predicted:
    """What the replay says a change saves, per step and as a share of the step."""

    saved_us: float
    saved_pct: float


@contextmanager
def dropped_again(traces: TraceSet, scope: Scope) -> Iterator[None]:
    """Ranks of a dataset the step model reads are dropped again after (the graph keeps what it
    needs), as `each_rank` drops them: the Diagnosis page opens a 256-rank dataset too."""
    options = CriticalPathOptions(scope=scope)
    unread = [rank for rank in chosen_ranks(traces, options) if not traces.ranks[rank].loaded]
    try:
        yield
    finally:
        if len(unread) >= 2:
            for rank in unread:
                traces.ranks[rank].unload()


def predicted_savings(traces: TraceSet, scope: Scope, changes: Sequence[Change], steps: int) -> list[Predicted | None]:
    """Each change's saving from one replay of the scope's `steps` steps (None where no graph replays them)."""
    if not changes:
        return []
    with dropped_again(traces, scope):
        savings = what_if_savings(traces, CriticalPathOptions(scope=scope), list(changes))
    return [
        Predicted(saving.saved_us / max(steps, 1), saving.saved_pct) if saving.replay_us > 0 else None
        for saving in savings
    ]


def step_bounds(traces: TraceSet, scope: Scope) -> str | None:
    """What bounds the scope's step, in one line, from the step model's summary (None: no graph)."""
    with dropped_again(traces, scope):
        summary = step_summary(traces, CriticalPathOptions(scope=scope))
    if summary.step_us <= 0 or summary.bound_by.height == 0:
        return None
    top = summary.bound_by.head(BOUND_TYPES_SHOWN)
    shares = ", ".join(f"{bound} {pct:.0f} %" for bound, pct in top.select("bound_by", "pct").iter_rows())
    return f"{shares} (path {summary.coverage_pct:.0f} % of the step)"
