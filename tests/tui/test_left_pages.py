"""A page that is left drops the large frames its analysis derived on the job, and still shows its tables."""

from __future__ import annotations

import pytest
from tui_helpers import make_app, press, ready

from htatui.analysis.core.scope import Scope
from htatui.analysis.registry import frame_of
from htatui.analysis.views import ops
from htatui.trace import TraceSet
from htatui.tui.screens import base
from htatui.tui.screens.ops import OpsScreen
from htatui.tui.screens.timeline import TimelineScreen
from htatui.tui.widgets.table_pane import TablePane


def tree_keys(traces: TraceSet) -> list[object]:
    return [key for key in traces.derived if isinstance(key, tuple) and key[0] == "ops.tree"]


async def test_leaving_ops_drops_its_op_tree_and_coming_back_shows_the_same_rows(
    small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = TraceSet(ranks=small_traces.ranks)  # a job of its own: nothing derived yet
    monkeypatch.setattr(base, "KEEP_DERIVED_BYTES", 0)  # every value counts as large here
    expected = frame_of(ops.compute(TraceSet(ranks=small_traces.ranks), ops.OpsOptions(Scope())))[0].to_dicts()
    app = make_app(traces)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        await press(pilot, "7")
        screen = app.screen
        assert isinstance(screen, OpsScreen) and tree_keys(traces)
        pane = screen.query_one("#ops-main", TablePane)
        assert pane.table.source is not None and pane.table.source.to_dicts() == expected
        await press(pilot, "1")
        assert tree_keys(traces) == []  # the page's op tree went with it
        await press(pilot, "7")
        assert app.screen is screen and pane.table.source is not None and pane.table.source.to_dicts() == expected
        await press(pilot, "r")  # made again from the events: the same table
        assert tree_keys(traces) and pane.table.source is not None and pane.table.source.to_dicts() == expected


BOTH_INDEXES = [("timeline.index", 0), ("timeline.index", 1)]
"""The small job's two ranks: the timeline shows every chosen rank."""


def index_keys(traces: TraceSet) -> list[object]:
    # Each key ends with its rules and the code it was made with (`core.kept.code_digest`): left out here.
    return [key[:2] for key in traces.derived if isinstance(key, tuple) and key[0] == "timeline.index"]


async def test_leaving_the_timeline_drops_its_index_and_opening_it_again_draws_the_same(
    small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = TraceSet(ranks=small_traces.ranks)
    monkeypatch.setattr(base, "KEEP_DERIVED_BYTES", 0)
    app = make_app(traces)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await press(pilot, "t")
        screen = app.screen
        assert isinstance(screen, TimelineScreen) and index_keys(traces) == BOTH_INDEXES
        drawn = screen.draw(96, 20).plain
        await press(pilot, "escape")
        assert not isinstance(app.screen, TimelineScreen)
        assert index_keys(traces) == []  # the index went with the timeline
        await press(pilot, "t")
        again = app.screen
        assert isinstance(again, TimelineScreen) and index_keys(traces) == BOTH_INDEXES
        assert again.draw(96, 20).plain == drawn


async def test_a_closed_timeline_holds_no_index_and_no_subscription(small_traces: TraceSet) -> None:
    # A closed screen may outlive its close (a finished worker still names it); it must not keep
    # the rank's index alive, and the scope's signal must not keep the screen.
    traces = TraceSet(ranks=small_traces.ranks)
    app = make_app(traces)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await press(pilot, "t")
        screen = app.screen
        assert isinstance(screen, TimelineScreen) and screen.data is not None and screen.rows
        signal = screen.hta.scope_signal
        assert screen in dict(signal._subscriptions)
        await press(pilot, "escape")
        assert not isinstance(app.screen, TimelineScreen)
        assert screen.data is None and screen.rows == []
        assert screen not in dict(signal._subscriptions)
