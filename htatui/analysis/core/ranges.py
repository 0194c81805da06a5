"""Integer runs as text: [0, 1, 2, 5, 7, 8] → '0-2, 5, 7-8' (ranks and steps in labels and tables)."""

from __future__ import annotations

from collections.abc import Iterable


def format_ranges(values: Iterable[int], separator: str = ", ", empty: str = "none") -> str:
    """Sorted distinct values with consecutive runs folded into 'first-last'; `empty` when there are none."""
    ordered = sorted(set(values))
    if not ordered:
        return empty
    runs: list[str] = []
    start = previous = ordered[0]
    following: list[int | None] = [*ordered[1:], None]
    for value in following:
        if value is not None and value == previous + 1:
            previous = value
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if value is not None:
            start = previous = value
    return separator.join(runs)
