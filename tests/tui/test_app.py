"""Pilot tests: every view shows its analysis' numbers, keys switch views, ranks, options, errors."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from textual.coordinate import Coordinate
from textual.widgets import Input, ProgressBar, Static
from tui_helpers import make_app, press, ready

from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import idle, kernels, ops, overlap, patterns, temporal
from htatui.jobs.load import load_traces
from htatui.trace import LoadCancelled, LoadProgress, TraceSet
from htatui.tui import theming
from htatui.tui.app import VIEWS, HtaTuiApp, Settings
from htatui.tui.commands import HtaCommands
from htatui.tui.screens.base import ViewScreen
from htatui.tui.screens.counters import CountersResult
from htatui.tui.screens.export_modal import ExportModal
from htatui.tui.screens.help import HelpScreen
from htatui.tui.screens.loading import LoadingScreen
from htatui.tui.screens.page import PageScreen
from htatui.tui.screens.rank_picker import RankPicker
from htatui.tui.widgets.chart import Chart
from htatui.tui.widgets.status_bar import page_keys
from htatui.tui.widgets.table import ViewTable
from htatui.tui.widgets.table_pane import TablePane

# The Memory page shows only for traces with [memory] events (tests/tui/test_memory_screen.py).
MODES = [mode for mode, _title in VIEWS if mode != "memory"]
NUMBERED = [mode for mode in MODES if mode in page_keys()]
"""The pages with a number key (1-9, 0): the eleventh on is reached with [ ] (test_critical_path_screen.py)."""


def pane(app: HtaTuiApp, selector: str) -> TablePane:
    return app.screen.query_one(selector, TablePane)


def cell_text(table: ViewTable, row: int, column: str) -> str:
    return str(table.get_cell(table.coordinate_to_cell_key(Coordinate(row, 0)).row_key, column))


# ---- loading ------------------------------------------------------------------------------
async def test_loads_files_and_opens_the_diagnosis(trace_root: Path) -> None:
    app = HtaTuiApp(Settings(paths=(trace_root / "small",), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert app.current_mode == "diagnosis"
        assert app.traces is not None and app.traces.rank_ids == [0, 1]
        assert app.ranks_label == "all (2)"
        assert app.steps_label == "steps 1-2 (last step 3 left out)"


async def test_load_error_says_so_and_q_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "rank-0.json"
    bad.write_text("{not json")
    app = HtaTuiApp(Settings(paths=(bad,), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if isinstance(app.screen, LoadingScreen) and app.screen.failed:
                break
        screen = app.screen
        assert isinstance(screen, LoadingScreen) and screen.failed
        assert "Cannot load" in str(screen.query_one("#loading-error").render())
        await pilot.press("q")
    assert app.return_code == 2


async def test_escape_cancels_the_load(trace_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = threading.Event()

    def slow_load(paths: list[Path], *, cancel: threading.Event, **_kwargs: object) -> TraceSet:
        started.set()
        cancel.wait(10)
        raise LoadCancelled

    monkeypatch.setattr("htatui.tui.screens.loading.load_traces", slow_load)
    app = HtaTuiApp(Settings(paths=(trace_root / "small",), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await asyncio.to_thread(started.wait, 10)
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_code == 130


async def test_the_bar_and_the_list_follow_a_file_s_bytes(trace_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big file parsed here moves the bar by its bytes and is listed as parsing, not waiting."""
    reported = threading.Event()

    def slow_load(paths: list[Path], *, progress: Any, cancel: threading.Event, **_kwargs: object) -> TraceSet:
        first = sorted((trace_root / "small").iterdir())[0]
        progress(LoadProgress(done=0, total=2, path=first, from_cache=False, bytes_done=30, bytes_total=120))
        reported.set()
        cancel.wait(10)
        raise LoadCancelled

    monkeypatch.setattr("htatui.tui.screens.loading.load_traces", slow_load)
    app = HtaTuiApp(Settings(paths=(trace_root / "small",), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await asyncio.to_thread(reported.wait, 10)
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, LoadingScreen)
        bar = screen.query_one(ProgressBar)
        assert (bar.total, bar.progress) == (2, 0.25)  # no file done, a quarter of the first one's bytes
        listed = str(screen.query_one("#loading-list", Static).render())
        assert "parsing 25%" in listed and "waiting" in listed  # the second file has not started
        assert "30 bytes of 120 bytes" in str(screen.query_one("#loading-hint", Static).render())
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_code == 130


# ---- every view shows its analysis ----------------------------------------------------------
async def test_every_view_shows_the_analysis_numbers_and_keys_switch(small_traces: TraceSet) -> None:
    """The number keys open the pages; each table is the registry's (tests/tui/test_pages_equal_report.py
    compares every table with `report` on three jobs), written as `report` writes its cells."""
    app = make_app(small_traces)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert app.current_mode == "diagnosis"
        await press(pilot, "1")
        table = pane(app, "#temporal-main").table
        expected = temporal.compute(small_traces, temporal.TemporalOptions())
        assert_frame_equal(table.source, expected)
        assert cell_text(table, 0, "idle_us") == f"{expected['idle_us'][0]:,.2f}"
        assert cell_text(table, 1, "compute_pct") == f"{expected['compute_pct'][1]:.2f}"

        await press(pilot, "2")
        assert_frame_equal(pane(app, "#idle-by-stream").table.source, idle.by_stream(small_traces, idle.IdleOptions()))

        await press(pilot, "3")
        highlighted = pane(app, "#kernels-main").table.selected_row()
        assert highlighted is not None
        spread = pane(app, "#kernel-spread-main").table.source
        expected_spread = kernels.spread(small_traces, kernels.KernelSpreadOptions(top_k=None)).filter(
            (pl.col("name") == highlighted["name"]) & (pl.col("kernel_type") == highlighted["kernel_type"])
        )
        assert_frame_equal(spread, expected_spread.drop("name", "kernel_type"))

        await press(pilot, "6")
        screen = app.screen
        assert isinstance(screen, PageScreen)
        assert isinstance(screen.result, CountersResult)

        await press(pilot, "7")
        assert app.current_mode == NUMBERED[6] == "ops"
        assert_frame_equal(pane(app, "#ops-main").table.source, ops.compute(small_traces, ops.OpsOptions()))
        assert pane(app, "#ops-main").table.sort_key == "gpu_self_us"
        await press(pilot, "right_square_bracket")
        assert app.current_mode == NUMBERED[7] == "patterns"
        for _later_view in MODES[MODES.index("patterns") + 1 :]:
            await press(pilot, "right_square_bracket")
        await press(pilot, "right_square_bracket")
        assert app.current_mode == MODES[0]
        await press(pilot, "left_square_bracket")
        assert app.current_mode == MODES[-1]
        await press(pilot, "left_square_bracket")
        assert app.current_mode == MODES[-2]


async def test_rank_picker_changes_every_view(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "p")
        assert isinstance(app.screen, RankPicker)
        await press(pilot, "j", "o", "enter")  # highlight rank 1, keep only it, apply
        assert app.selected_ranks == (1,)
        assert app.ranks_label == "1 (1/2)"
        only_rank_1 = CommonOptions(scope=Scope(ranks=(1,)))
        for number, mode in enumerate(NUMBERED, start=1):
            await press(pilot, str(number))
            for table in app.screen.query(ViewTable):
                if "rank" in table.source.columns and table.source.height:
                    assert set(table.source["rank"].cast(pl.Utf8)) <= {"1", "all"}, (mode, table.id)
        await press(pilot, "1")
        expected = temporal.compute(small_traces, temporal.TemporalOptions(**vars(only_rank_1)))
        assert_frame_equal(pane(app, "#temporal-main").table.source, expected)
        app.set_ranks(None)
        await press(pilot, "2")
        assert set(pane(app, "#idle-by-stream").table.source["rank"]) == {0, 1}


# ---- options, filter, sort, copy -----------------------------------------------------------
async def test_editing_an_option_reruns_the_analysis(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "2")
        app.screen.query_one("#input-consecutive_kernel_delay_us").focus()
        await press(pilot, *"5", "enter")
        expected = idle.by_stream(small_traces, idle.IdleOptions(consecutive_kernel_delay_us=5.0))
        assert_frame_equal(pane(app, "#idle-by-stream").table.source, expected)
        assert isinstance(app.focused, ViewTable)
        app.screen.query_one("#input-consecutive_kernel_delay_us").focus()
        await press(pilot, "minus", "1", "enter")  # refused: below the minimum
        assert app.screen.view_options["idle"].consecutive_kernel_delay_us == 5.0  # type: ignore[attr-defined]


async def test_filter_sort_and_copy(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await press(pilot, "3")
        table = pane(app, "#kernels-main").table
        await press(pilot, "slash", *"nccl")
        assert table.row_count > 0
        assert all("nccl" in name.lower() for name in table.shown["name"])
        await press(pilot, "enter")
        assert app.focused is table
        await press(pilot, "y")
        assert app.clipboard == table.shown["name"][0]
        await press(pilot, "slash", "escape")
        assert table.filter_text == "" and table.shown.height == table.source.height
        await press(pilot, "s")
        first_key = table.sort_key
        await press(pilot, "s")
        sort_key = table.sort_key
        assert sort_key is not None and sort_key != first_key
        values = table.shown[sort_key].to_list()
        assert len(set(values)) > 1, "the sort test needs a column with distinct values"
        descending = values == sorted(values, reverse=True)
        assert descending or values == sorted(values)
        await press(pilot, "S")
        assert table.shown[sort_key].to_list() == sorted(values, reverse=not descending)
        await press(pilot, "G")
        assert table.cursor_row == table.row_count - 1
        await press(pilot, "g")
        assert table.cursor_row == 0


async def test_idle_toggles_percent_and_absolute(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "2")
        table = pane(app, "#idle-by-stream").table
        assert "host_wait_pct" in [c.key for c in table.columns_spec]
        shown = table.source.sort("rank", "stream").row(0, named=True)
        made = idle.by_stream(small_traces, idle.IdleOptions()).sort("rank", "stream").row(0, named=True)
        assert (shown["host_wait_pct"], shown["host_wait_us"]) == (made["host_wait_pct"], made["host_wait_us"])
        await press(pilot, "a")
        assert "host_wait_us" in [c.key for c in table.columns_spec]
        assert table.source.sort("rank", "stream")["host_wait_us"][0] == made["host_wait_us"]


# ---- help, palette, themes, errors ---------------------------------------------------------
async def test_help_lists_every_key_of_the_view(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "5")
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        page = app.screen.page()
        for key in ("`m`", "`/`", "`p`", "`j`", "`y`", "`s`", "`[`", "`]`", "`1`", "`6`", "`q`"):
            assert key in page, key
        await press(pilot, "escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_palette_has_namespaced_entries(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        provider = HtaCommands(app.screen)
        titles = {entry.title: entry for entry in provider.entries()}
        for title in (
            "view: Temporal",
            "view: Counters",
            "rank: all",
            "rank: 1",
            "theme: htatui-256",
            "app: help",
        ):
            assert title in titles, title
        titles["rank: 1"].callback()
        await pilot.pause()
        assert app.selected_ranks == (1,)
        titles["theme: htatui-light"].callback()
        assert app.theme == "htatui-light"
        await press(pilot, "colon")
        assert app.screen.__class__.__name__ == "CommandPalette"
        await press(pilot, "escape")
        await press(pilot, "ctrl+p")
        assert app.screen.__class__.__name__ == "CommandPalette"


async def test_unknown_theme_notifies_and_falls_back(small_traces: TraceSet) -> None:
    app = make_app(small_traces, theme="no-such-theme")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        assert app.theme == theming.DEFAULT_THEME
        assert any("no-such-theme" in n.message for n in app._notifications)


def test_theme_files_are_valid_and_bad_ones_are_reported(tmp_path: Path) -> None:
    loaded = theming.load_themes(theming.themes_dir())
    assert {t.name for t in loaded.themes} >= {"htatui-dark", "htatui-light", "htatui-256"}
    assert loaded.problems == ()
    for theme in loaded.themes:
        assert set(theming.DOMAIN_VARIABLES) <= set(theme.variables)
    (tmp_path / "bad.toml").write_text('name = "bad"\nprimary = "not-a-colour"\n')
    (tmp_path / "broken.toml").write_text("name = [")
    (tmp_path / "ok.toml").write_text('name = "ok"\nprimary = "#5fafff"\n')
    result = theming.load_themes(tmp_path)
    assert [t.name for t in result.themes] == ["ok"]
    assert len(result.problems) == 2 and any("not-a-colour" in p for p in result.problems)


async def test_analysis_error_becomes_a_notification(small_traces: TraceSet, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object) -> pl.DataFrame:
        raise RuntimeError("boom")

    monkeypatch.setattr(overlap, "compute", broken)
    # A copy with no derived frames: the session's job may hold an overlap answer from an earlier
    # test in this worker, which the page would show without calling compute.
    app = make_app(dataclasses.replace(small_traces))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        await press(pilot, "4")
        assert app.current_mode == "overlap"
        assert any("boom" in n.message for n in app._notifications)
        await press(pilot, "1")
        assert app.current_mode == "temporal"


async def test_stale_results_are_dropped(small_traces: TraceSet) -> None:
    from htatui.tui.base.jobs import JobDone

    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "1")
        screen = app.screen
        assert isinstance(screen, ViewScreen)
        before = pane(app, "#temporal-main").table.source
        screen.post_message(JobDone("analysis", screen.request_id - 1, temporal.empty()))
        await pilot.pause()
        assert_frame_equal(pane(app, "#temporal-main").table.source, before)


# ---- traces without the data a view needs -------------------------------------------------
async def test_cpu_only_views_say_so_in_a_sentence(cpu_only_traces: TraceSet) -> None:
    app = make_app(cpu_only_traces, name="cpu_only")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        for number, mode in enumerate(NUMBERED, start=1):
            await press(pilot, str(number))
            if mode == "ops":  # CPU operators exist; only their GPU time is missing
                assert pane(app, "#ops-main").table.source.height > 0
                chart = app.screen.query_one("#ops-chart", Chart)
                assert chart._draw is None and "launched GPU work" in str(chart.render())
                continue
            shown = [p for p in app.screen.query(TablePane) if not p.has_class("-hidden")]
            assert shown and all(p.has_class("-empty") for p in shown), mode
            for p in shown:
                note = str(p.query_one(".empty-note").render())
                assert note.endswith(".") and len(note) > 20, (mode, note)
            for chart in app.screen.query(Chart):
                assert chart._draw is None and chart.has_class("-hidden"), (mode, chart.id)


async def test_patterns_for_a_typed_operator(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, page_keys()["patterns"])
        assert pane(app, "#patterns-main").has_class("-empty")
        note = str(pane(app, "#patterns-main").query_one(".empty-note").render())
        assert "aten::linear" in note and "aten::mm" in note
        app.screen.query_one("#input-operator").focus()
        await press(pilot, *"forward", "enter")
        expected = patterns.compute(small_traces, patterns.PatternsOptions(operator="forward"))
        assert expected.height > 0
        assert_frame_equal(pane(app, "#patterns-main").table.source, expected)
        detail = str(app.screen.query_one("#patterns-detail").render())
        assert "ampere_sgemm_128x64_tn" in detail


async def test_patterns_do_not_suggest_the_operator_just_tried(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, page_keys()["patterns"])
        before = str(pane(app, "#patterns-main").query_one(".empty-note").render()).split("Frequent here:")[1]
        assert "aten::mm" in before  # a frequent operator: one kernel per call, too few for a pattern
        field = app.screen.query_one("#input-operator", Input)
        field.focus()
        field.value = ""
        await press(pilot, *"aten::mm", "enter")
        assert pane(app, "#patterns-main").has_class("-empty")
        note = str(pane(app, "#patterns-main").query_one(".empty-note").render())
        assert "matching 'aten::mm'" in note
        assert "aten::mm" not in note.split("Frequent here:")[1]


# ---- export -------------------------------------------------------------------------------
async def test_export_modal_writes_counters_that_load_again(small_traces: TraceSet, tmp_path: Path) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        await press(pilot, page_keys()["counters"], "e")
        modal = app.screen
        assert isinstance(modal, ExportModal)
        modal.query_one("#export-folder", Input).value = str(tmp_path)
        await press(pilot, "enter")
        written = sorted(tmp_path.iterdir())
        assert [p.name for p in written] == ["rank-0_with_counters.json.gz", "rank-1_with_counters.json.gz"]
        assert modal.written == written
        assert str(written[0]) in str(modal.query_one("#export-status").render())
        reloaded = load_traces([written[0]], use_cache=False, max_workers=1)
        events = reloaded.ranks[0].events
        counters = events.filter(pl.col("ph") == "C")
        assert "Queue Length" in set(counters["name"].cast(pl.Utf8))
        before = written[0].stat().st_mtime_ns
        await press(pilot, "enter")  # the files exist now: it asks first
        assert modal.has_class("-ask") and "already exists" in str(modal.query_one("#export-status").render())
        await press(pilot, "n")
        assert written[0].stat().st_mtime_ns == before
        await press(pilot, "enter", "y")
        assert modal.has_class("-done")
        await press(pilot, "escape")
        assert not isinstance(app.screen, ExportModal)


async def test_bad_export_folder_gives_a_notification(small_traces: TraceSet, tmp_path: Path) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        app.action_export_counters()
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ExportModal)
        modal.query_one("#export-folder", Input).value = str(tmp_path / "missing")
        modal.query_one("#export-folder", Input).focus()
        await press(pilot, "enter")
        assert "Create it?" in str(modal.query_one("#export-status").render())
        await press(pilot, "n")
        assert isinstance(app.screen, ExportModal) and not list(tmp_path.iterdir())
        modal.query_one("#export-ranks", Input).value = "7"
        await press(pilot, "enter")
        assert "not loaded" in str(modal.query_one("#export-status").render())


async def test_patterns_overlay_export_from_the_palette(small_traces: TraceSet, tmp_path: Path) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, page_keys()["patterns"])
        app.screen.query_one("#input-operator").focus()
        await press(pilot, *"forward", "enter")
        entries = {entry.title: entry for entry in HtaCommands(app.screen).entries()}
        entries["export: patterns overlay…"].callback()
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ExportModal)
        modal.query_one("#export-folder", Input).value = str(tmp_path)
        await press(pilot, "enter")
        assert [p.name for p in tmp_path.iterdir()] == ["overlaid_rank-0.json.gz"]


async def test_steps_no_rank_has_are_named_at_start(small_traces: TraceSet) -> None:
    """`htatui JOB --steps 9` on a job with steps 1-3: one warning, and the header says so."""
    app = HtaTuiApp(
        Settings(paths=(Path("small"),), use_cache=False, max_workers=1, steps=Steps.parse("9")), traces=small_traces
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        messages = [str(n.message) for n in app._notifications]
        assert "--steps 9: no such step on the chosen ranks (steps 1-3)" in messages
        assert app.steps_label == "no step of 9 on these ranks (steps 1-3)"


async def test_palette_steps_change_every_view(small_traces: TraceSet) -> None:
    """The palette's `steps: all` counts the whole trace in every view; `steps: 2` that step only."""
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "1")
        assert app.available_steps() == [1, 2, 3]
        for steps, label in (
            (Steps("all"), "all steps 1-3 (whole trace)"),
            (Steps.parse("2"), "step 2 (steps 1,3 left out)"),
        ):
            app.set_steps(steps)
            await press(pilot)
            assert app.steps_label == label
            expected = temporal.compute(small_traces, temporal.TemporalOptions(Scope(steps=steps)))
            assert_frame_equal(pane(app, "#temporal-main").table.source, expected)
