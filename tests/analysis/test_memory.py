"""Memory analysis on hand-made snapshots and traces (answers derived in memory_util's docstrings)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import polars as pl
import pytest
from kineto_util import write_trace
from memory_util import (
    LOSS,
    LOSS_SITE,
    MODEL,
    MODEL_SITE,
    entry,
    leaking_snapshot,
    memory_trace_events,
    snapshot_a,
    write_pickle,
)

from htatui.analysis.memory import usage as memory
from htatui.trace.memory_inputs import BEFORE_RECORDING_SITE, OUTSIDE_ANNOTATIONS_SITE, read_memory


def analysed(tmp_path: Path, obj: object, name: str = "s.pickle") -> memory.MemoryAnalysis:
    return memory.analyse(read_memory(write_pickle(tmp_path / name, obj)))


def test_series_counts_blocks_from_before_the_recording(tmp_path: Path) -> None:
    result = analysed(tmp_path, snapshot_a())
    assert result.series["allocated_bytes"].to_list() == [556, 1068, 2092, 2092, 1580, 3628, 3372, 3372]
    # Reserved: the segments' 5120 B at the end, less the 4096-B segment allocated in the trace.
    assert result.series["reserved_bytes"].to_list() == [5120] * 8
    row = result.summary.row(0, named=True)
    assert row == {
        "device": "cuda:0",
        "peak_bytes": 3628,
        "peak_time_us": 15.0,
        "peak_seq": 5,
        "end_bytes": 3372,
        "reserved_peak_bytes": 5120,
        "start_bytes": 556,
        "live_blocks_at_peak": 4,
        "events": 8,
    }


def test_sites_at_the_peak(tmp_path: Path) -> None:
    sites = analysed(tmp_path, snapshot_a()).sites_at_peak("cuda:0")
    assert sites.select("site", "bytes", "count").rows() == [
        (MODEL_SITE, 2048, 1),
        (LOSS_SITE, 1024, 1),
        (BEFORE_RECORDING_SITE, 556, 2),
    ]
    assert sites["share_pct"].to_list() == pytest.approx([2048 / 36.28, 1024 / 36.28, 556 / 36.28])
    top = analysed(tmp_path, snapshot_a()).sites_at_peak("cuda:0", top=1)
    assert top["site"].to_list() == [MODEL_SITE]


def test_allocator_state(tmp_path: Path) -> None:
    state = memory.allocator_state(read_memory(write_pickle(tmp_path / "a.pickle", snapshot_a())))
    assert state.row(0, named=True) == {
        "device": "cuda:0",
        "stream": 0,
        "segments": 2,
        "reserved_bytes": 5120,
        "allocated_bytes": 3372,
        "inactive_bytes": 512 + 512 + 724,
        "largest_free_bytes": 724,
        "fragmentation_pct": pytest.approx(1748 * 100 / 5120),
    }


def test_oom_entry(tmp_path: Path) -> None:
    result = analysed(tmp_path, snapshot_a())
    oom = memory.ooms(result)
    assert oom.row(0, named=True) == {
        "device": "cuda:0",
        "seq": 7,
        "time_us": 17.0,
        "requested_bytes": 8192,
        "device_free_bytes": 100,
        "live_bytes": 3372,
        "reserved_bytes": 5120,
        "top_site": MODEL_SITE,
    }
    at_oom = memory.sites_at(result, "cuda:0", 7)
    # The 256-B block freed at seq 6 is gone; the 300-B one from before the recording is not.
    assert at_oom.select("site", "bytes").rows() == [
        (MODEL_SITE, 2048),
        (LOSS_SITE, 1024),
        (BEFORE_RECORDING_SITE, 300),
    ]


def test_growth_flags_a_leak_and_names_the_growing_site(tmp_path: Path) -> None:
    result = analysed(tmp_path, leaking_snapshot(steps=3, leak=True))
    growth = memory.growth(result)
    assert growth.basis == "starts of Optimizer.step#SGD.step"
    assert growth.points["live_bytes"].to_list() == [100, 200, 300]
    assert growth.points["growth_bytes"].to_list() == [None, 100, 100]
    assert growth.leaking == {"cuda:0": True}
    assert growth.growing_sites["cuda:0"].select("site", "delta_bytes", "status").rows() == [(MODEL_SITE, 200, "grew")]


def test_growth_without_a_leak(tmp_path: Path) -> None:
    growth = memory.growth(analysed(tmp_path, leaking_snapshot(steps=3, leak=False)))
    assert growth.points["live_bytes"].to_list() == [0, 0, 0]
    assert growth.leaking == {"cuda:0": False}


def test_two_steps_are_not_enough_to_call_a_leak(tmp_path: Path) -> None:
    growth = memory.growth(analysed(tmp_path, leaking_snapshot(steps=2, leak=True)))
    assert growth.points["live_bytes"].to_list() == [100, 200]
    assert growth.leaking == {"cuda:0": False}


def test_trace_memory_events(tmp_path: Path) -> None:
    write_trace(tmp_path / "t.pt.trace.json", memory_trace_events(), base_ns=2_000_000)
    result = memory.analyse(read_memory(tmp_path))
    row = result.summary.row(0, named=True)
    assert (row["device"], row["peak_bytes"], row["peak_time_us"], row["end_bytes"]) == ("cuda:0", 1400, 2020.0, 1060)
    assert row["reserved_peak_bytes"] == 3000
    assert result.sites_at_peak("cuda:0").select("site", "bytes", "count").rows() == [
        (BEFORE_RECORDING_SITE, 1000, 1),
        ("forward", 300, 1),
        (OUTSIDE_ANNOTATIONS_SITE, 100, 1),
    ]
    spans = memory.span_peaks(result)
    assert spans.select("name", "start_bytes", "peak_bytes", "end_bytes").rows() == [
        ("ProfilerStep#1", 1000, 1400, 1150),
        ("forward", 1100, 1400, 1400),
        ("backward", 1400, 1400, 1150),
        ("ProfilerStep#2", 1150, 1160, 1060),
    ]


def test_memory_timeline_sites_are_categories(tmp_path: Path) -> None:
    sizes = [[0, 100, 0, 0, 0, 0, 0, 0, 0], [0, 100, 0, 10, 0, 70, 0, 0, 0], [0, 100, 0, 10, 0, 0, 0, 0, 0]]
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps([[5, 6, 7], sizes]))
    result = memory.analyse(read_memory(path))
    row = result.summary.row(0, named=True)
    assert (row["peak_bytes"], row["peak_time_us"], row["end_bytes"]) == (180, 6.0, 110)
    assert result.sites_at_peak(row["device"]).select("site", "bytes").rows() == [
        ("parameter", 100),
        ("activation", 70),
        ("input", 10),
    ]


def test_compare_two_snapshots(tmp_path: Path) -> None:
    before = snapshot_a()
    after = copy.deepcopy(before)
    after["device_traces"][0].append(entry("alloc", 20000, 4096, 30, MODEL))
    after["device_traces"][0].append(
        entry("alloc", 30000, 64, 31, [{"name": "new_thing", "filename": "/home/me/x.py", "line": 1}])
    )
    after["segments"].append(
        {
            "device": 0,
            "address": 20000,
            "total_size": 20480,
            "allocated_size": 4160,
            "stream": 0,
            "blocks": [{"address": 20000, "size": 4096, "state": "active_allocated", "frames": MODEL}],
        }
    )
    a = analysed(tmp_path, before, "a.pickle")
    b = analysed(tmp_path, after, "b.pickle")
    sites = memory.compare_sites(a, b)
    assert sites.select("site", "bytes_a", "bytes_b", "status").rows() == [
        (MODEL_SITE, 2048, 6144, "grew"),
        ("new_thing (/home/me/x.py:1)", 0, 64, "new"),
        (BEFORE_RECORDING_SITE, 300, 300, "same"),
        (LOSS_SITE, 1024, 1024, "same"),
    ]
    segments = memory.compare_segments(a.recording, b.recording)
    assert segments.row(0, named=True) == {
        "device": "cuda:0",
        "stream": 0,
        "segments_a": 2,
        "segments_b": 3,
        "reserved_a_bytes": 5120,
        "reserved_b_bytes": 25600,
        "new_segments": 1,
        "delta_reserved_bytes": 20480,
    }


def test_snapshot_without_history_shows_its_state(tmp_path: Path) -> None:
    state_only = {"segments": snapshot_a()["segments"], "device_traces": []}
    result = analysed(tmp_path, state_only)
    row = result.summary.row(0, named=True)
    assert (row["peak_bytes"], row["end_bytes"], row["events"], row["peak_time_us"]) == (3372, 3372, 0, None)
    assert result.sites_at_peak("cuda:0").select("site", "bytes").rows() == [
        (MODEL_SITE, 2048),
        (LOSS_SITE, 1024),
        (BEFORE_RECORDING_SITE, 300),
    ]


def test_reallocated_address_pairs_in_order(tmp_path: Path) -> None:
    trace = [
        entry("alloc", 1, 10, 1, LOSS),
        entry("free_completed", 1, 10, 2, LOSS),
        entry("alloc", 1, 30, 3, MODEL),
        entry("free_completed", 1, 30, 4, MODEL),
        entry("alloc", 1, 20, 5, MODEL),
    ]
    result = analysed(tmp_path, {"segments": [], "device_traces": [trace]})
    assert result.series["allocated_bytes"].to_list() == [10, 0, 30, 0, 20]
    assert result.intervals.select("size_bytes", "start_seq", "end_seq").rows() == [
        (10, 0, 1),
        (30, 2, 3),
        (20, 4, None),
    ]
    assert result.intervals.filter(pl.col("end_seq").is_null())["site"].to_list() == [MODEL_SITE]


def test_a_job_folder_reads_every_rank(tmp_path: Path) -> None:
    events = memory_trace_events()
    write_trace(tmp_path / "a.pt.trace.json", events, rank=3)
    # Rank 5: the same, with 500 more bytes before profiling and steps 1000 µs later.
    shifted = []
    for event in events:
        moved = {**event, "ts": event["ts"] + 1000}
        if event["name"] == "[memory]":
            moved["args"] = {**event["args"], "Total Allocated": event["args"]["Total Allocated"] + 500}
        shifted.append(moved)
    write_trace(tmp_path / "b.pt.trace.json", shifted, rank=5)
    result = memory.analyse(read_memory(tmp_path))
    assert result.summary.select("device", "peak_bytes", "peak_time_us").rows() == [
        ("rank 3 cuda:0", 1400, 20.0),
        ("rank 5 cuda:0", 1900, 1020.0),
    ]
    spans = memory.span_peaks(result).filter(pl.col("name") == "ProfilerStep#1")
    assert spans.select("device", "start_us", "peak_bytes").rows() == [
        ("rank 3 cuda:0", 0.0, 1400),
        ("rank 5 cuda:0", 1000.0, 1900),
    ]
