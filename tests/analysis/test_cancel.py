"""Esc reaches the analysis: with the cancel event set, work stops at the next stage with `Cancelled`."""

from __future__ import annotations

import threading

import pytest

from htatui.analysis.core.cancel import Cancelled, cancellable, check
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import each_rank, prepare
from htatui.analysis.registry import PAGES, make_page_tables, view
from htatui.trace import TraceSet


def test_check_raises_only_once_the_event_is_set() -> None:
    check()  # outside any analysis: nothing to cancel
    event = threading.Event()
    with cancellable(event):
        check()
        event.set()
        with pytest.raises(Cancelled):
            check()
    check()  # the block's event is gone with the block


def test_a_cancelled_analysis_stops_before_the_next_rank(small: TraceSet) -> None:
    event = threading.Event()
    built: list[int] = []

    def build(part: TraceSet, _options: CommonOptions) -> int:
        (rank,) = part.rank_ids
        built.append(rank)
        event.set()  # the user presses Esc while the first rank is built
        return rank

    with cancellable(event), pytest.raises(Cancelled):
        each_rank(small, CommonOptions(), build)
    assert built == [0]
    with cancellable(event), pytest.raises(Cancelled):
        prepare(TraceSet(ranks=small.ranks), CommonOptions())


def test_a_cancelled_page_makes_no_more_tables(small: TraceSet) -> None:
    page = next(p for p in PAGES if p.id == "launch")
    options = {view_id: view(view_id).options() for view_id in page.views}
    event = threading.Event()
    event.set()
    with cancellable(event), pytest.raises(Cancelled):
        make_page_tables(TraceSet(ranks=small.ranks), page.tables, options)
    # Not cancelled, the same call makes every table of the page.
    assert len(make_page_tables(TraceSet(ranks=small.ranks), page.tables, options)) == len(page.tables)
