"""The predicted saving of each finding's change: the one place the diagnosis asks the step model.

A saving is the step model's replay of the step with the change (issue 33's `what_if_savings`);
until that replay is in this branch every change is "not modelled" (None), ranked after the
modelled ones by the most it could save.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from htatui.analysis.core.scope import Scope
from htatui.analysis.diagnosis.change import Change
from htatui.trace.model import TraceSet


@dataclass(frozen=True)
class Predicted:
    """The replay's step with and without the change."""

    step_us: float
    saved_us: float
    saved_pct: float


def predicted_savings(traces: TraceSet, scope: Scope, changes: Sequence[Change]) -> list[Predicted | None]:
    """Each change's saving from one replay of the scope's steps (None where it is not modelled)."""
    return [None for _ in changes]


def step_bounds(traces: TraceSet, scope: Scope) -> str | None:
    """What bounds the scope's step, in one line, from the step model's summary (None: not modelled)."""
    return None
