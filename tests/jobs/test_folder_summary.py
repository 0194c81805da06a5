"""A trace folder's summary rows: made by the parse workers, kept in each rank's cache entry, and
served as the job's summary (`TraceSet.summary`) when the folder is opened from the cache, so the
temporal view answers without reading a rank; the answer is the events' to the bit, and a row is
served only for its rank, the code of now, and a shift that moves the rank's times exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import ALL_REDUCE, device, kernel, runtime, step, write_trace

from htatui.analysis.core import kept
from htatui.analysis.core.kernel_types import typed_gpu
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.core.stored import summary_rows
from htatui.analysis.registry import BY_ID, frame_of, make_table
from htatui.analysis.views import temporal
from htatui.jobs.load import load_traces
from htatui.store.summary_table import ENTRY_SUMMARY, entry_summary_for, translates_exactly
from htatui.trace import cache

EPOCH_US = 1_712_195_495_519_689.0
"""Where the ranks' clocks start: µs since the epoch, as older Kineto traces write them."""


def _rank(start: float, rank: int) -> list[dict[str, Any]]:
    """Three steps of a gemm, an all-reduce overlapping it on another stream and a copy."""
    events: list[dict[str, Any]] = []
    for n in range(3):
        t = start + 1000.0 * n
        events += [
            step(n + 1, t, 1000.0),
            runtime("cudaLaunchKernel", t + 10.0, 5.0, 10 * n + 1),
            kernel("sm80_xmma_gemm_f16f16_f16f32", t + 20.25, 300.0 + 50.0 * rank, corr=10 * n + 1),
            runtime("cudaLaunchKernel", t + 16.0, 5.0, 10 * n + 2),
            kernel(ALL_REDUCE, t + 250.5, 400.0, stream=9, corr=10 * n + 2),
            device("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", t + 700.75, 50.5, stream=11),
        ]
    return events


def _job(folder: Path, *, start: float = EPOCH_US, base_ns: int | None = None) -> Path:
    """Three ranks starting 1,234.5 µs apart (so the folder shifts two of them otherwise than alone)."""
    for rank in range(3):
        write_trace(folder / f"rank-{rank}.json", _rank(start + 1234.5 * rank, rank), rank=rank, base_ns=base_ns)
    return folder


def _table(view_id: str, traces: Any, **scope: Any) -> pl.DataFrame:
    view = BY_ID[view_id]
    options = view.options(scope=Scope(**scope)) if scope else view.options()
    return frame_of(make_table(view.main, traces, options))[0]


def _entry_row(traces: Any, rank: int) -> pl.DataFrame | None:
    trace = traces.ranks[rank]
    entry = cache.peek_cached(trace.path, trace.source_identity, start=False)
    return entry.read_table(ENTRY_SUMMARY) if entry is not None else None


def _refuse_events(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the temporal view read the events, not the stored rows")

    monkeypatch.setattr(temporal, "typed_gpu", refuse)


def test_a_cached_folder_answers_the_temporal_view_from_its_rows_as_the_events_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _job(tmp_path / "job")
    from_events = load_traces([folder], use_cache=False, max_workers=1)
    assert from_events.summary is None
    expected = {view: _table(view, from_events) for view in ("temporal", "overlap")}
    assert expected["temporal"].height == 3 and (expected["temporal"]["compute_us"] > 0).all()

    load_traces([folder], max_workers=1)  # parses: each entry keeps its row
    cached = load_traces([folder], max_workers=1)
    assert cached.summary is not None and cached.summary["rank"].to_list() == [0, 1, 2]
    assert not any(trace.loaded for trace in cached.ranks.values())
    # Ranks 1 and 2 start later than rank 0: the folder shifts them otherwise than their row's.
    stored_shifts = {rank: _entry_row(cached, rank)["shift_us"][0] for rank in (1, 2)}  # type: ignore[index]
    assert all(stored_shifts[rank] != cached.ranks[rank].shift_us for rank in (1, 2))
    _refuse_events(monkeypatch)
    for view, frame in expected.items():
        assert _table(view, cached).equals(frame), view  # every column, to the bit
    assert not any(trace.loaded for trace in cached.ranks.values())


@pytest.mark.parametrize(
    "scope",
    [{"steps": Steps.parse("1-2")}, {"hta_compat": True}],
    ids=["steps", "hta-compat"],
)
def test_other_options_are_made_from_the_events(
    tmp_path: Path, scope: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _job(tmp_path / "job")
    expected = _table("temporal", load_traces([folder], use_cache=False, max_workers=1), **scope)
    load_traces([folder], max_workers=1)
    cached = load_traces([folder], max_workers=1)
    assert cached.summary is not None
    options = BY_ID["temporal"].options(scope=Scope(**scope))
    assert summary_rows(cached, options) is None
    typed: list[int] = []

    def counted(*args: Any) -> pl.DataFrame:
        typed.append(1)
        return typed_gpu(*args)

    monkeypatch.setattr(temporal, "typed_gpu", counted)
    assert _table("temporal", cached, **scope).equals(expected)
    assert typed  # made from the events


def test_a_ranks_subset_is_the_events_answer(tmp_path: Path) -> None:
    """Each rank's row is its own: a subset of the ranks (`--ranks`) is their rows, as the events give."""
    folder = _job(tmp_path / "job")
    view = BY_ID["temporal"]
    options = view.options(scope=Scope().with_ranks((0, 2)))
    expected = frame_of(make_table(view.main, load_traces([folder], use_cache=False, max_workers=1), options))[0]
    load_traces([folder], max_workers=1)
    cached = load_traces([folder], max_workers=1)
    assert frame_of(make_table(view.main, cached, options))[0].equals(expected)
    assert expected["rank"].to_list() == [0, 2]


def test_rows_of_other_code_are_not_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _job(tmp_path / "job")
    load_traces([folder], max_workers=1)
    assert load_traces([folder], max_workers=1).summary is not None
    monkeypatch.setattr(kept, "code_digest", lambda: "edited")  # what an edit of the views does
    stale = load_traces([folder], max_workers=1)
    assert stale.summary is None
    assert summary_rows(stale, CommonOptions()) is None


def test_a_rank_whose_times_a_shift_moves_inexactly_is_made_from_the_events(tmp_path: Path) -> None:
    """Relative times beside a base time: the folder's shift of a later rank does not move them
    exactly as its own did, so its row is not served (the folder answers from the events)."""
    folder = _job(tmp_path / "job", start=0.125, base_ns=1_790_857_026_000_000_000)
    expected = _table("temporal", load_traces([folder], use_cache=False, max_workers=1))
    load_traces([folder], max_workers=1)
    cached = load_traces([folder], max_workers=1)
    row = _entry_row(cached, 1)
    assert row is not None and row["shift_us"][0] != cached.ranks[1].shift_us
    assert cached.summary is None
    assert _table("temporal", cached).equals(expected)


def test_ranks_shifted_as_alone_serve_their_rows_and_a_lone_file_keeps_none(tmp_path: Path) -> None:
    """Relative times again, each rank in a folder with a copy of itself (one start, so each is
    shifted as alone): the rows are served. A lone file is parsed without one (its frame stays in
    memory; its parse is not made longer for a row)."""
    folder = tmp_path / "twins"
    for rank in range(2):
        write_trace(folder / f"rank-{rank}.json", _rank(0.125, 0), rank=rank, base_ns=1_790_857_026_000_000_000)
    expected = _table("temporal", load_traces([folder], use_cache=False, max_workers=1))
    load_traces([folder], max_workers=1)
    cached = load_traces([folder], max_workers=1)
    assert cached.summary is not None
    assert _table("temporal", cached).equals(expected)
    lone = folder / "rank-0.json"
    load_traces([lone], use_cache=False, refresh_cache=True, max_workers=1)  # its entry made again, alone
    again = load_traces([lone], max_workers=1)
    assert _entry_row(again, 0) is None and again.summary is None


def test_entry_rows_hold_only_for_their_rank_code_and_an_exact_shift(tmp_path: Path) -> None:
    folder = _job(tmp_path / "job")
    load_traces([folder], max_workers=1)
    traces = load_traces([folder], max_workers=1)
    row = _entry_row(traces, 1)
    assert row is not None
    made, shift = kept.made_with(), traces.ranks[1].shift_us
    served = entry_summary_for(row, 1, shift, made)
    assert served is not None and served["shift_us"] == shift and served["rank"] == 1
    assert entry_summary_for(row, 2, shift, made) is None  # another rank number
    assert entry_summary_for(row, 1, shift, "another") is None  # other code
    assert entry_summary_for(row, 1, 12.5, made) is None  # a shift that moves the times inexactly
    assert entry_summary_for(row.drop("own_last_us"), 1, shift, made) is None  # not a row of this schema


def test_translates_exactly() -> None:
    assert translates_exactly(1.0, 2.0, 0.0)
    assert translates_exactly(EPOCH_US, EPOCH_US + 1e6, -EPOCH_US)  # an epoch clock moved to its start
    assert translates_exactly(EPOCH_US, EPOCH_US + 1e6, -(EPOCH_US - 5e6))
    assert not translates_exactly(0.125, 3000.0, -0.125)  # relative times: x − y rounds
    assert not translates_exactly(EPOCH_US, EPOCH_US, 12.5)  # moved forwards
    assert not translates_exactly(1.0, 5.0, -2.0)  # 5 > 2·2
