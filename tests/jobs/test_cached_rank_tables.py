"""A trace folder keeps its ranks' cross-rank tables in the parse cache: the first Ranks view
makes them from the events and keeps them, the next open reads them instead (and no event
analysis runs), and every answer is the fresh parse's exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from dataset_util import RANK_VIEWS, demo_job, generated_job, report_json
from kineto_util import traces_of
from ranks_jobs import skewed_rank

from htatui.analysis.registry import BY_ID, frame_of
from htatui.analysis.views.ranks import tables
from htatui.jobs.load import load_traces
from htatui.trace.model import EventsUnavailable


def _skewed(folder: Path) -> Path:
    folder.mkdir()
    traces_of(folder, *(skewed_rank(r) for r in range(4)))
    return folder


def _no_event_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the tables were made from the events, not read from the cache")

    monkeypatch.setattr(tables, "rank_tables", refuse)
    monkeypatch.setattr(tables, "busy_intervals", refuse)


@pytest.mark.parametrize("make", [demo_job, generated_job, _skewed])
def test_a_cached_folder_reads_its_kept_tables_and_answers_as_a_fresh_parse(
    make: object, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert callable(make)
    folder = make(tmp_path / "job")
    fresh = {view: report_json(capsys, folder, "--view", view, "--no-cache") for view in RANK_VIEWS}
    report_json(capsys, folder, "--view", "stragglers")  # parses, caches, makes and keeps the tables
    _no_event_analysis(monkeypatch)
    for view in RANK_VIEWS:
        assert report_json(capsys, folder, "--view", view) == fresh[view], view


def test_the_kept_tables_are_read_without_the_events_analysis_and_hold_only_for_their_shift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = demo_job(tmp_path / "job")
    first = load_traces([folder], max_workers=1)
    assert first.kept is not None and first.kept.read("calls", [0, 1, 2, 3]) is None  # nothing kept yet
    view = BY_ID["stragglers"]
    view.tables[0].compute(first, view.options())
    again = load_traces([folder], max_workers=1)
    assert again.kept is not None
    calls = again.kept.read("calls", [0, 1, 2, 3])
    assert calls is not None and sorted(calls["rank"].unique().to_list()) == [0, 1, 2, 3]
    busy = again.kept.read("busy", [2])
    assert busy is not None and busy.height and set(busy["rank"].to_list()) == {2}
    # Three of the ranks alone: a job of other ranks' time shifts, whose kept tables do not hold.
    files = sorted(folder.iterdir())
    alone = load_traces(files[1:], max_workers=1)
    assert {r: t.shift_us for r, t in alone.ranks.items()} != {r: again.ranks[r].shift_us for r in alone.ranks}
    assert alone.kept is not None and alone.kept.read("calls", sorted(alone.ranks)) is None


def test_a_cached_folders_ranks_stay_unread_and_the_ranks_views_read_none(tmp_path: Path) -> None:
    folder = demo_job(tmp_path / "job")
    view = BY_ID["stragglers"]
    first = load_traces([folder], max_workers=1)
    assert not any(rank.loaded for rank in first.ranks.values())  # parsed now, each put aside in the cache
    expected = view.tables[0].compute(first, view.options())
    again = load_traces([folder], max_workers=1)
    assert not any(rank.loaded for rank in again.ranks.values())
    for view_id in RANK_VIEWS:
        for table in BY_ID[view_id].tables:
            table.compute(again, BY_ID[view_id].options())
    assert not any(rank.loaded for rank in again.ranks.values())
    assert frame_of(view.tables[0].compute(again, view.options()))[0].equals(frame_of(expected)[0])
    # Read when asked: the events of the fresh parse.
    assert again.ranks[1].events.equals(first.ranks[1].events)


def test_a_cached_rank_evicted_after_the_open_is_parsed_again_and_a_changed_file_is_one_line(
    tmp_path: Path, isolated_cache: Path
) -> None:
    folder = demo_job(tmp_path / "job")
    fresh = load_traces([folder], max_workers=1)
    opened = load_traces([folder], max_workers=1)
    for entry in isolated_cache.glob("*.arrow"):
        entry.unlink()
    assert opened.ranks[0].events.equals(fresh.ranks[0].events)
    load_traces([folder], max_workers=1)  # the other ranks parsed again, cached
    reopened = load_traces([folder], max_workers=1)
    assert not reopened.ranks[2].loaded
    target = next(folder.glob("rank-2*"))
    target.write_bytes(target.read_bytes())  # the same bytes, a new identity (ctime)
    for entry in isolated_cache.glob("*.arrow"):
        entry.unlink()
    with pytest.raises(EventsUnavailable, match=rf"^{target}: changed since the job was opened; open it again$"):
        _ = reopened.ranks[2].events
