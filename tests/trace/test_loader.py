"""Discovery, rank detection, loader edge cases, alignment, iterations and the cache."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, runtime, step, write_trace

from htatui.jobs.load import load_traces
from htatui.trace import LoadError, LoadProgress, loader
from htatui.trace.discover import rank_from_filename
from htatui.trace.model import with_details


def load(paths: list[Path], **kwargs: object):  # type: ignore[no-untyped-def]
    return load_traces(paths, max_workers=1, **kwargs)  # type: ignore[arg-type]


def simple_events() -> list[dict[str, object]]:
    return [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)]


# --- discovery and ranks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "rank"),
    [("rank-3.json", 3), ("x_rank_4.pt.trace.json.gz", 4), ("worker5.json", 5), ("rank12.json", 12), ("a.json", None)],
)
def test_rank_from_filename(name: str, rank: int | None) -> None:
    assert rank_from_filename(Path(name)) == rank


def test_folder_skips_non_trace_files_with_a_note(tmp_path: Path) -> None:
    write_trace(tmp_path / "rank-0.json", simple_events())
    write_trace(tmp_path / "rank-1.pt.trace.json.gz", simple_events())
    (tmp_path / "notes.txt").write_text("hello")
    traces = load([tmp_path])
    assert traces.rank_ids == [0, 1]
    assert [rt.rank_source for rt in traces.ranks.values()] == ["filename", "filename"]
    assert any("notes.txt" in note for note in traces.notes)


def test_distributed_info_rank_beats_file_name(tmp_path: Path) -> None:
    write_trace(tmp_path / "rank-0.json", simple_events(), rank=7)
    traces = load([tmp_path])
    assert traces.rank_ids == [7]
    assert traces.ranks[7].rank_source == "distributedInfo"


def test_ranks_need_not_start_at_zero_and_unnamed_files_get_free_ranks(tmp_path: Path) -> None:
    write_trace(tmp_path / "b.json", simple_events(), rank=0)
    write_trace(tmp_path / "c.json", simple_events())
    write_trace(tmp_path / "a.json", simple_events())
    traces = load([tmp_path])
    # rank 0 is claimed; a.json then c.json take 1 and 2 in name order, and the user is told.
    assert {r: rt.path.name for r, rt in traces.ranks.items()} == {0: "b.json", 1: "a.json", 2: "c.json"}
    assert sum("no rank in the trace" in note for note in traces.notes) == 2


def test_duplicate_ranks_name_both_files(tmp_path: Path) -> None:
    write_trace(tmp_path / "a.json", simple_events(), rank=2)
    write_trace(tmp_path / "b.json", simple_events(), rank=2)
    with pytest.raises(LoadError, match=r"a\.json and .*b\.json: both are rank 2"):
        load([tmp_path])


def test_files_can_be_given_one_by_one(tmp_path: Path) -> None:
    a = write_trace(tmp_path / "x" / "rank-1.json", simple_events())
    b = write_trace(tmp_path / "y" / "rank-2.json", simple_events())
    assert load([a, b]).rank_ids == [1, 2]


# --- loader edge cases ----------------------------------------------------------------------


def test_columns_are_typed_and_times_are_not_rounded(tmp_path: Path) -> None:
    events = [
        runtime("cudaLaunchKernel", 10.125, 2.5, corr=1),
        kernel("gemm", 20.5, 0.875, corr=1, grid=[4, 2, 1], block=[128, 1, 1], **{"est. achieved occupancy %": 50}),
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": 30.0,
            "dur": 4.0,
            "args": {"device": 0, "stream": 7, "correlation": 2, "bytes": 4096, "memory bandwidth (GB/s)": 1.024},
        },
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 100, "tid": 1, "ts": 10.125},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 0, "tid": 7, "ts": 20.5, "bp": "e"},
    ]
    traces = load([write_trace(tmp_path / "rank-0.json", events)])
    frame = traces.ranks[0].events
    gemm = frame.filter(pl.col("name") == "gemm").row(0, named=True)
    assert gemm["ts"] - frame.select(pl.col("ts").min()).item() == pytest.approx(10.375)
    assert gemm["dur"] == 0.875 and gemm["stream"] == 7 and gemm["device"] == 0
    # The launch statistics live in the rank's detail table, one row for the kernel alone.
    assert "grid" not in frame.columns
    details = traces.ranks[0].details
    assert details.select("rank", "index").rows() == [(0, 1)]
    launch = with_details(frame.filter(pl.col("name") == "gemm"), details).row(0, named=True)
    assert launch["grid"] == "4,2,1" and launch["block"] == "128,1,1" and launch["occupancy_pct"] == 50.0
    assert launch["registers_per_thread"] is None
    call = with_details(frame.filter(pl.col("name") == "cudaLaunchKernel"), details, ("grid",)).row(0, named=True)
    assert call["grid"] is None
    copy = frame.filter(pl.col("cat") == "gpu_memcpy").row(0, named=True)
    assert copy["bytes"] == 4096 and copy["memory_bw_gbps"] == 1.024
    flows = frame.filter(pl.col("cat") == "ac2g")
    assert flows["flow_id"].to_list() == [1, 1] and flows["ph"].cast(pl.Utf8).to_list() == ["s", "f"]
    assert frame["index"].to_list() == [0, 1, 2, 3, 4]


def test_old_capitalised_categories_are_folded(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1_600_000_000_000_000, "dur": 10},
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 1_600_000_000_000_001,
            "dur": 3,
            "args": {"correlation": 5},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 1_600_000_000_000_005,
            "dur": 4,
            "args": {"stream": 7, "correlation": 5, "device": 0},
        },
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD",
            "pid": 0,
            "tid": 7,
            "ts": 1_600_000_000_000_010,
            "dur": 1,
            "args": {"stream": 7, "correlation": 6},
        },
        {
            "ph": "X",
            "cat": "Memset",
            "name": "Memset (Device)",
            "pid": 0,
            "tid": 7,
            "ts": 1_600_000_000_000_012,
            "dur": 1,
            "args": {"stream": 7, "correlation": 7},
        },
    ]
    frame = load([write_trace(tmp_path / "old.json", events)]).ranks[0].events
    assert frame["cat"].cast(pl.Utf8).to_list() == ["cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset"]
    # Epoch-µs timestamps are aligned exactly (integers below 2**53 survive float64).
    assert frame["ts"].to_list() == [0.0, 1.0, 5.0, 10.0, 12.0]


def test_invalid_utf8_falls_back_and_warns_once(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "rank-0.json", [kernel("NAME", 0, 5, corr=1), kernel("k2", 10, 5, corr=2)])
    path.write_bytes(path.read_bytes().replace(b"NAME", b"bad\xff\xfename"))
    traces = load([path])
    names = traces.ranks[0].events["name"].cast(pl.Utf8).to_list()
    assert names[0] == "bad\ufffd\ufffdname" and names[1] == "k2"
    assert traces.ranks[0].warnings == ("invalid UTF-8 replaced with U+FFFD",)


def test_integer_wider_than_64_bits_in_a_read_field(tmp_path: Path) -> None:
    events = [kernel("k", 0, 5, corr=1), kernel("k", 10, 5, corr=1)]
    path = write_trace(tmp_path / "rank-0.json", events)
    path.write_bytes(path.read_bytes().replace(b'"correlation": 1', b'"correlation": 123456789012345678901234', 1))
    traces = load([path])
    corr = traces.ranks[0].events["correlation"].to_list()
    assert corr[1] == 1 and len(corr) == 2
    assert len(traces.ranks[0].warnings) == 1


def test_list_form_chrome_trace_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text('[{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}]')
    assert load([path]).ranks[0].events.height == 1


def test_ranks_align_on_absolute_time(tmp_path: Path) -> None:
    # Rank 1's trace starts 2 ms of base time later with the same relative timestamps.
    write_trace(tmp_path / "rank-0.json", [kernel("k", 100.5, 5)], base_ns=1_700_000_000_000_000_000)
    write_trace(tmp_path / "rank-1.json", [kernel("k", 100.5, 5)], base_ns=1_700_000_000_002_000_000)
    traces = load([tmp_path])
    assert traces.ranks[0].events["ts"][0] == pytest.approx(0.5)
    assert traces.ranks[1].events["ts"][0] == pytest.approx(2000.5)
    assert traces.ranks[1].shift_us - traces.ranks[0].shift_us == 2000.0


def test_iterations_follow_profiler_steps_and_correlation(tmp_path: Path) -> None:
    events = [
        step(1, 0, 100),
        step(2, 100, 100),
        runtime("cudaLaunchKernel", 50, 5, corr=1),
        runtime("cudaLaunchKernel", 150, 5, corr=2),
        cpu_op("aten::before", -10, 5),
        # Kernel of step 1 runs during step 2 on the host; it keeps step 1 through its launch.
        kernel("late", 120, 10, corr=1, stream=0),
        kernel("k2", 170, 10, corr=2),
    ]
    frame = load([write_trace(tmp_path / "rank-0.json", events)]).ranks[0].events
    by_name = dict(zip(frame["name"].cast(pl.Utf8).to_list(), frame["iteration"].to_list(), strict=True))
    assert by_name["aten::before"] is None
    assert by_name["late"] == 1 and by_name["k2"] == 2
    assert by_name["ProfilerStep#2"] == 2


# --- the cache -----------------------------------------------------------------------------


def test_cache_hit_miss_and_corruption(tmp_path: Path, isolated_cache: Path) -> None:
    path = write_trace(tmp_path / "rank-0.json.gz", simple_events())
    seen: list[LoadProgress] = []
    first = load([path], progress=seen.append)
    assert [p.from_cache for p in seen if not p.bytes_total] == [False]
    second = load([path], progress=seen.append)
    assert [p.from_cache for p in seen if not p.bytes_total] == [False, True]
    assert second.ranks[0].events.equals(first.ranks[0].events)
    for entry in isolated_cache.glob("*.arrow"):
        entry.write_bytes(b"garbage")
    third = load([path], progress=seen.append)
    assert seen[-1].from_cache is False and third.ranks[0].events.equals(first.ranks[0].events)
    # A changed file is a new key: the old entry is not used.
    os.utime(path, ns=(1, 1))
    load([path], progress=seen.append)
    assert seen[-1].from_cache is False
    load([path], use_cache=False, progress=seen.append)
    assert seen[-1].from_cache is False


def test_the_cache_keeps_the_detail_table_and_a_damaged_one_is_parsed_again(
    tmp_path: Path, isolated_cache: Path
) -> None:
    events = [*simple_events(), kernel("nccl", 60, 10, corr=2, grid=[8, 1, 1], **{"Group size": 4})]
    path = write_trace(tmp_path / "rank-0.json.gz", events)
    first = load([path]).ranks[0].details
    # Only the kernel with details has a row (the step, the launch and the plain gemm have none).
    assert first.select("index", "grid", "group_size").rows() == [(3, "8,1,1", 4)]
    assert load([path]).ranks[0].details.equals(first)  # read from the entry's `.details` file
    (damaged,) = isolated_cache.glob("*.details")
    damaged.write_bytes(b"garbage")
    assert load([path]).ranks[0].details.equals(first)  # its checksum fails: the file is parsed again


def test_a_repeated_kernel_goes_with_its_details_and_different_details_are_no_repeat(tmp_path: Path) -> None:
    launch: dict[str, Any] = {"grid": [8, 1, 1], "Group size": 4}
    events = [
        *simple_events(),
        kernel("nccl", 60, 10, corr=2, **launch),
        kernel("nccl", 60, 10, corr=2, **launch),  # written twice: dropped with its detail row
        kernel("nccl", 80, 10, corr=3, **launch),
        kernel("nccl", 80, 10, corr=3, **{**launch, "Group size": 2}),  # differs in a detail: kept
    ]
    rank = load([write_trace(tmp_path / "rank-0.json", events)]).ranks[0]
    assert rank.warnings[-1] == "1 complete event(s) repeated exactly (every field but the position) dropped"
    assert rank.events.filter(pl.col("name") == "nccl")["index"].to_list() == [3, 5, 6]
    assert rank.details.select("index", "group_size").rows() == [(3, 4), (5, 4), (6, 2)]


def test_parallel_load_reports_progress_per_rank(tmp_path: Path) -> None:
    for rank in range(3):
        write_trace(tmp_path / f"rank-{rank}.json.gz", simple_events())
    seen: list[LoadProgress] = []
    traces = load_traces([tmp_path], use_cache=False, progress=seen.append, max_workers=2)
    assert traces.rank_ids == [0, 1, 2]
    assert [p.done for p in seen] == [1, 2, 3] and {p.total for p in seen} == {3}


# --- bad input -----------------------------------------------------------------------------


def test_one_bad_file_among_good_ones_is_reported(tmp_path: Path) -> None:
    write_trace(tmp_path / "rank-0.json", simple_events())
    (tmp_path / "rank-1.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [')[:-8])
    traces = load([tmp_path])
    assert traces.rank_ids == [0]
    assert len(traces.problems) == 1 and "rank-1.json.gz" in str(traces.problems[0])


# --- real traces ---------------------------------------------------------------------------


def test_real_trace_counts(load_shared) -> None:  # type: ignore[no-untyped-def]
    frame = load_shared("df_index_resolver").ranks[1].events
    # README of ../shared/traces: 216k events, 19k kernels (the 38 `ph: M` rows are metadata).
    assert frame.height == 216_054
    assert int((frame["cat"] == "kernel").sum()) == 19_370


@pytest.mark.parametrize(
    ("folder", "rank", "check"),
    [
        ("large_integer_trace", 70, "2 events"),
        ("amd_trace", 0, "hip"),
        ("trace_file_list", 1, "caps"),
        ("cpu_only", 34, "cpu"),
        ("ns_resolution_trace", 0, "fractional"),
        ("mtia_inference_trace", 0, "mtia"),
    ],
)
def test_real_trace_edge_cases(load_shared, folder: str, rank: int, check: str) -> None:  # type: ignore[no-untyped-def]
    traces = load_shared(folder)
    frame = traces.ranks[rank].events
    cats = set(frame["cat"].cast(pl.Utf8).drop_nulls().to_list())
    if check == "2 events":
        assert frame.height == 2
    elif check == "hip":
        runtime_rows = frame.filter(pl.col("cat") == "cuda_runtime")
        assert runtime_rows["name"].cast(pl.Utf8).str.starts_with("hip").all()
        # hex-string streams on runtime rows are "no stream"; kernels run on stream 0.
        assert runtime_rows["stream"].null_count() == runtime_rows.height
        assert set(frame.filter(pl.col("cat") == "kernel")["stream"].to_list()) == {0}
    elif check == "caps":
        assert "kernel" in cats and "Kernel" not in cats
    elif check == "cpu":
        assert not cats & {"kernel", "gpu_memcpy", "gpu_memset"}
    elif check == "fractional":
        assert traces.ranks[rank].meta.fractional_ts
        assert (frame["dur"].drop_nulls() % 1 != 0).any()
    elif check == "mtia":
        assert frame.height > 1000


@pytest.mark.parametrize(
    ("cores", "jobs", "ranks", "pieces"),
    [(16, None, 16, 8), (4, None, 4, 4), (16, "12", 12, 12), (2, "3", 3, 3), (16, "zero", 16, 8)],
)
def test_a_lone_files_pieces_get_at_most_8_workers_unless_asked(
    monkeypatch: pytest.MonkeyPatch, cores: int, jobs: str | None, ranks: int, pieces: int
) -> None:
    monkeypatch.setattr("htatui.trace.loader.os.sched_getaffinity", lambda _pid: set(range(cores)))
    if jobs is None:
        monkeypatch.delenv("HTATUI_JOBS", raising=False)
    else:
        monkeypatch.setenv("HTATUI_JOBS", jobs)
    assert (loader.default_workers(), loader.default_piece_workers()) == (ranks, pieces)
