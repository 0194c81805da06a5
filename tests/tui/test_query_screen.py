"""`:query` in the app: SQL over the job's tables for the app's scope, the result as a table (issue 38)."""

from __future__ import annotations

from typing import Any

import polars as pl
from textual.widgets import Input, Label
from tui_helpers import make_app, press, ready

from htatui.analysis.query import run_query
from htatui.trace import TraceSet
from htatui.tui.commands import HtaCommands
from htatui.tui.run import settle
from htatui.tui.screens.query import QueryScreen
from htatui.tui.widgets.table_pane import TablePane


async def _query(pilot: Any, sql: str) -> None:
    field = pilot.app.screen.query_one("#sql", Input)
    field.value = sql
    await press(pilot, "enter")
    for _ in range(200):
        if not pilot.app.screen.job_running("query"):
            break
        await pilot.pause(0.05)
    await settle(pilot)


async def test_the_palettes_query_entry_shows_the_result_as_a_table(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        provider = HtaCommands(app.screen)
        entry = next(e for e in provider.entries() if e.title == "app: query with SQL…")
        entry.callback()
        await settle(pilot)
        assert isinstance(app.screen, QueryScreen)
        sql = "SELECT rank, COUNT(*) AS n, SUM(dur_us) AS dur_us FROM kernels GROUP BY rank ORDER BY rank"
        await _query(pilot, sql)
        table = app.screen.query_one("#result", TablePane).table
        expected = run_query(small_traces, sql, app.scope())
        assert table.source.equals(expected) and expected.height == len(small_traces.ranks)
        labels = [column.label for column in table.columns_spec]
        assert labels == ["rank", "n", "dur µs"]  # dur_us keeps the kernels table's label
        assert "rows" in str(app.screen.query_one("#status", Label).render())
        await press(pilot, "escape")
        assert not isinstance(app.screen, QueryScreen)


async def test_bad_sql_is_one_line_in_the_screen_and_a_notification(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        app.action_query()
        await settle(pilot)
        await _query(pilot, "SELECT * FROM nosuch")
        status = str(app.screen.query_one("#status", Label).render())
        assert status.startswith("no table 'nosuch'") and "\n" not in status
        notices = [n for n in app._notifications if n.title == "Query"]
        assert notices and notices[-1].severity == "error"
        assert app.screen.query_one("#result", TablePane).table.source.equals(pl.DataFrame())
