"""A folder parsed now opens as a cached one does: each rank, once parsed, is put aside (into the
parse cache, else a private temp folder, else kept in memory with a note) and read back when a view
asks, so no rank's events are held after the open; the views answer as over a cached open."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from kineto_util import write_trace
from ranks_jobs import skewed_rank

from htatui.analysis.health import load_notes
from htatui.analysis.registry import BY_ID, frame_of, make_table
from htatui.cli.info import info_frame
from htatui.jobs.load import load_traces
from htatui.trace import spill
from htatui.trace.model import TraceSet

ROOT = Path(__file__).resolve().parents[2]


def _job(folder: Path, ranks: int = 3) -> Path:
    for rank in range(ranks):
        write_trace(folder / f"rank-{rank}.json", skewed_rank(rank), rank=rank)
    return folder


def _answers(traces: TraceSet) -> dict[str, str]:
    """Every table of a few views over `traces` (and its sentence), as text."""
    out = {}
    for view_id in ("temporal", "kernels", "idle", "stragglers", "collectives"):
        view = BY_ID[view_id]
        for table in view.tables:
            frame, message = frame_of(make_table(table, traces, view.options()))
            out[f"{view_id} {table.name}"] = f"{frame.to_dicts()} {message}"
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cold_folder_holds_no_rank_after_the_open_and_answers_as_a_cached_open(
    tmp_path: Path, isolated_cache: Path, workers: int
) -> None:
    folder = _job(tmp_path / "job")
    cold = load_traces([folder], max_workers=workers)
    assert not any(rank.loaded for rank in cold.ranks.values())
    assert len(list(isolated_cache.glob("*.arrow"))) == 3  # each rank put into the cache by its worker
    assert cold.notes == ()
    info_frame(cold)  # what `info` and every face do after the open: each rank read and dropped again
    load_notes(cold)
    assert not any(rank.loaded for rank in cold.ranks.values())
    cold_answers = _answers(cold)
    cached = load_traces([folder], max_workers=1)
    assert not any(rank.loaded for rank in cached.ranks.values())
    assert _answers(cached) == cold_answers
    for rank in cold.ranks:
        assert cold.ranks[rank].events.equals(cached.ranks[rank].events)
    # The events are the ones a whole parse of each file gives, on the job's time base.
    single = load_traces([folder / "rank-1.json"], use_cache=False, max_workers=1)
    assert single.ranks[1].loaded  # one file is one frame: kept as parsed
    shift = cold.ranks[1].shift_us - single.ranks[1].shift_us
    assert cold.ranks[1].events.drop("ts", "end").equals(single.ranks[1].events.drop("ts", "end"))
    assert (cold.ranks[1].events["ts"] - single.ranks[1].events["ts"] - shift).abs().max() == 0


def test_without_the_cache_the_ranks_are_spilled_to_a_private_folder_removed_with_the_job(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _job(tmp_path / "job")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    expected = _answers(load_traces([folder], max_workers=1))
    traces = load_traces([folder], use_cache=False, max_workers=1)
    assert not any(rank.loaded for rank in traces.ranks.values()) and traces.notes == ()
    (spilled,) = temp.iterdir()
    assert spilled.name.startswith("htatui-ranks-") and len(list(spilled.glob("rank-*.arrow"))) == 3
    assert len(list(spilled.glob("details-*.arrow"))) == 3  # each rank's detail table beside its events
    assert (spilled.stat().st_mode & 0o777) == 0o700
    assert not isolated_cache.is_relative_to(spilled) and not spilled.is_relative_to(isolated_cache)
    assert _answers(traces) == expected
    del traces
    gc.collect()
    assert list(temp.iterdir()) == []  # the job is gone: so is its folder


def test_a_cache_that_cannot_be_written_spills_with_a_note_and_the_folder_goes_at_exit(tmp_path: Path) -> None:
    folder = _job(tmp_path / "job")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HTATUI_CACHE_DIR": str(blocker / "cache"),  # under a file: never writable, even as root
        "TMPDIR": str(temp),
    }
    run = subprocess.run(
        [sys.executable, "-m", "htatui", "report", str(folder), "--view", "temporal", "--format", "csv", "--jobs", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "could not be written: 3 rank(s) kept in a temporary folder instead until exit" in run.stderr
    assert run.stdout.count("\n") == 4  # the header and a row a rank
    assert list(temp.iterdir()) == []


def test_with_no_folder_to_spill_to_the_ranks_stay_in_memory_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _job(tmp_path / "job")
    monkeypatch.setattr(spill.SpillFolder, "make", classmethod(lambda cls: None))
    traces = load_traces([folder], use_cache=False, max_workers=1)
    assert all(rank.loaded for rank in traces.ranks.values())
    assert traces.notes == ("3 rank(s) kept in memory: no temporary folder could be written",)


def test_a_spilled_rank_whose_file_is_gone_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from htatui.trace.model import EventsUnavailable

    folder = _job(tmp_path / "job")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    traces = load_traces([folder], use_cache=False, max_workers=1)
    for file in tmp_path.glob("htatui-ranks-*/*.arrow"):
        file.unlink()
    with pytest.raises(EventsUnavailable, match=r"rank-0\.json: its temporary copy cannot be read"):
        _ = traces.ranks[0].events


def test_a_load_cancelled_after_a_rank_was_spilled_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from htatui.trace.loader import LoadCancelled

    folder = _job(tmp_path / "job")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    cancel = threading.Event()
    with pytest.raises(LoadCancelled):
        load_traces([folder], use_cache=False, max_workers=1, cancel=cancel, progress=lambda _: cancel.set())
    assert list(temp.iterdir()) == []
