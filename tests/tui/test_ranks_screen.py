"""The Ranks screen: heat map, stragglers, phases on Enter, collectives (Pilot + 80x24 snapshot)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kineto_util import traces_of
from polars.testing import assert_frame_equal
from ranks_jobs import gloo_rank, skewed_rank
from textual.pilot import Pilot
from textual.widgets import Static
from tui_helpers import make_app, press, ready

from htatui.analysis.views import ranks
from htatui.trace import TraceSet
from htatui.tui.screens.ranks import RanksScreen, heat_level
from htatui.tui.widgets.status_bar import page_keys
from htatui.tui.widgets.table_pane import TablePane

RANKS_KEY = page_keys()["ranks"]


@pytest.fixture
def gloo_job(tmp_path: Path) -> TraceSet:
    return traces_of(tmp_path, *(gloo_rank(r) for r in range(4)))


def test_heat_levels() -> None:
    assert [heat_level(v, 100, 500) for v in (100, 199, 300, 499, 500)] == [0, 1, 2, 4, 4]
    assert heat_level(7, 7, 7) == 0
    # Issue 38 #6: 16.37 and 16.38 ms were the two ends of the scale (· and █); the scale spans at
    # least 10 % of the largest value, so they are one level, and 14.8 ms (-10 %) is the lowest.
    assert heat_level(16_370, 16_370, 16_380) == heat_level(16_380, 16_370, 16_380) == 4
    assert heat_level(14_742, 14_742, 16_380) == 0


async def test_ranks_screen_shows_stragglers_and_phases(gloo_job: TraceSet) -> None:
    app = make_app(gloo_job)
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        await press(pilot, RANKS_KEY)
        assert isinstance(app.screen, RanksScreen)
        expected = ranks.analyse(gloo_job, ranks.RanksOptions())
        stragglers = app.screen.query_one("#stragglers-main", TablePane).table
        assert_frame_equal(stragglers.source, ranks.stragglers(gloo_job, ranks.RanksOptions()).frame)
        assert stragglers.source.drop("hta_late_starts").equals(expected.stragglers)
        assert "method: who the others waited for at collectives" in stragglers.note
        assert_frame_equal(app.screen.query_one("#collectives-main", TablePane).table.source, expected.collectives)
        heat = str(app.screen.query_one("#ranks-heat", Static).render())
        # step time is 1000 µs everywhere: every cell is the lowest glyph and 1.00 ms; rank 2 leads
        assert "step 1" in heat and " · 1.00" in heat
        assert heat.splitlines()[3].split() == ["r2", "▲·", "1.00", "▲·", "1.00"]
        await press(pilot, "m")  # GPU busy
        await press(pilot, "m", "m", "m")  # wait at collectives: fast ranks 0.30 ms (█), rank 2 0 (·)
        heat = str(app.screen.query_one("#ranks-heat", Static).render())
        assert "wait at collectives" in heat and "█ 0.30" in heat and "· 0.00" in heat
        phases = app.screen.query_one("#stragglers-phases", TablePane).table
        assert "rank 2 against the other ranks' median, steps 1,2" in phases.note  # the top straggler
        stragglers.focus()
        app.clear_notifications()
        await press(pilot, "enter")  # rank 2 again: `report --view stragglers --phases --straggler 2`
        assert app.screen.view_options["stragglers"].straggler == 2  # type: ignore[attr-defined]
        assert not list(app._notifications)  # no toast over the phases the enter opened
        top = phases.shown.row(0, named=True)
        assert (top["phase"], top["rank_us"], top["others_median_us"], top["excess_us"]) == (
            "data_loader",
            800.0,
            200.0,
            600.0,
        )


async def test_ranks_screen_one_rank_says_so(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, skewed_rank(0))
    app = make_app(traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, RANKS_KEY)
        note = app.screen.query_one("#stragglers-main .empty-note", Static)
        assert str(note.render()) == "The job has one rank: stragglers need two or more."


def test_ranks_snapshot_80x24(snap_compare: Callable[..., bool], gloo_job: TraceSet) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await press(pilot, RANKS_KEY)

    assert snap_compare(make_app(gloo_job), terminal_size=(80, 24), run_before=run_before)


async def test_overlap_on_gloo_says_collectives_run_on_the_cpu(tmp_path: Path) -> None:
    from kineto_util import kernel, runtime

    from htatui.analysis.views.overlap import CPU_COLLECTIVES
    from htatui.tui.widgets.chart import Chart
    from htatui.tui.widgets.table_pane import sentence

    # GPU compute but no communication kernel: the all_reduce is a gloo CPU op.
    gpu = [runtime("cudaLaunchKernel", 10, 5, 1), kernel("sm80_xmma_gemm_f32", 20, 50, corr=1)]
    traces = traces_of(tmp_path, *(gloo_rank(r) + gpu for r in range(2)))
    app = make_app(traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, page_keys()["overlap"])
        chart = app.screen.query_one("#overlap-chart", Chart)
        assert "run on the CPU" in CPU_COLLECTIVES and "single-GPU" not in CPU_COLLECTIVES
        assert chart._empty == sentence(CPU_COLLECTIVES)


async def test_the_cause_is_kept_whole_at_80_columns() -> None:
    """Issue 38 #1: at 80x24 the Ranks page cut a straggler's cause (`data_…08 µs)`) and kept
    is_straggler, steps and calls_last; the cause is the answer, the others go first."""
    from htatui.jobs.load import load_traces

    demo = load_traces([Path(__file__).resolve().parents[2] / "fixtures" / "demo"], use_cache=False, max_workers=1)
    app = make_app(demo, "demo")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, RANKS_KEY)
        table = app.screen.query_one("#stragglers-main", TablePane).table
        shown = [str(column.key.value) for column in table.ordered_columns]
        assert shown[:3] == ["rank", "delay_us", "cause"] and "calls_last" not in shown
        cause = table.get_row_at(0)[shown.index("cause")].plain
        assert cause.startswith("GPU compute: 100 % of the delay (+14,492 µs"), cause
        assert sum(column.get_render_width(table) for column in table.ordered_columns) <= table.size.width
