"""The registry is the one list of views: every table reaches `report`, every page has a screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from htatui.analysis import registry as views
from htatui.analysis.core.scope import Scope
from htatui.analysis.diff import summary as diff_summary
from htatui.analysis.registry import PAGES, VIEWS, frame_of
from htatui.cli.main import main
from htatui.jobs.load import load_traces
from htatui.text.render import csv_text
from htatui.trace import TraceSet

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
ROUTES = [(view, table) for view in VIEWS for table in view.tables]
NEEDS_RECORDING = {"cupti", "memory", "modules"}
"""Views of a recording mode the demo was not made with (the CUPTI range profiler,
profile_memory=True, with_modules): the demo leaves them empty, and their own tests fill them from
a shared or hand-made trace (tests/analysis/test_cupti.py, tests/cli/test_memory_cli.py,
tests/analysis/test_modules.py)."""


@pytest.fixture(scope="module")
def demo() -> TraceSet:
    return load_traces([DEMO], use_cache=False, max_workers=1)


@pytest.mark.parametrize(("view", "table"), ROUTES, ids=[f"{v.id}:{t.name}" for v, t in ROUTES])
def test_every_table_prints_through_report(
    view: views.View[Any],
    table: views.Table[Any],
    demo: TraceSet,
    capsys: pytest.CaptureFixture[str],
    cli_module_job: None,
) -> None:
    # report's job is the module's (cli_module_job): each table is made once by report, from the
    # events or from what report derived for an earlier table, and once here from `demo`. That a
    # table made afresh equals one made beside the others is test_memo's (every route, both modes).
    # A view with summary tables (launch) prints its main table behind --full.
    main_flags = ["--full"] if view.summary_tables else []
    flags = main_flags if table is view.main else [f"--{table.name}"]
    code = main(["report", str(DEMO), "--no-cache", "--view", view.id, *flags, "--format", "csv"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    expected, _message = frame_of(table.compute(demo, view.options()))
    # write_csv of the floats kept to their unit's precision (tests/cli/test_report_width.py)
    assert printed.out == csv_text(expected, table.columns)


def test_the_demo_exercises_most_routes(demo: TraceSet) -> None:
    """A route test over empty tables proves little: the demo must fill most of them."""
    routes = [(v, t) for v, t in ROUTES if v.id not in NEEDS_RECORDING]
    empty = [f"{v.id}:{t.name}" for v, t in routes if frame_of(t.compute(demo, v.options()))[0].height == 0]
    assert len(empty) <= 3, empty


def test_pages_name_registered_views_once() -> None:
    shown = [view_id for page in PAGES for view_id in page.views]
    assert len(shown) == len(set(shown)) and set(shown) <= set(views.BY_ID)
    assert len({page.id for page in PAGES}) == len(PAGES)


def test_every_page_has_a_screen_and_the_diff_compares_the_headline_views() -> None:
    from htatui.tui.app import SCREENS

    assert set(SCREENS) == {page.id for page in PAGES}
    assert set(diff_summary.HEADLINE_METRICS) == {view.id for view in views.headline_views()}


PER_RANK = [(view, table) for view, table in ROUTES if table.per_rank]


@pytest.fixture(scope="module")
def demo_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from htatui.jobs.ingest import ingest

    target = tmp_path_factory.mktemp("registry") / "demo.ds"
    ingest([DEMO], target, max_workers=1)
    return target


@pytest.mark.parametrize(("view", "table"), PER_RANK, ids=[f"{v.id}:{t.name}" for v, t in PER_RANK])
def test_per_rank_tables_are_made_a_rank_at_a_time_over_a_dataset(
    view: views.View[Any], table: views.Table[Any], demo: TraceSet, demo_dataset: Path
) -> None:
    """A table marked per_rank is the same made from all ranks at once or rank by rank, in rank order;
    over a dataset `make_table` reads one rank at a time and leaves none of them in memory."""
    expected, expected_note = views.frame_of(table.compute(demo, view.options()))
    # The demo has no runtime outliers and no CUPTI ranges: those two compare empty tables and their notes.
    assert expected.height > 0 or table.name == "runtime-outliers" or view.id == "cupti"
    stored = load_traces([demo_dataset])
    made, made_note = views.frame_of(views.make_table(table, stored, view.options()))
    assert made.equals(expected) and made_note == expected_note
    assert not any(rank.loaded for rank in stored.ranks.values())
    some = view.options(Scope(ranks=(1, 3)))
    some_made = views.frame_of(views.make_table(table, load_traces([demo_dataset]), some))
    some_expected = views.frame_of(table.compute(demo, some))
    assert some_made[0].equals(some_expected[0]) and some_made[1] == some_expected[1]


@pytest.mark.parametrize("view_id", ["kernel-types", "kernels", "kernel-spread"])
def test_kernel_views_keep_only_the_kernels_of_a_dataset(view_id: str, demo: TraceSet, demo_dataset: Path) -> None:
    """Cross-rank kernel tables read a dataset's ranks one at a time and keep only their kernels."""
    view = views.BY_ID[view_id]
    for options in (view.options(), view.options(Scope(hta_compat=True)), view.options(Scope(ranks=(0, 2)))):
        stored = load_traces([demo_dataset])
        made = view.main.compute(stored, options)
        assert isinstance(made, pl.DataFrame) and made.height > 0
        assert made.equals(frame_of(view.main.compute(demo, options))[0])
        assert not any(rank.loaded for rank in stored.ranks.values())


def test_the_ops_bars_over_a_dataset_read_a_rank_at_a_time(demo: TraceSet, demo_dataset: Path) -> None:
    """The Ops page's bars sum the per-rank ops tables: over a dataset made a rank at a time, the same bars."""
    from htatui.analysis.views import ops

    stored = load_traces([demo_dataset])
    made = ops.top(stored, ops.OpsOptions())
    assert made.height > 0 and made.equals(ops.top(demo, ops.OpsOptions()))
    assert not any(rank.loaded for rank in stored.ranks.values())


def test_the_launch_histograms_over_a_dataset_are_the_folders(demo: TraceSet, demo_dataset: Path) -> None:
    """Gathered a rank at a time over a dataset, keeping only the binned columns: the same bins."""
    from htatui.analysis.views import launch

    stored = load_traces([demo_dataset])
    made = launch.histograms(stored, launch.LaunchOptions())
    assert made.height > 0 and made.equals(launch.histograms(demo, launch.LaunchOptions()))
    assert not any(rank.loaded for rank in stored.ranks.values())
