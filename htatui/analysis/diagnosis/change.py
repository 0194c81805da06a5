"""The what-if that models a finding's fix: the step model's `Change` (issue 33's contract), and
how the findings table says it."""

from __future__ import annotations

from htatui.analysis.views.critical_path import Change

__all__ = ["Change", "in_words"]


def in_words(change: Change) -> str:
    """The change as the findings table says it: 'rank 2 at the median's pace', 'name aten::item removed'."""
    where = "" if change.rank is None or change.group == "rank" else f" on rank {change.rank}"
    if change.group == "rank":
        return (
            f"rank {change.key} at the median's pace" if change.to_median else f"rank {change.key} × {change.factor:g}"
        )
    if change.factor == 0:
        return f"{change.group} {change.key} removed{where}"
    return f"{change.group} {change.key} × {change.factor:g}{where}"
