"""The Memory screens: `htatui snapshot.pickle` (MemoryApp) and the Memory page of a trace folder."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
from kineto_util import write_trace
from memory_util import LOSS_SITE, MODEL_SITE, memory_trace_events, snapshot_a, write_pickle
from textual.pilot import Pilot
from textual.widgets import Static
from tui_helpers import make_app, press, ready

from htatui.analysis.core.scope import Scope
from htatui.analysis.memory.view import MemoryOptions
from htatui.analysis.registry import frame_of, make_table, view
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet
from htatui.tui.memory_app import MemoryApp
from htatui.tui.screens.memory import (
    SERIES,
    FramesScreen,
    MemoryHead,
    MemoryScreen,
    SnapshotScreen,
    chart_series,
    snapshot_tables,
)
from htatui.tui.widgets.table_pane import TablePane


async def _wait_for_result(pilot: Pilot[Any], timeout: float = 30.0) -> MemoryHead:
    app = pilot.app
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        head = app.screen.query_one(MemoryHead) if app.screen.query(MemoryHead) else None
        screen = app.screen
        failed = isinstance(screen, SnapshotScreen) and screen.error is not None
        if head is not None and (head.memory_tables is not None or failed):
            await pilot.pause()
            return head
        await pilot.pause(0.05)
    raise AssertionError("the memory screen did not draw in time")


async def test_snapshot_opens_straight_into_the_memory_screen(tmp_path: Path) -> None:
    app = MemoryApp(write_pickle(tmp_path / "a.pickle", snapshot_a()))
    async with app.run_test(size=(80, 24)) as pilot:
        body = await _wait_for_result(pilot)
        assert isinstance(app.screen, SnapshotScreen)
        sites = app.screen.query_one("#memory-sites", TablePane).table.source
        assert sites.select("site", "bytes", "count").rows()[:2] == [(MODEL_SITE, 2048, 1), (LOSS_SITE, 1024, 1)]
        headline = str(app.screen.query_one("#memory-headline", Static).render())
        assert "peak 3.54 KiB (4 blocks live) · end 3.29 KiB · reserved peak 5.00 KiB" in headline
        ooms = app.screen.query_one("#memory-oom", TablePane).table.source
        assert ooms["requested_bytes"].to_list() == [8192]
        allocator = app.screen.query_one("#memory-allocator", TablePane).table.source
        assert allocator["segments"].to_list() == [2]
        assert body.device == "cuda:0"
        app.screen.query_one("#memory-sites", TablePane).table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, FramesScreen)
        text = str(app.screen.query_one("#frames-text", Static).render())
        assert text.splitlines()[0] == MODEL_SITE
        assert text.splitlines()[-1] == "forward /home/me/model.py:10"
        await pilot.press("escape")
        assert isinstance(app.screen, SnapshotScreen)


async def test_a_hostile_snapshot_is_a_notification_not_a_crash(tmp_path: Path) -> None:
    class Command:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    app = MemoryApp(write_pickle(tmp_path / "evil.pickle", {"segments": [Command()]}))
    async with app.run_test(size=(80, 24)) as pilot:
        await _wait_for_result(pilot)
        screen = app.screen
        assert isinstance(screen, SnapshotScreen)
        assert screen.error is not None and "refused" in screen.error
        assert "refused" in str(screen.query_one("#memory-headline", Static).render())
    assert not (tmp_path / "ran").exists()


async def test_trace_with_memory_events_shows_the_memory_page(tmp_path: Path) -> None:
    write_trace(tmp_path / "job" / "rank-0.pt.trace.json", memory_trace_events())
    traces = load_traces([tmp_path / "job"], use_cache=False, max_workers=1)
    app = make_app(traces)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        assert app.view_order()[-3:] == [
            ("memory", "Memory"),
            ("modules", "Modules"),
            ("critical-path", "Critical path"),
        ]
        await press(pilot, "0")  # the tenth page's key
        assert isinstance(app.screen, MemoryScreen)
        await _wait_for_result(pilot)
        sites = app.screen.query_one("#memory-sites", TablePane).table.source
        assert sites.filter(pl.col("site") == "forward")["bytes"].to_list() == [300]


async def test_traces_without_memory_events_do_not_list_the_page(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert "memory" not in [mode for mode, _title in app.view_order()]


def test_snapshot_screen_80x24(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    path = write_pickle(tmp_path / "a.pickle", snapshot_a())

    async def run_before(pilot: Pilot[Any]) -> None:
        await _wait_for_result(pilot)

    assert snap_compare(MemoryApp(path), terminal_size=(80, 24), run_before=run_before)


def test_memory_page_80x24(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    write_trace(tmp_path / "job" / "rank-0.pt.trace.json", memory_trace_events())
    traces = load_traces([tmp_path / "job"], use_cache=False, max_workers=1)

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await press(pilot, "0")  # Memory, the tenth page
        await _wait_for_result(pilot)

    assert snap_compare(make_app(traces, name="memory_job"), terminal_size=(80, 24), run_before=run_before)


def test_chart_of_a_snapshot_without_times_uses_event_numbers(tmp_path: Path) -> None:
    snapshot = snapshot_a()
    for item in snapshot["device_traces"][0]:
        del item["time_us"]
    found, _stacks = snapshot_tables(write_pickle(tmp_path / "old.pickle", snapshot))
    xs, allocated, _reserved, xlabel = chart_series(found[SERIES].frame)
    assert xlabel == "event"
    assert xs == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert [round(v * 1024 * 1024) for v in allocated] == [556, 1068, 2092, 2092, 1580, 3628, 3372, 3372]


def test_the_memory_page_reads_every_chosen_rank(tmp_path: Path) -> None:
    for rank in (0, 1):
        write_trace(tmp_path / "job" / f"rank-{rank}.pt.trace.json", memory_trace_events(), rank=rank)
    traces = load_traces([tmp_path / "job"], use_cache=False, max_workers=1)
    main = view("memory").main

    def devices(options: MemoryOptions) -> list[str]:
        return list(frame_of(make_table(main, traces, options))[0]["device"])

    assert devices(MemoryOptions()) == ["rank 0 cuda:0", "rank 1 cuda:0"]
    assert devices(MemoryOptions(scope=Scope(ranks=(1,)))) == ["cuda:0"]


async def test_an_oom_snapshot_leads_with_the_oom_and_answers_help_and_the_palette(tmp_path: Path) -> None:
    from textual.command import CommandPalette

    from htatui.tui.screens.help import HelpScreen

    app = MemoryApp(write_pickle(tmp_path / "a.pickle", snapshot_a()))
    async with app.run_test(size=(80, 24)) as pilot:
        await _wait_for_result(pilot)
        lines = [strip.text for strip in app.screen._compositor.render_strips()]
        # The OOM first, under the title: asked, free, live (what the OOM table's row says), the site.
        assert lines[1].startswith(" ⚠ OUT OF MEMORY: asked 8.00 KiB, device free 100 B, live 3.29 KiB")
        assert lines[3].strip() == f"most live at: {MODEL_SITE}"
        # The chart's series differ by glyph, named in the legend; the footer offers help.
        legend = next(line for line in lines if "Memory over time" in line)
        assert "• allocated" in legend and "+ reserved" in legend and "▲ peak" in legend
        assert "▲" in "".join(lines[lines.index(legend) + 1 :])
        assert "? Help" in lines[-1] and lines[-1].rstrip().endswith("q Quit")
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            assert "out-of-memory error leads" in app.screen.page()
            await pilot.press("q")  # closes the help, not the app
            await pilot.pause()
            assert isinstance(app.screen, SnapshotScreen) and app.is_running
        await pilot.press("colon")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
