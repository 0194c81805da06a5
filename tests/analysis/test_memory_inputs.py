"""Memory readers: the restricted unpickler, detection by content, older snapshot layouts, timelines."""

from __future__ import annotations

import collections
import gzip
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from kineto_util import write_trace
from memory_util import MODEL, MODEL_SITE, memory_trace_events, snapshot_a, write_pickle

from htatui.trace.memory_inputs import (
    BEFORE_RECORDING_SITE,
    UNKNOWN_SITE,
    MemoryInputError,
    looks_like_snapshot,
    read_memory,
)
from htatui.trace.memory_sites import site_of


class _RunsACommand:
    """Unpickling this would run a shell command that creates a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_a_command_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    evil = write_pickle(tmp_path / "evil.pickle", {"segments": [], "device_traces": [[_RunsACommand(marker)]]})
    with pytest.raises(MemoryInputError, match=r"evil\.pickle: refused: the pickle names .*system"):
        read_memory(evil)
    assert not marker.exists()


def test_any_global_is_refused_even_a_harmless_one(tmp_path: Path) -> None:
    path = write_pickle(tmp_path / "ordered.pickle", collections.OrderedDict(segments=[]))
    with pytest.raises(MemoryInputError, match="refused: the pickle names collections.OrderedDict"):
        read_memory(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"a": 1}, "not a CUDA memory snapshot"),
        ([1, 2, 3], "not a CUDA memory snapshot"),
        ({"segments": [], "device_traces": [[]]}, "empty: no trace history"),
    ],
)
def test_pickles_of_something_else_are_named(tmp_path: Path, content: object, message: str) -> None:
    path = write_pickle(tmp_path / "x.pickle", content)
    with pytest.raises(MemoryInputError, match=message):
        read_memory(path)


def test_truncated_pickle(tmp_path: Path) -> None:
    whole = pickle.dumps(snapshot_a(), protocol=4)
    path = tmp_path / "cut.pickle"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(MemoryInputError, match=r"cut\.pickle: not a readable pickle \(truncated"):
        read_memory(path)


def test_size_cap_is_checked_before_reading(tmp_path: Path) -> None:
    path = write_pickle(tmp_path / "big.pickle", snapshot_a())
    with pytest.raises(MemoryInputError, match="over the 100-byte limit"):
        read_memory(path, max_bytes=100)


def test_detection_is_by_content_not_name(tmp_path: Path) -> None:
    snapshot = write_pickle(tmp_path / "snapshot.json", snapshot_a())
    assert looks_like_snapshot(snapshot)
    assert read_memory(snapshot).kind == "snapshot"
    timeline = tmp_path / "memory.bin"
    timeline.write_text(json.dumps([[1, 2], [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 0, 0, 0, 0, 0, 0]]]))
    assert read_memory(timeline).kind == "timeline"


def test_current_layout_tables(tmp_path: Path) -> None:
    recording = read_memory(write_pickle(tmp_path / "a.pickle", snapshot_a()))
    assert recording.devices == ["cuda:0"]
    assert recording.events["action"].to_list() == [
        "segment_alloc",
        "alloc",
        "alloc",
        "free_requested",
        "free_completed",
        "alloc",
        "free_completed",
        "oom",
    ]
    assert recording.events["device_free_bytes"].to_list()[-1] == 100
    assert recording.segments["total_size_bytes"].to_list() == [4096, 1024]
    # Both spellings of the pending-free state count as active.
    assert recording.blocks["active"].to_list() == [False, True, True, False, True, False]
    assert MODEL_SITE in recording.stacks


def test_older_layout_bare_segment_list_with_history(tmp_path: Path) -> None:
    segments = [
        {
            "device": 1,
            "address": 100,
            "total_size": 1024,
            "blocks": [
                {
                    "size": 512,
                    "state": "active_pending_free",
                    "history": [{"addr": 100, "real_size": 500, "frames": MODEL}],
                },
                {"size": 512, "state": "inactive"},
            ],
        }
    ]
    recording = read_memory(write_pickle(tmp_path / "old.pickle", segments))
    assert recording.kind == "snapshot"
    assert recording.blocks["address"].to_list() == [100, 612]
    assert recording.blocks["requested_bytes"].to_list() == [500, 512]
    assert recording.blocks["site"].to_list() == [MODEL_SITE, None]
    assert recording.segments["allocated_bytes"].to_list() == [512]
    assert recording.devices == ["cuda:1"]


def test_site_choice() -> None:
    assert site_of(MODEL) == MODEL_SITE
    assert site_of([]) == UNKNOWN_SITE
    backward = [
        {"name": "c10::cuda::CUDACachingAllocator::malloc(int)", "filename": "", "line": 0},
        {"name": "at::_ops::mm::call(at::Tensor const&)", "filename": "??", "line": 0},
        {
            "name": "torch::autograd::generated::details::mm_mat2_backward(at::Tensor const&, long)",
            "filename": "",
            "line": 0,
        },
        {"name": "torch::autograd::Engine::thread_main()", "filename": "", "line": 0},
    ]
    assert site_of(backward) == "torch::autograd::generated::details::mm_mat2_backward"
    assert site_of(backward[:2]) == "at::_ops::mm::call"
    # Library Python frames are skipped in favour of the C++ frame when no user frame exists.
    library_only = [backward[1], {"name": "linear", "filename": "/x/site-packages/torch/nn/functional.py", "line": 1}]
    assert site_of(library_only) == "at::_ops::mm::call"


def test_trace_memory_events_and_spans(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.pt.trace.json.gz", memory_trace_events(), base_ns=2_000_000)
    recording = read_memory(tmp_path)
    assert recording.path == path
    assert recording.kind == "trace"
    assert recording.events["time_us"].to_list() == [2005.0, 2020.0, 2060.0, 2070.0, 2110.0, 2120.0]
    assert recording.events["action"].to_list() == [
        "alloc",
        "alloc",
        "free_completed",
        "alloc",
        "alloc",
        "free_completed",
    ]
    assert recording.events["site"].to_list() == [
        "(outside annotations)",
        "forward",
        "backward",
        "backward",
        "(outside annotations)",
        "(outside annotations)",
    ]
    assert recording.spans["name"].to_list() == ["ProfilerStep#1", "forward", "backward", "ProfilerStep#2"]


def test_trace_without_memory_events(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", [memory_trace_events()[0]])
    with pytest.raises(MemoryInputError, match=r"t\.json: a trace without \[memory\] events"):
        read_memory(path)


def test_raw_timeline_pre_existing_rows(tmp_path: Path) -> None:
    rows = [[-1, 0, 100, 0], [1000, 1, 50, 4], [2000, 2, -50, 4], [3000, 1, 20, 3]]
    path = tmp_path / "m.raw.json.gz"
    path.write_bytes(gzip.compress(json.dumps(rows).encode()))
    recording = read_memory(path)
    assert recording.kind == "raw_timeline"
    # Time -1 is memory that existed before profiling: its own sample, at the first real time (1000 ns).
    assert recording.events["time_us"].to_list() == [1.0, 1.0, 2.0, 3.0]
    assert recording.events["allocated_bytes"].to_list() == [100, 150, 100, 120]
    assert BEFORE_RECORDING_SITE not in recording.categories["category"].to_list()


def _paths(obj: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found: list[tuple[object, ...]] = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for key, value in items:
        if key != "frames":
            found.append((*prefix, key))
            found.extend(_paths(value, (*prefix, key)))
    return found


def test_odd_values_anywhere_are_read_or_refused_in_one_line(tmp_path: Path) -> None:
    """Every field of a snapshot replaced by a value of the wrong type: a result or a MemoryInputError."""
    from htatui.analysis.memory import usage as memory
    from htatui.trace.memory_inputs import snapshot_from_object

    base = snapshot_a()
    # One path per field kind: the first entry/segment/block stands for the others.
    kinds = {tuple(0 if isinstance(k, int) else k for k in p): p for p in reversed(_paths(base))}
    for path in kinds.values():
        odd: Any
        for odd in (None, "x", 2**70, []):
            mutated = pickle.loads(pickle.dumps(base))
            parent: Any = mutated
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = odd
            try:
                analysis = memory.analyse(snapshot_from_object(tmp_path / "odd.pickle", mutated))
                for device in analysis.summary["device"]:
                    analysis.sites_at_peak(device)
                memory.ooms(analysis)
                memory.growth(analysis)
                memory.allocator_state(analysis.recording)
            except MemoryInputError as exc:
                assert "odd.pickle" in str(exc) and "\n" not in str(exc)
