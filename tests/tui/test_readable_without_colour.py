"""Issue 25's app items: every state reads as text at 80x24 (no colour needed), nothing runs off the edge.

Screens are read as the characters on screen (what `tmux capture-pane -p` shows), never as styles.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kineto_util import kernel, runtime, write_trace
from textual.app import App, ComposeResult
from tui_helpers import make_app, press, ready

from htatui.jobs.load import load_traces
from htatui.text.diff import diff_title
from htatui.trace import TraceSet
from htatui.tui.app import VIEWS
from htatui.tui.screens.export_modal import ExportModal
from htatui.tui.screens.help import HelpScreen
from htatui.tui.screens.temporal import TemporalScreen
from htatui.tui.screens.timeline import TimelineScreen, legend_text
from htatui.tui.themed_app import PALETTE_MARK
from htatui.tui.widgets.chart import Chart
from htatui.tui.widgets.status_bar import LETTER_KEYS, page_keys, status_pieces, tab_labels
from htatui.tui.widgets.table import CURSOR_MARK, Column, ViewTable, fitted_title


def screen_lines(app: App[Any]) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def export_fields(app: App[Any]) -> list[str]:
    """The export dialog's field labels as drawn: `▶ name` on the field with the focus."""
    found = [re.search(r"│ (▶| ) (ranks|folder) ", line) for line in screen_lines(app)]
    return [f"{m.group(1).strip()} {m.group(2)}" for m in found if m]


def key_of(mode: str) -> str:
    return page_keys()[mode]


def test_the_tab_bar_shows_every_view_key_at_80_columns_and_brackets_the_current_one() -> None:
    views = [(mode, title) for mode, title in VIEWS]
    assert len(views) == 13  # Diagnosis, Memory and Modules included: the widest bar there is
    keys = {**page_keys(), **LETTER_KEYS}
    for width in (80, 60, 40):
        line = "".join(text for text, _ in tab_labels(views, "ranks", width, keys))
        assert len(line) <= width
        assert "[9 Ranks]" in line  # the current view, whole and bracketed
        assert line.startswith("D ")  # the Diagnosis page, first, opened by its letter
        assert [int(n) for n in re.findall(r"(?<![\w])(\d)(?= |\]|$)", line)] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]
        # Pages past the tenth number (Modules, Critical path): no key, 3+ letters each.
        assert re.search(r" 0 \w* ?Mod\w* Cri\w*$", line.rstrip())
    roomy = "".join(text for text, _ in tab_labels(views, "temporal", 200, keys))
    assert " D Diagnosis " in roomy and "[1 Temporal]" in roomy and " 0 Memory " in roomy and " Critical path " in roomy


def test_the_tab_bar_keeps_each_pages_key_when_memory_is_hidden() -> None:
    shown = [(mode, title) for mode, title in VIEWS if mode != "memory"]
    line = "".join(text for text, _ in tab_labels(shown, "critical-path", 80, {**page_keys(), **LETTER_KEYS}))
    assert line.rstrip() == "D Dia 1 Tem 2 Idl 3 Ker 4 Ove 5 Lau 6 Cou 7 Ops 8 Pat 9 Ran Mod [Critical path]"


def test_the_diff_title_keeps_both_names_at_80_columns() -> None:
    base, test = "control_" + "a" * 60, "candidate_run_with_a_long_name_" + "b" * 40 + "_end"
    prefix, sides = diff_title(base, test, 80)
    assert len(prefix + sides) <= 80
    assert sides.startswith(" base control_") and "↔ test candidate_" in sides and sides.endswith("_end")
    assert diff_title("control", "test", 80) == (" htatui diff │", " base control ↔ test test")


async def test_80x24_cursor_focus_and_footers_read_without_colour(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert screen_lines(app)[0].startswith("[D Diagnosis]")  # the page the app opens on
        await press(pilot, "1")
        lines = screen_lines(app)
        assert lines[0].startswith("D Dia") and "[1 Temporal]" in lines[0]
        assert lines[-1].rstrip().endswith("▏^p palette") and "q Quit" in lines[-1]
        marked = [i for i, line in enumerate(lines) if line.lstrip().startswith(CURSOR_MARK)]
        assert len(marked) == 1  # one cursor row, in the focused table
        await press(pilot, "j")
        assert [i for i, line in enumerate(screen_lines(app)) if line.lstrip().startswith(CURSOR_MARK)] == [
            marked[0] + 1
        ]
        # The timeline: its letters explained on screen, and Quit kept at the footer's end.
        await press(pilot, "t")
        assert isinstance(app.screen, TimelineScreen)
        lines = screen_lines(app)
        assert any(line.rstrip() == legend_text(80).rstrip() for line in lines)  # whole, not cut
        rows = [line for line in lines if re.match(r"r\d+ (thread|stream) ", line)]
        assert len([row for row in rows if CURSOR_MARK in row]) == 1  # the cursor's row, marked in text
        assert lines[-1].rstrip().endswith("q Quit")
        await press(pilot, "escape")
        # The export dialog: the field that takes the typing is marked, and the mark follows tab.
        await press(pilot, key_of("counters"), "e")
        assert isinstance(app.screen, ExportModal)
        assert export_fields(app) == [" ranks", "▶ folder"]
        await press(pilot, "tab")
        assert export_fields(app) == ["▶ ranks", " folder"]


async def test_m_brings_the_launch_histogram_into_sight_with_short_tick_labels(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, key_of("launch"))
        assert not any("Histogram of" in line for line in screen_lines(app))  # below the tables
        await press(pilot, "m")
        lines = screen_lines(app)
        title = next(line for line in lines if "Histogram of" in line)
        assert "▶ Histogram of launch call on the CPU (µs)" in title  # in sight, and marked focused
        chart = app.screen.query_one("#launch-histogram", Chart)
        drawn = "\n".join(lines[lines.index(title) :])
        assert chart.region.y < 24 and not re.search(r"\d\.\d{5,}", drawn)


async def test_skipped_files_stay_in_the_status_line(tmp_path: Path) -> None:
    write_trace(tmp_path / "rank-0.json", [runtime("cudaLaunchKernel", 0, 5, 1), kernel("k", 10, 20, corr=1)])
    (tmp_path / "rank-1.json").write_text(json.dumps({"traceEvents": "not a list"})[:20], encoding="utf-8")
    traces = load_traces([tmp_path], use_cache=False, max_workers=1)
    assert len(traces.problems) == 1
    app = make_app(traces, name="job")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        app.clear_notifications()  # the toasts fade; the line stays
        await pilot.pause()
        assert "│ ⚠ 1 file skipped (N)" in screen_lines(app)[1]


async def test_help_counts_every_key_of_a_burst(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press(*"jjjjjjjjjj")  # no pause between the keys
        await pilot.pause()
        assert app.screen.scroller.scroll_y == 10
        await pilot.press("k", "k", "k")
        await pilot.pause()
        assert app.screen.scroller.scroll_y == 7


def test_temporal_help_says_a_straggler_idles_least() -> None:
    assert "*least* idle" in TemporalScreen.HELP and "much more idle time" not in TemporalScreen.HELP


class NamesApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ViewTable("names")


async def test_name_columns_use_a_wide_terminal(tmp_path: Path) -> None:
    import polars as pl

    names = [f"module_{i}.layer.attention.{'x' * 110}.forward_{i}" for i in range(3)]
    frame = pl.DataFrame({"name": names, "time_us": [3.0, 2.0, 1.0]})
    columns = [Column("name", "name", "text"), Column("time_us", "time (µs)")]
    widths = {}
    for width in (80, 120, 200):
        app = NamesApp()
        async with app.run_test(size=(width, 10)) as pilot:
            table = app.query_one(ViewTable)
            table.set_frame(frame, columns)
            await pilot.pause()
            widths[width] = table.ordered_columns[0].get_render_width(table)
            row = next(line for line in screen_lines(app) if "module_0" in line)
            if width == 200:
                assert names[0] in row  # room for the whole name: no cut
    assert widths[80] < widths[120] < widths[200]
    assert widths[120] > 80  # the name takes what the numbers leave, not a fixed ~36


async def test_a_narrow_table_cuts_its_names_before_it_leaves_out_a_number_column() -> None:
    import polars as pl

    numbers = {f"n{i}_us": [float(i)] for i in range(3)}
    frame = pl.DataFrame({"name": ["x" * 60], **numbers})
    columns = [Column("name", "name", "text"), *(Column(key, f"n{key[1]} time (µs)") for key in numbers)]
    app = NamesApp()
    async with app.run_test(size=(80, 10)) as pilot:
        table = app.query_one(ViewTable)
        table.set_frame(frame, columns)
        await pilot.pause()
        assert table.left_out == []  # a 36-cell name would have pushed n2 out
        assert 28 <= table.ordered_columns[0].get_render_width(table) - 2 < 36


def test_a_narrow_footer_drops_the_palette_hint_then_keys_but_never_help_or_quit() -> None:
    from textual.widgets._footer import FooterKey

    from htatui.tui.widgets.footer import fitting_keys, key_width

    def key(display: str, description: str, action: str, classes: str = "") -> FooterKey:
        return FooterKey(display, display, description, action, classes=classes)

    keys = [
        key("s", "Sort", "sort"),
        key("c", "Status", "status"),
        key("b", "Bars", "bars"),
        key("?", "Help", "help"),
        key("q", "Quit", "quit"),
        key("^p", "palette", "command_palette", classes="-command-palette"),
    ]
    assert fitting_keys(keys, 200) == keys
    every = sum(key_width(k) for k in keys)
    assert [k.key for k in fitting_keys(keys, every - 1)] == ["s", "c", "b", "?", "q"]
    assert [k.key for k in fitting_keys(keys, 21)] == ["s", "?", "q"]  # 7 cells each
    assert [k.key for k in fitting_keys(keys, 5)] == ["?", "q"]


def test_the_status_line_cuts_the_name_before_the_steps_and_their_keys() -> None:
    """Issue 38 #5: at 80 columns the steps note read `steps 2-4 (last step 5 left` and the Critical
    path page's `step 4 of 2-4 (, .`."""
    name = "h100_resnet_eager_with_a_long_folder_name"
    for steps, state in (
        ("steps 2-4 (last step 5 left out)", "computing… (esc cancels)"),
        ("step 4 of 2-4 (, . another · a all)", "ready"),
    ):
        line = "".join(text for text, _ in status_pieces(name, "all (8)", [], steps, state, 80))
        assert len(line) <= 80, line
        assert ("steps 2-4 (last step 5 left out)" in line) or ("step 4 of 2-4 (, . another · a all)" in line)
    line = "".join(
        text
        for text, _ in status_pieces(
            name, "0-7 (8/16)", [], "step 4 of 2-4 (, . another · a all)", "computing… (esc cancels)", 60
        )
    )
    assert len(line) <= 60 and "step 4 of 2-4 (, . a)" in line, line


def test_a_pane_title_cuts_its_note_not_its_counts() -> None:
    note = "method: who the others waited for at collectives (meeting points: communication kernels)"
    title = fitted_title("Stragglers", note, ["showing 200 of 5,000", "3 more columns (w)"], 76)
    assert (
        len(title) <= 76
        and title.startswith("Stragglers · method: who")
        and title.endswith("· showing 200 of 5,000 · 3 more columns (w)")
    )
    assert fitted_title("Stragglers", note, ["3 more columns (w)"], 200).endswith(f"{note} · 3 more columns (w)")
    assert (
        fitted_title("A long title of a pane", note, ["3 more columns (w)"], 40)
        == "A long title of a pane · 3 more columns (w)"
    )


def test_the_timeline_legend_fits_80_columns() -> None:
    assert len(legend_text(80)) <= 80 and "comp" in legend_text(80) and "<½ busy" in legend_text(80)
    assert "compute" in legend_text(120) and "runtime" in legend_text(120)


async def test_the_palettes_highlighted_entry_is_marked_in_text(small_traces: TraceSet) -> None:
    """Issue 38 #5: a plain capture showed no ▶ on the palette's highlighted entry."""
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, "colon")
        await pilot.press(*"rank")
        await pilot.pause(0.5)
        await press(pilot, "down")
        marked = [line for line in screen_lines(app) if line.lstrip().startswith(PALETTE_MARK.strip())]
        assert len(marked) == 1 and "rank" in marked[0], screen_lines(app)
        await press(pilot, "down")
        again = [line for line in screen_lines(app) if line.lstrip().startswith(PALETTE_MARK.strip())]
        assert len(again) == 1 and again != marked
