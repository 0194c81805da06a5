"""The what-if that models a finding's fix, as the step model's replay takes it.

`Change` has the fields of the step model's `critical_path.Change` (issue 33's contract: group,
key, factor, rank, to_median); `saving.py` hands a finding's change to the replay.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """One what-if, as a user thinks of it: every node of a `group` ("name", "annotation", "rank",
    "bound_by") matching `key`, its duration × `factor` (0 removes it), on `rank` alone when
    given; `to_median` (group "rank"): that rank at the median rank's pace, phase by phase."""

    group: str
    key: str
    factor: float = 0.5
    rank: int | None = None
    to_median: bool = False


def in_words(change: Change) -> str:
    """The change as the findings table says it: 'rank 2 at the median's pace', 'aten::item × 0'."""
    where = "" if change.rank is None or change.group == "rank" else f" on rank {change.rank}"
    if change.group == "rank":
        return (
            f"rank {change.key} at the median's pace" if change.to_median else f"rank {change.key} × {change.factor:g}"
        )
    if change.factor == 0:
        return f"{change.group} {change.key} removed{where}"
    return f"{change.group} {change.key} × {change.factor:g}{where}"
