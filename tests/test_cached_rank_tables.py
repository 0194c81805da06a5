"""A trace folder keeps its ranks' cross-rank tables in the parse cache: the first Ranks view
makes them from the events and keeps them, the next open reads them instead (and no event
analysis runs), and every answer is the fresh parse's exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from kineto_util import traces_of
from ranks_jobs import skewed_rank
from test_rank_tables import RANK_VIEWS, _demo, _generated, report

from htatui.analysis.registry import BY_ID
from htatui.analysis.views.ranks import tables
from htatui.jobs.load import load_traces


def _skewed(folder: Path) -> Path:
    folder.mkdir()
    traces_of(folder, *(skewed_rank(r) for r in range(4)))
    return folder


def _no_event_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the tables were made from the events, not read from the cache")

    monkeypatch.setattr(tables, "rank_tables", refuse)
    monkeypatch.setattr(tables, "busy_intervals", refuse)


@pytest.mark.parametrize("make", [_demo, _generated, _skewed])
def test_a_cached_folder_reads_its_kept_tables_and_answers_as_a_fresh_parse(
    make: object, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert callable(make)
    folder = make(tmp_path / "job")
    fresh = {view: report(capsys, folder, "--view", view, "--no-cache") for view in RANK_VIEWS}
    report(capsys, folder, "--view", "stragglers")  # parses, caches, makes and keeps the tables
    _no_event_analysis(monkeypatch)
    for view in RANK_VIEWS:
        assert report(capsys, folder, "--view", view) == fresh[view], view


def test_the_kept_tables_are_read_without_the_events_analysis_and_hold_only_for_their_shift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _demo(tmp_path / "job")
    first = load_traces([folder], max_workers=1)
    assert first.stored_table is not None and first.stored_table("calls") is None  # nothing kept yet
    view = BY_ID["stragglers"]
    view.tables[0].compute(first, view.options())
    again = load_traces([folder], max_workers=1)
    assert again.stored_table is not None and again.stored_rank_table is not None
    calls = again.stored_table("calls")
    assert calls is not None and sorted(calls["rank"].unique().to_list()) == [0, 1, 2, 3]
    busy = again.stored_rank_table("busy", 2)
    assert busy is not None and busy.height and set(busy["rank"].to_list()) == {2}
    # Three of the ranks alone: a job of other ranks' time shifts, whose kept tables do not hold.
    files = sorted(folder.iterdir())
    alone = load_traces(files[1:], max_workers=1)
    assert {r: t.shift_us for r, t in alone.ranks.items()} != {r: again.ranks[r].shift_us for r in alone.ranks}
    assert alone.stored_table is not None and alone.stored_table("calls") is None
