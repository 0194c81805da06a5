"""The timeline screen: opened from a table row, zoom/pan/steps/go-to, cursor details, follow links."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from textual.pilot import Pilot
from textual.widgets import Input
from tui_helpers import make_app, press, ready

from htatui.analysis.timeline import events as tle
from htatui.analysis.timeline import index as tl
from htatui.text import timeline as timeline_text
from htatui.trace import TraceSet
from htatui.tui.screens.temporal import TemporalScreen
from htatui.tui.screens.timeline import TimelineScreen, parse_window
from htatui.tui.widgets.table import CURSOR_MARK
from htatui.tui.widgets.table_pane import TablePane

SnapCompare = Callable[..., bool]


def timeline(pilot: Pilot[Any]) -> TimelineScreen:
    screen = pilot.app.screen
    assert isinstance(screen, TimelineScreen)
    return screen


def cursor_label(screen: TimelineScreen) -> str:
    index, row = screen.rows[screen.cursor_row]
    return f"r{index.rank} {index.rows[row].label}"


def details_text(screen: TimelineScreen) -> str:
    return str(screen.query_one("#timeline-details").render())


async def test_navigation_from_a_table_row(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "1")
        await press(pilot, "t")  # the temporal table's first row is rank 0
        screen = timeline(pilot)
        assert cursor_label(screen) == "r0 stream 7"
        # The whole job: the small trace spans 0-3100 µs.
        assert (screen.start_us, screen.end_us) == (0.0, 3100.0)
        await press(pilot, "n")
        assert (screen.start_us, screen.end_us) == (100.0, 1090.0)  # ProfilerStep#1
        await press(pilot, "n")
        assert (screen.start_us, screen.end_us) == (1100.0, 2090.0)
        await press(pilot, "p")
        assert (screen.start_us, screen.end_us) == (100.0, 1090.0)
        span = screen.end_us - screen.start_us
        await press(pilot, "d")
        assert screen.start_us == pytest.approx(100.0 + span / 4)
        await press(pilot, "a", "h", "l")
        assert screen.start_us == pytest.approx(100.0)
        await press(pilot, "w")
        assert screen.end_us - screen.start_us == pytest.approx(span / 2)
        assert screen.start_us <= screen.cursor_us < screen.end_us
        await press(pilot, "s", "minus")
        assert screen.end_us - screen.start_us == pytest.approx(span * 2)
        await press(pilot, "plus")
        assert screen.end_us - screen.start_us == pytest.approx(span)
        await press(pilot, "j", "k", "k")
        assert cursor_label(screen) == "r0 thread 2910000 +1"
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, TemporalScreen)


async def test_details_and_follow_launch_to_kernel(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "t")
        screen = timeline(pilot)
        await press(pilot, "g", *"150 170", "enter")
        assert (screen.start_us, screen.end_us) == (150.0, 170.0)
        text = details_text(screen)
        assert "Memcpy HtoD (Pageable -> Device)" in text
        assert "start 150 µs · dur 20 µs · end 170 µs" in text and "stream 7 · correlation" in text
        assert "correlation 101" in text and "launched by cudaMemcpyAsync in aten::copy_" in text
        await press(pilot, "f")  # to the launch, three levels deep on the CPU thread
        assert cursor_label(screen) == "r0 thread 2910000 +3"
        assert details_text(screen).startswith("cudaMemcpyAsync")
        assert "kernels: Memcpy HtoD (Pageable -> Device)" in details_text(screen)
        await press(pilot, "enter")  # and back to the copy
        assert cursor_label(screen) == "r0 stream 7"
        assert details_text(screen).startswith("Memcpy HtoD")
        await press(pilot, "g", *"nonsense", "enter")
        assert "give a time in µs" in str(pilot.app.screen.query_one("#error").render())
        await press(pilot, "escape")
        assert pilot.app.screen is screen and screen.start_us == 150.0


async def test_opens_at_a_row_time_and_draws_counters(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        app.open_timeline(1, 200.0, 300.0)
        await press(pilot)
        screen = timeline(pilot)
        # 10% of the window on each side, cursor in its middle, on rank 1's first stream.
        assert (screen.start_us, screen.end_us) == (190.0, 310.0)
        assert screen.cursor_us == 250.0 and cursor_label(screen) == "r1 stream 7"
        await press(pilot, "c")
        assert any(index.rows[row].kind == tl.COUNTER for index, row in screen.rows)


def test_parse_window() -> None:
    assert parse_window("100", 50.0) == (100.0, 150.0)
    assert parse_window("100 200", 50.0) == (100.0, 200.0)
    assert parse_window("100..200", 50.0) == (100.0, 200.0)
    with pytest.raises(ValueError, match="larger end"):
        parse_window("200 100", 50.0)


def test_row_window_hook() -> None:
    assert tle.row_window({"rank": 2, "start_us": 10.0, "dur_us": 5.0}) == (2, 10.0, 15.0)
    assert tle.row_window({"rank": 0, "ts_us": 7.0, "end_us": 9.0}) == (0, 7.0, 9.0)
    assert tle.row_window({"rank": 1, "stream": 7}) == (1, None, None)
    assert tle.row_window(None) == (None, None, None)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot(snap_compare: SnapCompare, small_traces: TraceSet, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await press(pilot, "t", "n")

    assert snap_compare(make_app(small_traces), terminal_size=size, run_before=run_before)


def test_snapshot_256_colours(snap_compare: SnapCompare, small_traces: TraceSet) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await press(pilot, "t", "g", *"150 400", "enter")

    assert snap_compare(make_app(small_traces, theme="htatui-256"), terminal_size=(80, 24), run_before=run_before)


async def test_t_on_a_launch_outlier_opens_its_launch_and_kernel(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "5")
        app.screen.query_one("#launch-delay-outliers", TablePane).table.focus()
        await press(pilot, "t")
        screen = timeline(pilot)
        # The first delay outlier is rank 0's correlation 104: cudaMemsetAsync at 245 µs (10 µs),
        # its memset starts 145 µs after the call ends and runs 10 µs: [245, 410), padded by 10%.
        assert screen.target == (0, 245.0, 410.0)
        assert (screen.start_us, screen.end_us) == pytest.approx((228.5, 426.5))
        assert cursor_label(screen) == "r0 stream 7"


async def test_screen_rows_are_the_text_rendering(small_traces: TraceSet) -> None:
    """Without colour the screen shows exactly what `htatui timeline` prints for that window."""
    app = make_app(small_traces)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await press(pilot, "t", "n")
        screen = timeline(pilot)
        canvas = screen.query_one("#timeline-canvas")
        shown = screen.draw(canvas.size.width, canvas.size.height).plain.splitlines()[1:]
        printed = timeline_text.render(small_traces, [0, 1], screen.start_us, screen.end_us, canvas.size.width)[1:]
        # ...but for the cursor row's mark, between its label and its cells.
        assert [CURSOR_MARK in line for line in shown] == [i == screen.cursor_row for i in range(len(shown))]
        shown = [line.replace(CURSOR_MARK, " ") for line in shown]
        assert shown == printed and len(printed) == 8


async def test_t_on_a_kernel_row_opens_its_longest_instance(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "3")
        table = app.screen.query_one("#kernels-main", TablePane).table
        table.focus()
        row = table.selected_row()
        assert row is not None
        await press(pilot, "t")
        screen = timeline(pilot)
        events = small_traces.ranks[row["rank"]].events.filter(pl.col("name").cast(pl.Utf8) == row["name"])
        longest = events.sort("dur").tail(1)
        assert screen.target == (row["rank"], longest["ts"][0], longest["end"][0])
        assert screen.start_us < longest["ts"][0] < longest["end"][0] < screen.end_us
        assert details_text(screen).startswith(row["name"][:20])
        index, shown_row = screen.rows[screen.cursor_row]
        assert index.rows[shown_row].key == longest["stream"][0]


def middle_kernel(index: tl.RankIndex) -> dict[str, Any]:
    """The launched compute kernel that starts nearest the middle of the rank's trace."""
    middle = (index.first_us + index.last_us) / 2
    kernels = index.looked_up(index.events).filter(
        (pl.col("kind") == tl.STREAM) & (pl.col("type") == tl.COMPUTE) & pl.col("correlation").is_not_null()
    )
    return kernels.sort((pl.col("ts") - middle).abs()).row(0, named=True)


def selected(screen: TimelineScreen) -> dict[str, Any]:
    assert screen._selected is not None, "nothing selected"
    return screen._selected[1]


async def go_to(pilot: Pilot[Any], window: str) -> None:
    """`g`, then the window filled in at once (typing it key by key costs seconds) and submitted."""
    await press(pilot, "g")
    pilot.app.screen.query_one("#time", Input).value = window
    await press(pilot, "enter")


def busiest_under_cursor(screen: TimelineScreen) -> dict[str, Any] | None:
    """What the cursor's cell alone would select: the event covering most of it."""
    index, row = screen.rows[screen.cursor_row]
    per_cell = (screen.end_us - screen.start_us) / screen._cells
    cell_start = screen.start_us + (screen.cursor_us - screen.start_us) // per_cell * per_cell
    return tle.event_at(index, row, cell_start, cell_start + per_cell)


async def test_follow_keeps_the_followed_event_at_every_zoom(load_shared: Callable[[str], TraceSet]) -> None:
    """A coarse cell holds many events; `f` selects the launch it jumped to (and then the kernel),
    not whichever event covers most of the cell it landed in."""
    app = make_app(load_shared("h100_resnet_eager"), "h100_resnet_eager")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "t")
        screen = timeline(pilot)
        index = screen.rows[screen.cursor_row][0]
        kernel = middle_kernel(index)
        whole = index.last_us - index.first_us
        crowded = []
        # From the whole trace (~840 µs a cell) down to ~0.01 µs a cell.
        for fraction in (1, 1 / 16, 1 / 256, 1 / 4096, 1 / 65536):
            # The window starts at the kernel: the cursor's cell holds it, or a busier kernel.
            await go_to(pilot, f"{kernel['ts']} {kernel['ts'] + whole * fraction}")
            zoom = f"{(screen.end_us - screen.start_us) / screen._cells:.3g} µs/cell"
            start = selected(screen)
            assert start["kind"] == tl.STREAM and start["correlation"] is not None, zoom
            await press(pilot, "f")
            launch = selected(screen)
            assert (launch["kind"], launch["type"]) == (tl.THREAD, tl.RUNTIME), (zoom, launch["name"])
            assert launch["correlation"] == start["correlation"], zoom
            assert details_text(screen).startswith(str(launch["name"])), zoom
            crowded.append(busiest_under_cursor(screen) != launch)
            await press(pilot, "f")
            back = selected(screen)
            assert back["index"] == tle.kernels_of(index, launch)["index"][0], (zoom, back["name"])
            assert back["correlation"] == start["correlation"], zoom
        # The coarsest zoom is the case the fix is for: there the busiest event is not the launch.
        assert crowded[0]


async def test_t_on_a_kernel_selects_its_own_stream_and_shows_it() -> None:
    """Issue 38 #3: on the demo, Kernels' first row (an NCCL kernel on stream 20), `t` put ▶ and
    the details on stream 7 (a flash kernel busy at the same time), the NCCL row out of sight."""
    from pathlib import Path

    from htatui.jobs.load import load_traces

    demo = load_traces([Path(__file__).resolve().parents[2] / "fixtures" / "demo"], use_cache=False, max_workers=1)
    app = make_app(demo, "demo")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "3")
        table = app.screen.query_one("#kernels-main", TablePane).table
        table.focus()
        row = table.selected_row()
        assert row is not None and row["name"].startswith("ncclDevKernel")
        await press(pilot, "t")
        screen = timeline(pilot)
        events = demo.ranks[row["rank"]].events.filter(pl.col("name").cast(pl.Utf8) == row["name"])
        longest = events.sort("dur").tail(1)
        index, shown_row = screen.rows[screen.cursor_row]
        assert (index.rank, index.rows[shown_row].kind, index.rows[shown_row].key) == (
            row["rank"],
            tl.STREAM,
            longest["stream"][0],
        )
        assert details_text(screen).startswith("ncclDevKernel")
        canvas_height = screen.query_one("#timeline-canvas").size.height
        assert screen.row_offset <= screen.cursor_row < screen.row_offset + canvas_height - 1
