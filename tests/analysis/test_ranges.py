"""Integer runs as text, as labels and tables print ranks and steps."""

from __future__ import annotations

from htatui.analysis.core.ranges import format_ranges


def test_runs_fold_and_order_does_not_matter() -> None:
    assert format_ranges([8, 0, 1, 2, 5, 7, 2]) == "0-2, 5, 7-8"
    assert format_ranges([3], separator=",") == "3"
    assert format_ranges([4, 5], separator=",") == "4-5"


def test_empty_says_so() -> None:
    assert format_ranges([]) == "none"
    assert format_ranges([], empty="") == ""
