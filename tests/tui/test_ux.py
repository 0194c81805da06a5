"""What a new user trips on: charts that label the right bars, numbers never cut, keys that can be found."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate
from textual.pilot import Pilot
from tui_helpers import make_app, press, ready

from fixtures.generate import write_scenario
from htatui.trace import TraceSet
from htatui.tui.diff_app import DiffApp
from htatui.tui.screens.diff import DiffScreen
from htatui.tui.screens.idle import IdleScreen
from htatui.tui.widgets.chart import BarRows, Chart, Series
from htatui.tui.widgets.table import Column, ViewTable, short_kernel_name
from htatui.tui.widgets.table_pane import TablePane


def screen_lines(app: App[Any]) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


class ChartApp(App[None]):
    CSS = "Chart { height: 7; min-height: 7; }"  # a top border and six rows

    def compose(self) -> ComposeResult:
        yield Chart("bars", id="chart")


async def test_bar_rows_keep_each_label_beside_its_own_value() -> None:
    labels = [f"op{i}" for i in range(10)]
    values = [1000.0 * (10 - i) + 0.5 for i in range(10)]
    app = ChartApp()
    async with app.run_test(size=(60, 12)) as pilot:
        chart = app.query_one(Chart)
        chart.show(BarRows(labels, [Series("gpu self", values)]))
        await pilot.pause()
        lines = str(chart.render()).splitlines()
    # Six rows: five bars and a line counting the five left out; every label sits beside its value.
    assert len(lines) == 6
    for index, line in enumerate(lines[:5]):
        assert line.startswith(f"op{index} ")
        assert line.rstrip().endswith(f"{values[index]:,.1f}")
    assert lines[5].startswith("… 5 more")
    # The bars' lengths follow the values: the first is the longest, and each is shorter than the last.
    lengths = [line.count("█") for line in lines[:5]]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] > lengths[4]


async def test_stacked_bar_rows_show_a_small_share() -> None:
    app = ChartApp()
    async with app.run_test(size=(60, 12)) as pilot:
        chart = app.query_one(Chart)
        series = [Series("compute", [90.0]), Series("idle", [3.0])]
        chart.show(BarRows(["r0"], series, unit="%", notes=["idle 3.0%"]))
        await pilot.pause()
        line = str(chart.render()).splitlines()[0]
    # 3 % of the ~48-cell bar is one cell of the second fill, never rounded away.
    assert line.count("▓") >= 1 and line.count("█") > 40
    assert line.rstrip().endswith("idle 3.0%")


async def test_ops_chart_labels_match_the_table_at_80x24(small_traces: TraceSet) -> None:
    async with make_app(small_traces).run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "7")
        screen = pilot.app.screen
        frame = screen.query_one("#ops-main", TablePane).table.source
        totals = dict(frame.group_by("name").agg(pl.col("gpu_self_us").sum()).iter_rows())
        chart = screen.query_one("#ops-chart", Chart)
        lines = [line for line in str(chart.render()).splitlines() if not line.startswith("…")]
    assert lines
    for line in lines:
        label, value = line.split()[0], line.split()[-1]
        full = next(n for n in totals if n == label or n.endswith(label) or n.startswith(label.rstrip("…")))
        assert value == f"{totals[full]:,.1f}"


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ViewTable("t")


async def test_numbers_widen_their_column_instead_of_being_cut() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 10)) as pilot:
        table = app.query_one(ViewTable)
        frame = pl.DataFrame({"name": ["a"], "delta_us": [8_204_993.25]})
        table.set_frame(frame, [Column("name", "name", "text", width=6), Column("delta_us", "Δ µs", "us", width=6)])
        await pilot.pause()
        text = "\n".join(screen_lines(app))
    assert "8,204,993.2" in text


async def test_hidden_columns_are_announced_and_enter_shows_the_full_name() -> None:
    app = TableApp()
    long_name = "void at::native::(anonymous namespace)::vectorized_elementwise_kernel<4, float>(int, float*)"
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(ViewTable)
        frame = pl.DataFrame({"name": [long_name], **{f"c{i}_us": [float(i)] for i in range(8)}})
        table.set_frame(
            frame,
            [Column("name", "name", "text", width=20)]
            + [Column(f"c{i}_us", f"c{i} (µs)", "us", width=8) for i in range(8)],
        )
        table.focus()
        await pilot.pause()
        # Only the columns that fit are shown, whole, and the title says how many more there are.
        assert "7 more columns (w)" in str(table.border_title)
        assert [str(c.key.value) for c in table.ordered_columns] == ["name", "c0_us"]
        assert table.hidden_columns() == 0
        await pilot.press("w")
        assert len(table.ordered_columns) == 9
        assert re.search(r"→ \d+ more columns", str(table.border_title))
        hidden = table.hidden_columns()
        table.scroll_x = table.max_scroll_x
        await pilot.pause()
        assert table.hidden_columns() < hidden
        shown = str(table.get_cell_at(Coordinate(0, 0)))
        assert shown == "vectorize…ise_kernel"  # namespaces, templates and arguments dropped first
        await pilot.press("enter")
        await pilot.pause()
        assert any(n.message == long_name for n in app._notifications)


@pytest.fixture(scope="module")
def diff_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("uxdiff")
    write_scenario("diff", root)
    return root


async def wait_diff(pilot: Pilot[Any]) -> DiffScreen:
    for _ in range(600):
        screen = pilot.app.screen
        if isinstance(screen, DiffScreen) and screen.has_class("-ready"):
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            return screen
        await pilot.pause(0.05)
    raise AssertionError("the diff did not finish")


async def test_diff_footer_keeps_help_and_quit_and_question_mark_opens_help(diff_root: Path) -> None:
    from htatui.tui.screens.help import HelpScreen

    app = DiffApp(diff_root / "base", diff_root / "test", use_cache=False, max_workers=1)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_diff(pilot)
        footer = screen_lines(app)[-1]
        assert "? Help" in footer and "q Quit" in footer
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        page = app.screen.page()
        assert "# Diff" in page and "`i`" in page and "`c`" in page


async def test_diff_names_stay_distinct_and_numbers_whole(diff_root: Path) -> None:
    app = DiffApp(diff_root / "base", diff_root / "test", use_cache=False, max_workers=1)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await wait_diff(pilot)
        table = screen.query_one("#names", TablePane).table
        shown = [str(table.get_cell_at(Coordinate(row, 0))) for row in range(table.row_count)]
        full = table.shown["name"].to_list()
        text = "\n".join(screen_lines(app))
    assert len(set(shown)) == len(set(full))
    # A name shortened by meaning: no doubled or leading '::' from a dropped anonymous namespace.
    assert not any(name.startswith("::") or "::::" in name for name in shown)
    for number in re.findall(r"[-+]?\d[\d,]*\.\d+", text):
        assert re.fullmatch(r"[-+]?\d{1,3}(,\d{3})*\.\d+", number), number


async def test_diff_is_in_the_footer_help_and_palette_and_every_key_is_in_the_palette(
    small_traces: TraceSet,
) -> None:
    from htatui.tui.commands import HtaCommands
    from htatui.tui.screens.help import HelpScreen, bindings_of

    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert "d Diff" in screen_lines(app)[-1]
        await press(pilot, "2")
        screen = app.screen
        provider = HtaCommands(screen)
        entries = list(provider.entries())
        titles = [entry.title for entry in entries]
        for query in ("diff", "compare"):
            assert any(provider.matcher(query).match(title) > 0 for title in titles), query
        helps = {entry.help for entry in entries}
        # Every key of the view and of its focused table has an entry that names the key.
        for binding in [*bindings_of(type(screen)), *bindings_of(ViewTable)]:
            key = binding.key_display or binding.key.split(",")[0]
            assert f"Key {key}" in helps, binding.key
        # A palette entry runs the action: the idle view's %/µs toggle.
        assert isinstance(screen, IdleScreen)
        absolute = screen.absolute
        outcome = next(e for e in entries if e.help == "Key a").callback()
        if inspect.isawaitable(outcome):
            await outcome
        await pilot.pause()
        assert screen.absolute != absolute
        await press(pilot, "question_mark")
        assert isinstance(app.screen, HelpScreen)
        page = app.screen.page()
        for key in ("`d`", "`N`", "`w`", "`a`", "`z`"):
            assert key in page, key


async def test_load_notes_go_to_the_status_line_and_n(tmp_path: Path) -> None:
    from kineto_util import kernel, runtime, step, write_trace

    from htatui.jobs.load import load_traces
    from htatui.tui.screens.notes import NotesScreen

    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)]
    write_trace(tmp_path / "job" / "trace.json", events)
    traces = load_traces([tmp_path / "job"], use_cache=False, max_workers=1)
    assert traces.notes
    app = make_app(traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert "1 load note (N)" in screen_lines(app)[1]
        assert not app._notifications
        await press(pilot, "N")
        assert isinstance(app.screen, NotesScreen)
        text = str(app.screen.query_one("#notes-text").render())
        assert "using rank 0" in text
        await press(pilot, "escape")
        assert not isinstance(app.screen, NotesScreen)


def test_the_readme_tour_names_only_keys_the_app_binds() -> None:
    from htatui.tui.app import VIEW_SCREENS, HtaTuiApp
    from htatui.tui.screens.help import bindings_of
    from htatui.tui.screens.timeline import TimelineScreen
    from htatui.tui.widgets.status_bar import LETTER_KEYS, page_keys

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "p ranks" in readme and "r ranks" not in readme and "d diff" in readme
    paragraph = readme[readme.index("**In the app.**") : readme.index("- **Your own keys.**")]
    names = {"esc": "escape", "/": "slash", "?": "question_mark", "[": "left_square_bracket"}
    names |= {"]": "right_square_bracket", ":": "colon", "tab": "tab", ",": "comma", ".": "full_stop"}
    bound = {"tab"}
    classes: list[type] = [HtaTuiApp, ViewTable, DiffScreen, TimelineScreen]
    classes += [screen for _mode, _title, screen in VIEW_SCREENS]
    for cls in classes:
        for binding in bindings_of(cls):
            bound.update(key.strip() for key in binding.key.split(","))
    quoted = re.findall(r"`([^`]+)`", paragraph)
    assert len(quoted) > 30
    for key in quoted:
        assert names.get(key, key) in bound, key
    keys = {**page_keys(), **LETTER_KEYS}
    for mode, title, _screen in VIEW_SCREENS:
        assert (f"`{keys[mode]}` {title}" if mode in keys else f"the {title} page") in paragraph


async def test_notices_do_not_outlive_the_diff_screen(diff_root: Path) -> None:
    from htatui.jobs.load import load_traces

    base = load_traces([diff_root / "base"], use_cache=False, max_workers=1)
    test = load_traces([diff_root / "test"], use_cache=False, max_workers=1)
    app = make_app(base)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        app.push_screen(DiffScreen(diff_root / "base", diff_root / "test", base_traces=base, test_traces=test))
        screen = await wait_diff(pilot)
        screen.query_one("#names", TablePane).table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app._notifications
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DiffScreen)
        assert not app._notifications


def test_diff_counts_print_as_integers(diff_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from htatui.cli.main import main

    assert main(["diff", str(diff_root / "base"), str(diff_root / "test"), "--format", "json", "--no-cache"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(isinstance(row[key], int) for row in rows for key in ("base_count", "delta_count"))


def test_path_completion(tmp_path: Path) -> None:
    from htatui.tui.screens.path_prompt import complete_path

    for name in ("job_base", "job_test", "notes.txt"):
        (tmp_path / name).mkdir() if name.startswith("job") else (tmp_path / name).write_text("")
    assert complete_path(f"{tmp_path}/jo") == (f"{tmp_path}/job_", ["job_base", "job_test"])
    assert complete_path(f"{tmp_path}/job_t") == (f"{tmp_path}/job_test/", ["job_test"])
    assert complete_path(f"{tmp_path}/nothing") == (f"{tmp_path}/nothing", [])
    assert complete_path(f"{tmp_path}/no-such-folder/x") == (f"{tmp_path}/no-such-folder/x", [])


async def test_tab_completes_in_the_path_prompt(small_traces: TraceSet, tmp_path: Path) -> None:
    from textual.widgets import Input

    from htatui.tui.screens.path_prompt import PathPrompt

    (tmp_path / "second_job").mkdir()
    async with make_app(small_traces).run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "d")
        assert isinstance(pilot.app.screen, PathPrompt)
        field = pilot.app.screen.query_one("#path", Input)
        field.value = f"{tmp_path}/sec"
        field.cursor_position = len(field.value)
        await press(pilot, "tab")
        assert field.value == f"{tmp_path}/second_job/"


async def test_export_offers_to_create_a_missing_folder(small_traces: TraceSet, tmp_path: Path) -> None:
    from textual.widgets import Input

    from htatui.tui.screens.export_modal import ExportModal

    target = tmp_path / "new" / "out"
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        app.action_export_counters()
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ExportModal)
        modal.query_one("#export-folder", Input).value = str(target)
        modal.query_one("#export-folder", Input).focus()
        await press(pilot, "enter")
        assert "Create it?" in str(modal.query_one("#export-status").render())
        assert not target.exists()
        await press(pilot, "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert sorted(p.name for p in target.iterdir()) == sorted(p.name for p in modal.written)
        assert len(modal.written) == len(small_traces.rank_ids)


async def test_kernels_filter_moves_the_across_ranks_pane(small_traces: TraceSet) -> None:
    async with make_app(small_traces).run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "3")
        screen = pilot.app.screen
        spread = screen.query_one("#kernel-spread-main", TablePane).table
        assert "ampere_sgemm" in str(spread.title)
        await press(pilot, "slash", *"AllR", "enter")
        table = screen.query_one("#kernels-main", TablePane).table
        assert table.shown.height and all("AllR" in name for name in table.shown["name"])
        assert "AllR" in str(spread.title) and str(spread.title).startswith(short_kernel_name(table.shown["name"][0]))
        assert spread.shown.height == table.source["rank"].n_unique()  # the kernel on every rank


def test_patterns_suggests_only_operators_that_launch_gpu_work(tmp_path: Path) -> None:
    from kineto_util import cpu_op, kernel, runtime, step, traces_of

    from htatui.analysis.views import patterns

    events = [step(1, 0, 1000), step(2, 1000, 1000), step(3, 2000, 1000)]
    for n in range(6):  # a frequent operator that launches nothing
        events.append(cpu_op("aten::empty", 10 + n * 300, 5))
    for n in range(2):  # a rarer one that launches a kernel
        start = 100 + n * 1000
        events += [cpu_op("aten::mm", start, 50), runtime("cudaLaunchKernel", start + 10, 5, corr=n + 1)]
        events.append(kernel("gemm", start + 20, 30, corr=n + 1))
    traces = traces_of(tmp_path, events)
    assert patterns.operators(traces, patterns.PatternsOptions(rank=0)).rows() == [(0, "aten::mm", 2)]


async def test_rank_picker_cursor_has_a_glyph(small_traces: TraceSet) -> None:
    from htatui.tui.screens.rank_picker import RankPicker

    async with make_app(small_traces).run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "p")
        picker = pilot.app.screen
        assert isinstance(picker, RankPicker)
        prompts = [str(picker.rank_list.get_option_at_index(i).prompt) for i in range(2)]
        assert prompts == ["▶ rank 0", "  rank 1"]
        await press(pilot, "j")
        prompts = [str(picker.rank_list.get_option_at_index(i).prompt) for i in range(2)]
        assert prompts == ["  rank 0", "▶ rank 1"]


async def test_a_skewed_clock_is_in_the_notes_made_by_the_load_worker(tmp_path: Path) -> None:
    """Rank 3's clock an hour off: the app, loading the folder itself, lists it under N (the notes
    are made in the load worker, off the screen's thread)."""
    from kineto_util import write_trace
    from ranks_jobs import gloo_rank

    from htatui.tui.app import HtaTuiApp, Settings

    for rank in range(4):
        events = gloo_rank(rank)
        if rank == 3:
            events = [{**event, "ts": event["ts"] + 3600 * 1e6} for event in events]
        write_trace(tmp_path / f"rank-{rank}.json", events, rank=rank, base_ns=1_700_000_000_000_000_000)
    app = HtaTuiApp(Settings(paths=(tmp_path,), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        line = "rank 3 (rank-3.json): its 3 collective calls end +3,600,000,000 µs from the other ranks' (median)"
        assert [note for note in app.load_notes if note.startswith(line)] != []
