"""Trace exports (counters and pattern overlays): file safety, content and HTA parity."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kineto_util import cpu_op, kernel, runtime, write_trace

from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.scope import Scope
from htatui.analysis.export import traces as export
from htatui.analysis.export.traces import ExportError, ExportExistsError
from htatui.analysis.views.patterns import PatternsOptions
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet


def load(*paths: Path) -> TraceSet:
    return load_traces(list(paths), use_cache=False, max_workers=1)


def memcpy(ts: float, dur: float, corr: int, bw: float) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "gpu_memcpy",
        "name": "Memcpy HtoD (Pinned -> Device)",
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {
            "device": 0,
            "stream": 7,
            "correlation": corr,
            "bytes": 25000,
            "memory bandwidth (GB/s)": bw,
        },
    }


def job_events(offset: float = 0.0) -> list[dict[str, Any]]:
    """Stream 7 (GPU pid 0): launches at 100 and 106 (corr 1, 2) start kernels at 110 and 150;
    cudaMemcpyAsync at 120 (corr 3) starts a 10 µs HtoD copy at 170 at 2.5 GB/s.
    Queue length (+1 at the call, −1 when the work starts): 100→1, 106→2, 110→1, 120→2,
    150→1, 170→0: 6 "Queue Length" events. Bandwidth: "Memcpy HtoD" 170→2.5, 180→0.0: 2 events.
    """
    o = offset
    return [
        cpu_op("aten::linear", o + 95, 40),
        runtime("cudaLaunchKernel", o + 100, 3, 1),
        runtime("cudaLaunchKernel", o + 106, 2, 2),
        runtime("cudaMemcpyAsync", o + 120, 2, 3),
        kernel("gemm", o + 110, 40, corr=1),
        kernel("bias", o + 150, 10, corr=2),
        memcpy(o + 170, 10, 3, 2.5),
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 0, "tid": 7, "ts": o + 110, "bp": "e"},
    ]


QUEUE = [(100, 1), (106, 2), (110, 1), (120, 2), (150, 1), (170, 0)]
BANDWIDTH = [(170, 2.5), (180, 0.0)]


def read_doc(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    doc: dict[str, Any] = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return doc


def counters(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "C"]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "in" / "rank-0.json.gz", job_events(), rank=0)


def test_counters_export_content(source: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    original = source.read_bytes()
    mtime = source.stat().st_mtime_ns
    seen: list[tuple[int, int, Path]] = []
    paths = export.export_counters(load(source), None, out_dir, progress=lambda d, t, p: seen.append((d, t, p)))
    assert paths == [out_dir / "rank-0_with_counters.json.gz"]
    assert seen == [(1, 1, paths[0])]
    assert paths[0].read_bytes()[:2] == b"\x1f\x8b"  # really gzip
    assert source.read_bytes() == original and source.stat().st_mtime_ns == mtime  # input untouched
    doc = read_doc(paths[0])
    source_doc = read_doc(source)
    # Every original event is still there, in order, before the counters.
    assert doc["traceEvents"][: len(source_doc["traceEvents"])] == source_doc["traceEvents"]
    assert {k: v for k, v in doc.items() if k != "traceEvents"} == {
        k: v for k, v in source_doc.items() if k != "traceEvents"
    }
    events = counters(doc)
    assert len(events) == len(QUEUE) + len(BANDWIDTH) == 8
    queue_events = [e for e in events if e["name"] == "Queue Length"]
    assert [(e["ts"], e["args"]["Queue Length"]) for e in queue_events] == QUEUE
    assert all(
        e["pid"] == 0 and e["id"] == 7 and set(e) == {"ph", "name", "pid", "ts", "id", "args"} for e in queue_events
    )
    bw_events = [e for e in events if e["name"] == "Memcpy HtoD"]
    assert [(e["ts"], e["args"]["Memcpy BW"]) for e in bw_events] == BANDWIDTH
    assert all(e["pid"] == 0 and "id" not in e for e in bw_events)
    # `"rank": 0` keeps its space (HTA finds ranks by that text).
    assert b'"rank": 0' in gzip.decompress(paths[0].read_bytes())
    # The export loads again, with the same events plus the counters (not X events).
    again = load(paths[0])
    assert again.ranks[0].events.height == load(source).ranks[0].events.height + 8


def test_counters_plain_json_and_kinds(tmp_path: Path) -> None:
    source = write_trace(tmp_path / "in" / "trace.json", job_events(), rank=0)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (path,) = export.export_counters(load(source), [0], out_dir, kinds=("memory_bw",))
    assert path.name == "trace_with_counters.json"
    assert path.read_bytes()[:1] == b"{"  # plain JSON, not gzip
    assert [(e["name"], e["ts"]) for e in counters(read_doc(path))] == [
        ("Memcpy HtoD", 170),
        ("Memcpy HtoD", 180),
    ]
    with pytest.raises(ValueError, match="unknown counter kind"):
        export.export_counters(load(source), [0], out_dir, force=True, kinds=("bogus",))


def test_counters_bare_array_trace(tmp_path: Path) -> None:
    """A trace written as a bare JSON array of events (Chrome's array format) stays an array."""
    source = tmp_path / "in" / "rank-0.json"
    source.parent.mkdir()
    source.write_text(json.dumps(job_events()))
    (path,) = export.export_counters(load(source), None, tmp_path)
    doc = json.loads(path.read_bytes())
    assert isinstance(doc, list) and doc[: len(job_events())] == job_events()
    assert len([e for e in doc if e.get("ph") == "C"]) == 8


def test_counters_original_time_base(tmp_path: Path) -> None:
    """Two ranks with different bases: rank 1's file times are 1 s (1e6 µs) later on its own base
    and fractional; each export gives back the file's own times (to the ns)."""
    folder = tmp_path / "job"
    write_trace(folder / "rank-0.json", job_events(), rank=0, base_ns=1_000_000_000_000)
    write_trace(folder / "rank-1.json", job_events(0.25), rank=1, base_ns=1_001_000_000_000)
    traces = load(folder)
    assert traces.ranks[1].shift_us != traces.ranks[0].shift_us
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    seen: list[tuple[int, int]] = []
    paths = export.export_counters(traces, None, out_dir, progress=lambda d, t, _p: seen.append((d, t)))
    assert [p.name for p in paths] == ["rank-0_with_counters.json", "rank-1_with_counters.json"]
    assert seen == [(1, 2), (2, 2)]
    queue0 = [e["ts"] for e in counters(read_doc(paths[0])) if e["name"] == "Queue Length"]
    queue1 = [e["ts"] for e in counters(read_doc(paths[1])) if e["name"] == "Queue Length"]
    assert queue0 == [ts for ts, _ in QUEUE]
    assert queue1 == [ts + 0.25 for ts, _ in QUEUE]


def test_refuses_to_overwrite_and_force(source: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    traces = load(source)
    target = out_dir / "rank-0_with_counters.json.gz"
    target.write_bytes(b"keep me")
    with pytest.raises(ExportExistsError) as info:
        export.export_counters(traces, None, out_dir)
    assert isinstance(info.value, FileExistsError) and isinstance(info.value, ExportError)
    assert str(target) in str(info.value) and "\n" not in str(info.value)
    assert target.read_bytes() == b"keep me"
    export.export_counters(traces, None, out_dir, force=True)
    assert len(counters(read_doc(target))) == 8
    assert not [p for p in out_dir.iterdir() if p.name.endswith(".tmp")]  # no temp files left


def test_bad_out_dir(source: Path, tmp_path: Path) -> None:
    traces = load(source)
    for bad in (tmp_path / "missing", source):
        with pytest.raises(ExportError) as info:
            export.export_counters(traces, None, bad)
        assert "\n" not in str(info.value) and str(bad) in str(info.value)
    with pytest.raises(ExportError, match="rank 4 is not loaded"):
        export.export_counters(traces, [4], tmp_path)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            with pytest.raises(ExportError, match="not writable"):
                export.export_counters(traces, None, locked)
        finally:
            locked.chmod(0o700)


def test_never_overwrites_an_input(tmp_path: Path) -> None:
    """The output name of rank 0 is another loaded input: refused even with force."""
    folder = tmp_path / "job"
    write_trace(folder / "a.json", job_events(), rank=0)
    other = write_trace(folder / "a_with_counters.json", job_events(), rank=1)
    before = other.read_bytes()
    traces = load(folder)
    with pytest.raises(ExportError, match="input"):
        export.export_counters(traces, [0], folder, force=True)
    assert other.read_bytes() == before
    # Into the input folder at all is refused (issue #9): the export would load as another rank.
    with pytest.raises(ExportError, match="holds the input trace"):
        export.export_counters(traces, [1], folder)
    assert sorted(p.name for p in folder.iterdir()) == ["a.json", "a_with_counters.json"]


def test_same_file_name_in_two_folders(tmp_path: Path) -> None:
    a = write_trace(tmp_path / "a" / "trace.json", job_events(), rank=0)
    b = write_trace(tmp_path / "b" / "trace.json", job_events(), rank=1)
    traces = load(a, b)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with pytest.raises(ExportError, match="same file name"):
        export.export_counters(traces, None, out_dir)
    assert list(out_dir.iterdir()) == []
    assert [p.name for p in export.export_counters(traces, [1], out_dir)] == ["trace_with_counters.json"]


def test_missing_source_file(source: Path, tmp_path: Path) -> None:
    traces = load(source)
    source.unlink()
    with pytest.raises(ExportError, match="gone"):
        export.export_counters(traces, None, tmp_path)


def test_file_names() -> None:
    assert export.counters_file_name(Path("/x/rank0.json.gz")) == "rank0_with_counters.json.gz"
    assert export.counters_file_name(Path("r.pt.trace.json")) == "r.pt.trace_with_counters.json"
    assert export.overlay_file_name(Path("/x/rank0.json.gz")) == "overlaid_rank0.json.gz"


# --------------------------------------------------------------------------- patterns overlay


def overlay_events() -> list[dict[str, Any]]:
    """Index 0 is metadata; two aten::linear calls with the same 3-kernel pattern (1-7 and 8-14:
    the call, its 3 launches, its 3 kernels); a lone aten::relu with one kernel (15-17); the
    profiler span (18)."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python"}}
    ]
    corr = 0
    for start in (0, 100):
        events.append(cpu_op("aten::linear", start, 50))
        for i in range(3):
            corr += 1
            events.append(runtime("cudaLaunchKernel", start + 1 + 5 * i, 2, corr))
        for i in range(3):
            events.append(kernel(f"k{i}", start + 20 + 5 * i, 3, corr=corr - 2 + i))
    events.append(cpu_op("aten::relu", 200, 10))
    events.append(runtime("cudaLaunchKernel", 201, 2, 99))
    events.append(kernel("relu", 215, 1, corr=99))
    events.append(
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 0,
            "dur": 300,
            "args": {"Op count": 0},
        }
    )
    return events


def test_export_patterns_overlay(tmp_path: Path) -> None:
    source = write_trace(tmp_path / "in" / "rank-0.json.gz", overlay_events(), rank=0)
    original = source.read_bytes()
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    traces = load(source)
    path = export.export_patterns(traces, PatternsOptions(), out_dir)
    assert path == out_dir / "overlaid_rank-0.json.gz" and path.read_bytes()[:2] == b"\x1f\x8b"
    assert source.read_bytes() == original
    doc, before = read_doc(path), read_doc(source)
    marked = {i for i, e in enumerate(doc["traceEvents"]) if "Patterns" in (e.get("args") or {})}
    assert marked == set(range(1, 15))
    assert doc["traceEvents"][1]["args"]["Patterns"] == {"aten::linear|k0|k1|k2": 2}
    assert doc["traceEvents"][7]["args"] == {
        "device": 0,
        "stream": 7,
        "correlation": 3,
        "Patterns": {"aten::linear|k0|k1|k2": 2},
    }
    # Everything else is unchanged.
    for i, (a, b) in enumerate(zip(doc["traceEvents"], before["traceEvents"], strict=True)):
        if i not in marked:
            assert a == b
    assert load(path).ranks[0].events.height == traces.ranks[0].events.height
    with pytest.raises(ExportExistsError):
        export.export_patterns(traces, PatternsOptions(), out_dir)
    export.export_patterns(traces, PatternsOptions(), out_dir, force=True)


def test_export_patterns_compress_other_kernels(tmp_path: Path) -> None:
    source = write_trace(tmp_path / "in" / "rank-0.json", overlay_events(), rank=0)
    path = export.export_patterns(load(source), PatternsOptions(), tmp_path, compress_other_kernels=True)
    assert path.name == "overlaid_rank-0.json" and path.read_bytes()[:1] == b"{"
    events = read_doc(path)["traceEvents"]
    # Symbol ids in order of first appearance among X events: aten::linear 0, cudaLaunchKernel 1,
    # k0 2, k1 3, k2 4, aten::relu 5, relu 6, PyTorch Profiler (0) 7.
    assert [events[i]["name"] for i in (15, 16, 17)] == ["5", "1", "6"]
    assert all(events[i]["args"] == {} for i in (15, 16, 17))
    assert events[1]["name"] == "aten::linear" and "Patterns" in events[1]["args"]
    assert events[0] == overlay_events()[0]  # metadata untouched
    assert events[18]["name"] == "PyTorch Profiler (0)"
    assert events[18]["args"]["5"] == "aten::relu" and events[18]["args"]["0"] == "aten::linear"


def test_export_patterns_no_rank(tmp_path: Path) -> None:
    source = write_trace(tmp_path / "in" / "rank-0.json", overlay_events(), rank=0)
    with pytest.raises(ExportError, match="rank"):
        export.export_patterns(load(source), PatternsOptions(rank=7), tmp_path)
    with pytest.raises(ExportError, match="does not exist"):
        export.export_patterns(load(source), PatternsOptions(), tmp_path / "nope")


# --------------------------------------------------------------------------- HTA parity


def test_counters_parity_negative_queue_length(shared_traces: Path, tmp_path: Path) -> None:
    # HTA 0.6.1 TraceAnalysis(trace_dir=<copy of this folder>).generate_trace_with_counters(ranks=[0])
    # appended 12848 counter events: Queue Length 10448 (stream 7: 9680, 27: 592, 25: 56, 84: 56,
    # 285: 32, 363: 32), Memcpy DtoD 1824, Memset 400, Memcpy HtoD 128, Memcpy DtoH 48; pid 0.
    # Compat mode gives exactly those events (same ts, ids and values); the corrected queue series
    # adds the graph launches and merges equal timestamps: 10452 queue events.
    folder = shared_traces / "negative_queue_length_values_check"
    traces = load(folder)
    hta_counts = {"Queue Length": 10448, "Memcpy DtoD": 1824, "Memset": 400, "Memcpy HtoD": 128, "Memcpy DtoH": 48}
    compat = export.counter_events(traces, 0, CommonOptions(scope=Scope(hta_compat=True)))
    assert Counter(e["name"] for e in compat) == hta_counts
    assert Counter(e["id"] for e in compat if e["name"] == "Queue Length") == {
        7: 9680,
        27: 592,
        25: 56,
        84: 56,
        285: 32,
        363: 32,
    }
    assert compat[:2] == [
        {"ph": "C", "name": "Queue Length", "pid": 0, "ts": 1683564901553450, "id": 7, "args": {"Queue Length": 1}},
        {"ph": "C", "name": "Queue Length", "pid": 0, "ts": 1683564901553483, "id": 7, "args": {"Queue Length": 2}},
    ]
    (path,) = export.export_counters(traces, None, tmp_path)
    assert path.name == "rank0_with_counters.json.gz"
    events = [e for e in counters(read_doc(path)) if not str(e.get("pid", "")).endswith("Counters")]
    assert Counter(e["name"] for e in events) == hta_counts | {"Queue Length": 10452}
    assert len(events) >= 12000
    assert all(isinstance(e["pid"], int) and isinstance(e["ts"], int) for e in events)
    again = load(path)
    assert again.ranks[0].rank == 0
