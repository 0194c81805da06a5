"""The Critical path page: reached with [ (no number key), one step (, . a), bars, path, m for the job's path, t, e."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input
from tui_helpers import make_app, press, ready

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import critical_path as cp
from htatui.trace import TraceSet
from htatui.tui.commands import HtaCommands
from htatui.tui.screens.critical_path import CriticalPathScreen
from htatui.tui.screens.export_modal import ExportModal
from htatui.tui.screens.timeline import TimelineScreen
from htatui.tui.widgets.table_pane import TablePane


def screen_lines(app: Any) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def open_page(pilot: Pilot[Any]) -> CriticalPathScreen:
    await ready(pilot)
    await press(pilot, "left_square_bracket")  # from the first page back to the last: this one
    screen = pilot.app.screen
    assert isinstance(screen, CriticalPathScreen)
    return screen


LAST_STEP = Scope(steps=Steps.parse("2"))
"""The small job counts steps 1-2 (3 is left out): the page follows step 2, its last complete one."""


async def test_page_shows_the_rank_path_then_the_jobs_and_t_opens_the_timeline(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    options = cp.CriticalPathOptions(LAST_STEP)
    summary, path = cp.compute(small_traces, options), cp.edges(small_traces, options).frame
    top = cp.top_events(small_traces, options).frame
    assert path.height > 0 and summary.message is not None and summary.message.startswith("path ")
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_page(pilot)
        lines = screen_lines(app)
        assert lines[0].rstrip().endswith("[Critical path]")
        assert "│ step 2 of 1-2 (, . another · a all)" in lines[1]
        # The coverage line heads the bars.
        assert any(summary.message.split(" · ")[0] in line for line in lines)
        for bound, pct in summary.frame.select("bound_by", "pct").iter_rows():
            assert any(line.startswith(bound[:20]) and f"{pct:.1f}%" in line for line in lines), bound
        events = screen.query_one("#critical-path-top-events", TablePane)
        assert events.display and not screen.query_one("#critical-path-job", TablePane).display
        assert events.table.has_focus and events.table.selected_row() == top.row(0, named=True)
        assert screen.query_one("#critical-path-what-if", TablePane).display

        edges = screen.query_one("#critical-path-edges", TablePane)
        edges.table.focus()
        await press(pilot, "j", "t")  # the path's second edge, in the timeline
        assert isinstance(app.screen, TimelineScreen)
        second = path.row(1, named=True)
        assert app.screen.target == (second["rank"], second["start_us"], second["end_us"])
        await press(pilot, "escape")

        await press(pilot, "m")
        job = screen.query_one("#critical-path-job", TablePane)
        assert job.display and not edges.display and job.table.has_focus
        assert screen.query_one("#critical-path-job-what-if", TablePane).display
        assert any("The job's path" in line for line in screen_lines(app))


async def test_t_on_a_grouped_row_opens_its_first_instance(small_traces: TraceSet) -> None:
    """The job's path by rank and name: `t` opens the name's first instance on the path."""
    row = cp.job(small_traces, cp.CriticalPathOptions(LAST_STEP)).frame.row(0, named=True)
    events = small_traces.ranks[row["rank"]].events
    event = events.filter(events["index"] == row["index"]).row(0, named=True)
    app = make_app(small_traces)
    async with app.run_test(size=(100, 40)) as pilot:
        await open_page(pilot)
        await press(pilot, "m", "t")
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.target == (row["rank"], event["ts"], event["end"])


async def test_t_on_an_event_row_opens_that_event(small_traces: TraceSet) -> None:
    top = cp.top_events(small_traces, cp.CriticalPathOptions(LAST_STEP)).frame.row(0, named=True)
    events = small_traces.ranks[top["rank"]].events
    event = events.filter(events["index"] == top["index"]).row(0, named=True)
    app = make_app(small_traces)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_page(pilot)
        screen.query_one("#critical-path-top-events", TablePane).table.focus()
        await press(pilot, "t")
        assert isinstance(app.screen, TimelineScreen)
        assert app.screen.target == (top["rank"], event["ts"], event["end"])


async def test_comma_and_full_stop_move_between_steps_and_a_takes_every_step(small_traces: TraceSet) -> None:
    def edges(steps: str) -> list[dict[str, Any]]:
        return cp.edges(small_traces, cp.CriticalPathOptions(Scope(steps=Steps.parse(steps)))).frame.to_dicts()

    app = make_app(small_traces)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_page(pilot)

        def shown() -> tuple[str, list[dict[str, Any]]]:
            assert screen.result is not None
            return screen_lines(app)[1], screen.result.frame("critical-path", "edges").to_dicts()

        header, path = shown()
        assert "step 2 of 1-2" in header and path == edges("2")
        await press(pilot, "comma")
        header, path = shown()
        assert "step 1 of 1-2" in header and path == edges("1") != edges("2")
        await press(pilot, "comma")  # no step before the first: it stays, and says so
        assert "step 1 of 1-2" in shown()[0]
        assert [n.message for n in app._notifications][-1] == "Step 1 is the scope's first."
        await press(pilot, "a")  # every step of the app's scope, as `report` by default
        header, path = shown()
        assert "│ steps 1-2 (last step 3 left out)" in header and path == edges("default")
        assert screen.result is not None and screen.result.scope == app.scope()
        await press(pilot, "full_stop")  # back to one step: the one last followed
        header, path = shown()
        assert "step 1 of 1-2" in header and path == edges("1")
        await press(pilot, "full_stop")
        assert "step 2 of 1-2" in shown()[0]


async def test_e_writes_the_overlay_into_the_chosen_folder(small_traces: TraceSet, tmp_path: Path) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(100, 40)) as pilot:
        await open_page(pilot)
        entries = {entry.title: entry.help for entry in HtaCommands(app.screen).entries()}
        assert entries["export: critical-path overlay…"].endswith("(key e)")
        assert entries["view: Critical path"] == "Keys [ and ] (no number key)" and entries["view: Ranks"] == "Key 9"
        await press(pilot, "e")
        modal = app.screen
        assert isinstance(modal, ExportModal)
        modal.query_one("#export-folder", Input).value = str(tmp_path)
        modal.query_one("#export-folder", Input).focus()
        await press(pilot, "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
    written = list(tmp_path.iterdir())
    assert [p.name for p in written] == [f"overlaid_critical_path_{small_traces.ranks[0].path.name}"]
    data = written[0].read_bytes()
    opened = json.loads(gzip.decompress(data) if written[0].name.endswith(".gz") else data)
    assert sum(e["ph"] == "X" and e.get("args", {}).get("critical") == 1 for e in opened["traceEvents"]) > 0


SnapCompare = Callable[..., bool]


def test_snapshot_80x24(snap_compare: SnapCompare, small_traces: TraceSet) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await open_page(pilot)

    assert snap_compare(make_app(small_traces), terminal_size=(80, 24), run_before=run_before)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The export dialog offers the working folder: never the repository."""
    monkeypatch.chdir(tmp_path)
