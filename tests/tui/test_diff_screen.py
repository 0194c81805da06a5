"""The diff screen: both sides load on workers, then headline views, names table and bars."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.coordinate import Coordinate
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Input, Static

from fixtures.generate import write_scenario
from fixtures.scenarios import GEMM, LAYER_NORM, SOFTMAX
from htatui.analysis.diff.compare import DiffOptions
from htatui.jobs.load import load_traces
from htatui.tui.base.jobs import JobDone
from htatui.tui.diff_app import DiffApp
from htatui.tui.screens.diff import DiffScreen, SideProgress
from htatui.tui.widgets.diff import DeltaBars
from htatui.tui.widgets.table_pane import TablePane

SIZE = (80, 24)


@pytest.fixture(scope="module")
def diff_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base/ and test/ of the generated `diff` scenario (names on screen: base, test)."""
    root = tmp_path_factory.mktemp("diffjob")
    write_scenario("diff", root)
    return root


def make_app(root: Path, options: DiffOptions | None = None) -> DiffApp:
    return DiffApp(root / "base", root / "test", options, use_cache=False, max_workers=1)


async def wait_ready(pilot: Pilot[Any], timeout: float = 30.0) -> DiffScreen:
    """Wait until the comparison is drawn (or the screen failed), with every worker done."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        screen = pilot.app.screen
        if isinstance(screen, DiffScreen) and (screen.has_class("-ready") or screen.failed):
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            return screen
        await pilot.pause(0.05)
    raise AssertionError("the diff screen did not finish")


def names(screen: DiffScreen) -> list[str]:
    table = screen.query_one("#names", TablePane).table
    return [str(n) for n in table.shown["name"].to_list()]


async def test_loads_both_sides_and_shows_changes(diff_root: Path) -> None:
    messages: list[Message] = []
    app = make_app(diff_root)
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        screen = await wait_ready(pilot)
        assert not screen.failed
        progressed = {m.side for m in messages if isinstance(m, SideProgress)}
        loaded = {m.job.removeprefix("load-") for m in messages if isinstance(m, JobDone) and m.job.startswith("load-")}
        assert progressed == loaded == {"base", "test"}
        table = screen.query_one("#names", TablePane).table
        assert table.row_count == 12
        first = table.shown.row(0, named=True)
        assert (first["name"], first["status"]) == ("aten::native_layer_norm", "added")
        glyphs = {str(table.get_cell_at(Coordinate(i, 1))) for i in range(table.row_count)}
        assert glyphs == {"+", "−", "▲", "="}
        headline = screen.query_one("#headline", TablePane).table
        assert headline.row_count > 10
        state = str(screen.query_one("#diff-state", Static).render())
        assert "base r0 · steps 1-2" in state and "test r0 · steps 1-2" in state
        assert screen.focused is table


async def test_status_kind_and_text_filters(diff_root: Path) -> None:
    app = make_app(diff_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await wait_ready(pilot)
        await pilot.press("c")
        assert screen.status_filter == "changed"
        assert set(screen.query_one("#names", TablePane).table.shown["status"]) == {
            "added",
            "removed",
            "slower",
        }
        await pilot.press("c")
        assert sorted(names(screen)) == sorted([LAYER_NORM, "aten::native_layer_norm"])
        await pilot.press("t")
        assert names(screen) == [LAYER_NORM]
        await pilot.press("c", "c", "c", "c", "c", "t", "t")  # back to everything
        assert screen.status_filter is None and screen.kind_filter is None
        assert len(names(screen)) == 12
        await pilot.press("slash", *"softmax")
        assert sorted(names(screen)) == sorted([SOFTMAX, "aten::_softmax"])
        await pilot.press("escape")
        assert len(names(screen)) == 12


async def test_bars_fold_and_info(diff_root: Path) -> None:
    app = make_app(diff_root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await wait_ready(pilot)
        await pilot.press("b")
        assert screen.has_class("-show-bars")
        bars = screen.query_one(DeltaBars)
        assert bars.display
        text = str(screen.query_one("#bars-text", Static).render())
        assert "▲ increases" in text and "▼ decreases" in text
        # Long names are cut in the middle to fit the bar labels; the delta is never cut.
        assert "+ aten::" in text and "er_norm" in text and "+460" in text
        await pilot.press("b")
        assert not screen.has_class("-show-bars")
        await pilot.press("f")
        screen = await wait_ready(pilot)
        assert screen.options.short_names
        assert "::softmax_warp_forward" in names(screen)
        assert GEMM in names(screen)
        await pilot.press("i")
        await pilot.pause()
        details = screen.query_one("#diff-details", Static)
        assert details.display and "left out" in str(details.render())
        assert not app._notifications
        await pilot.press("i")
        await pilot.pause()
        assert not details.display


async def test_escape_quits_the_diff_app(diff_root: Path) -> None:
    app = make_app(diff_root)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_code == 0


async def test_load_failure_is_one_line_naming_the_file(tmp_path: Path, diff_root: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    app = DiffApp(bad, diff_root / "test", use_cache=False, max_workers=1)
    async with app.run_test(size=SIZE) as pilot:
        screen = await wait_ready(pilot)
        assert screen.failed and not screen.has_class("-ready")
        error = str(screen.query_one("#diff-error", Static).render())
        assert error.startswith("base: ") and "bad.json" in error


async def test_missing_rank_fails_cleanly(diff_root: Path) -> None:
    app = make_app(diff_root, DiffOptions(rank=4))
    async with app.run_test(size=SIZE) as pilot:
        screen = await wait_ready(pilot)
        assert screen.failed
        assert "rank 4" in str(screen.query_one("#diff-error", Static).render())


class HostApp(App[None]):
    """Another app pushing the screen with already loaded traces (as the main app's `d` does)."""

    def __init__(self, screen: DiffScreen) -> None:
        super().__init__()
        self.diff_screen = screen

    def on_mount(self) -> None:
        self.push_screen(self.diff_screen)


async def test_pushed_screen_with_preloaded_traces_pops_on_escape(diff_root: Path) -> None:
    base = load_traces([diff_root / "base"], use_cache=False, max_workers=1)
    screen = DiffScreen(diff_root / "base", diff_root / "test", base_traces=base, use_cache=False, max_workers=1)
    app = HostApp(screen)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        assert len(app.screen_stack) == 2
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1


def _ready_then(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await wait_ready(pilot)
        if keys:
            await pilot.press(*keys)
        await pilot.pause()

    return run_before


def test_snapshot_80x24(diff_root: Path, snap_compare: Any) -> None:
    assert snap_compare(make_app(diff_root), terminal_size=SIZE, run_before=_ready_then())


def test_snapshot_80x24_bars(diff_root: Path, snap_compare: Any) -> None:
    assert snap_compare(make_app(diff_root), terminal_size=SIZE, run_before=_ready_then("b"))


async def test_d_in_the_app_asks_for_the_test_job_and_opens_the_diff(diff_root: Path) -> None:
    from htatui.tui.app import HtaTuiApp, Settings
    from htatui.tui.screens.path_prompt import PathPrompt

    app = HtaTuiApp(Settings(paths=(diff_root / "base",), use_cache=False, max_workers=1))
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        await pilot.press(*"/no/such/folder", "enter")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        app.screen.query_one("#path", Input).value = str(diff_root / "test")
        await pilot.press("enter")
        screen = await wait_ready(pilot)
        assert isinstance(screen, DiffScreen)
        assert SOFTMAX in names(screen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DiffScreen)
