"""The Diagnosis page: the app opens on it; enter opens each finding's evidence at its row; snapshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static
from tui_helpers import make_app, press, ready

from htatui.analysis.diagnosis import DiagnosisOptions
from htatui.analysis.registry import BY_ID, frame_of, make_table
from htatui.text.diagnosis import step_line
from htatui.trace import TraceSet
from htatui.tui.widgets.table_pane import TablePane

SnapCompare = Callable[..., bool]


def expected(traces: TraceSet) -> tuple[Any, Any]:
    view = BY_ID["diagnosis"]
    found = frame_of(make_table(view.main, traces, DiagnosisOptions()))[0]
    return found, frame_of(make_table(view.table("summary"), traces, DiagnosisOptions()))[0]


async def test_the_app_opens_on_the_findings_and_the_step_line(small_traces: TraceSet) -> None:
    """The generated 2-rank job: the step line and the findings are `report --view diagnosis`'s,
    the first one in full below the table."""
    found, summary = expected(small_traces)
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert app.current_mode == "diagnosis"
        assert str(app.screen.query_one("#diagnosis-step", Static).render()) == step_line(summary)
        table = app.screen.query_one("#diagnosis-main", TablePane).table
        assert table.source["what"].to_list() == found["what"].to_list()
        detail = str(app.screen.query_one("#diagnosis-detail", Static).render())
        assert detail.startswith(found["what"][0]) and "\nenter: Idle › idle --by-stream" in detail
        await press(pilot, "j")
        assert str(app.screen.query_one("#diagnosis-detail", Static).render()).startswith(found["what"][1])


async def test_enter_opens_the_evidence_page_at_its_row(small_traces: TraceSet) -> None:
    """host_bound's evidence is the Idle page's per-stream row of rank 0, stream 7; exposed_comm's
    the Kernels page's COMMUNICATION row of rank 1. D comes back; the number keys are the pages'."""
    found, _summary = expected(small_traces)
    assert found["rule"].to_list()[:2] == ["host_bound", "exposed_comm"]
    app = make_app(small_traces)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        await press(pilot, "enter")
        assert app.current_mode == "idle"
        table = app.screen.query_one("#idle-by-stream", TablePane).table
        row = table.selected_row()
        assert table.has_focus and row is not None and (row["rank"], row["stream"]) == (0, 7)
        await press(pilot, "D")
        assert app.current_mode == "diagnosis"
        await press(pilot, "j", "enter")
        assert app.current_mode == "kernels"
        table = app.screen.query_one("#kernel-types-main", TablePane).table
        row = table.selected_row()
        assert row is not None and (row["rank"], row["kernel_type"]) == ("1", "COMMUNICATION")
        await press(pilot, "D", "1")
        assert app.current_mode == "temporal"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_snapshot(snap_compare: SnapCompare, small_traces: TraceSet, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)

    assert snap_compare(make_app(small_traces), terminal_size=size, run_before=run_before)
