"""queue view on hand-built traces; every expected number is derived in the comments."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import kernel, runtime, write_trace

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import queue
from htatui.analysis.views.queue import QueueOptions
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet


def load(path: Path) -> TraceSet:
    return load_traces([path], use_cache=False, max_workers=1)


def memset(ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "gpu_memset",
        "name": "Memset (Device)",
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": corr},
    }


def job(tmp_path: Path) -> TraceSet:
    """corr | call                   | GPU work
    1    | cudaLaunchKernel @100  | stream 7 kernel @110
    2    | cudaLaunchKernel @106  | stream 7 kernel @150
    3    | cudaMemsetAsync  @120  | stream 7 memset @170
    4    | cudaLaunchKernel @130  | stream 20 kernel @140
    5    | cudaGraphLaunch  @200  | stream 7 kernels @230 and @240

    Corrected, stream 7: +1@100 → 1, +1@106 → 2, −1@110 → 1, +1@120 → 2, −1@150 → 1,
    −1@170 → 0, +1@200 → 1 (the graph launch is one entry), −1@230 → 0 (its first kernel).
    HTA ignores the graph: the same series up to (170, 0).
    Stream 20: +1@130 → 1, −1@140 → 0.
    """
    events = [
        runtime("cudaLaunchKernel", 100, 3, 1),
        kernel("a", 110, 40, corr=1),
        runtime("cudaLaunchKernel", 106, 2, 2),
        kernel("b", 150, 10, corr=2),
        runtime("cudaMemsetAsync", 120, 2, 3),
        memset(170, 5, 3),
        runtime("cudaLaunchKernel", 130, 2, 4),
        kernel("nccl", 140, 60, stream=20, corr=4),
        runtime("cudaGraphLaunch", 200, 10, 5),
        kernel("g1", 230, 10, corr=5),
        kernel("g2", 240, 10, corr=5),
    ]
    return load(write_trace(tmp_path / "rank-0.json", events, rank=0))


def points(frame: pl.DataFrame, stream: int, origin: float = 100.0) -> list[tuple[float, int]]:
    """(file ts, queue length) of one stream; the loader puts the earliest event (`origin`) at 0."""
    rows = frame.filter(pl.col("stream") == stream).select(pl.col("ts_us") + origin, "queue_length")
    return rows.rows()


def test_series_corrected_counts_graph_launch_once(tmp_path: Path) -> None:
    frame = queue.series(job(tmp_path), QueueOptions())
    assert frame.schema == pl.Schema(queue.SERIES_COLUMNS)
    assert points(frame, 7) == [
        (100.0, 1),
        (106.0, 2),
        (110.0, 1),
        (120.0, 2),
        (150.0, 1),
        (170.0, 0),
        (200.0, 1),
        (230.0, 0),
    ]
    assert points(frame, 20) == [(130.0, 1), (140.0, 0)]
    without = queue.series(job(tmp_path), QueueOptions(include_graph_launches=False))
    assert points(without, 7)[-1] == (170.0, 0) and len(points(without, 7)) == 6


def test_series_compat(tmp_path: Path) -> None:
    frame = queue.series(job(tmp_path), QueueOptions(scope=Scope(hta_compat=True)))
    assert points(frame, 7) == [(100.0, 1), (106.0, 2), (110.0, 1), (120.0, 2), (150.0, 1), (170.0, 0)]
    assert points(frame, 20) == [(130.0, 1), (140.0, 0)]


def test_summary(tmp_path: Path) -> None:
    summary = queue.compute(job(tmp_path), QueueOptions())
    assert summary.columns == list(queue.COLUMNS)
    s7 = summary.filter(pl.col("stream") == 7).row(0, named=True)
    # values [1, 2, 1, 2, 1, 0, 1, 0]: n 8, Σ 8, Σx² 12 → var (12 − 8) / 7.
    assert s7["count"] == 8 and s7["min"] == 0 and s7["max"] == 2
    assert s7["mean"] == pytest.approx(1.0)
    assert s7["std"] == pytest.approx(math.sqrt(4 / 7))
    # sorted [0, 0, 1, 1, 1, 1, 2, 2]: p25 at position 1.75 → 0.75, p50 (3.5) → 1, p75 (5.25) → 1.25.
    assert (s7["p25"], s7["p50"], s7["p75"]) == (0.75, 1.0, 1.25)
    # Held values: 1×6 + 2×4 + 1×10 + 2×30 + 1×20 + 0×30 + 1×30 = 134 over 100..230.
    assert s7["time_weighted_mean"] == pytest.approx(134 / 130)
    s20 = summary.filter(pl.col("stream") == 20).row(0, named=True)
    assert (s20["count"], s20["mean"], s20["time_weighted_mean"]) == (2, 0.5, 1.0)
    assert queue.summary(job(tmp_path), QueueOptions()).equals(summary)


def test_blocked_all_streams(tmp_path: Path) -> None:
    traces = job(tmp_path)
    blocked = queue.blocked(traces, QueueOptions(max_queue_length=2))
    assert blocked.schema == pl.Schema(queue.BLOCKED_COLUMNS)
    rows = {r["stream"]: r for r in blocked.to_dicts()}
    # Stream 7 at ≥ 2: [106, 110) + [120, 150) = 34 µs over the rank's series span 100..230.
    assert rows[7]["blocked_us"] == 34.0 and rows[7]["blocked_pct"] == pytest.approx(100 * 34 / 130)
    assert rows[20]["blocked_us"] == 0.0 and rows[20]["blocked_pct"] == 0.0
    # HTA: the same 34 µs but over its trace duration (last start 240
    # − first start 100 = 140); stream 20 is reported too (HTA keeps only one stream per rank).
    compat = {
        r["stream"]: r
        for r in queue.blocked(traces, QueueOptions(scope=Scope(hta_compat=True), max_queue_length=2)).to_dicts()
    }
    assert compat[7]["blocked_us"] == 34.0 and compat[7]["blocked_pct"] == pytest.approx(100 * 34 / 140)
    assert compat[20]["blocked_us"] == 0.0
    # Default limit 1024: nothing blocked.
    assert queue.blocked(traces, QueueOptions())["blocked_us"].to_list() == [0.0, 0.0]


def test_equal_timestamps(tmp_path: Path) -> None:
    """call 1 @300 → kernel @310; call 2 @310 → kernel @320. At 310 one op leaves and one
    enters: corrected merges them into one change point (310, 1); HTA keeps both events."""
    events = [
        runtime("cudaLaunchKernel", 300, 2, 1),
        kernel("a", 310, 5, corr=1),
        runtime("cudaLaunchKernel", 310, 2, 2),
        kernel("b", 320, 5, corr=2),
    ]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    assert points(queue.series(traces, QueueOptions()), 7, 300.0) == [(300.0, 1), (310.0, 1), (320.0, 0)]
    compat = points(queue.series(traces, QueueOptions(scope=Scope(hta_compat=True))), 7, 300.0)
    assert len(compat) == 4 and compat[0] == (300.0, 1) and compat[-1] == (320.0, 0)
    assert compat[1][1] in (0, 2) and compat[2] == (310.0, 1)


def test_hip_stream_zero(tmp_path: Path) -> None:
    # hip calls carry a hex-string stream; their kernels run on stream 0. HTA counts them too.
    events = [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "hipLaunchKernel",
            "pid": 100,
            "tid": 1,
            "ts": 100,
            "dur": 5,
            "args": {"correlation": 1, "stream": "0x0"},
        },
        kernel("Cijk", 120, 10, stream=0, corr=1),
    ]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    for compat in (False, True):
        frame = queue.series(traces, QueueOptions(scope=Scope(hta_compat=compat)))
        assert points(frame, 0) == [(100.0, 1), (120.0, 0)]


def test_hta_partner_index_zero_quirk(tmp_path: Path) -> None:
    """HTA stores the partner's file position in index_correlation and reads 0 as "no
    partner", so a launch whose kernel is the file's first event is not counted in compat."""
    events = [
        kernel("first", 120, 10, corr=1),
        runtime("cudaLaunchKernel", 100, 5, 1),
        runtime("cudaLaunchKernel", 200, 5, 2),
        kernel("second", 220, 10, corr=2),
    ]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    assert points(queue.series(traces, QueueOptions(scope=Scope(hta_compat=True))), 7) == [(200.0, 1), (220.0, 0)]
    assert len(points(queue.series(traces, QueueOptions()), 7)) == 4


def test_empty(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {}}]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    for compat in (False, True):
        options = QueueOptions(scope=Scope(hta_compat=compat))
        series = queue.series(traces, options)
        assert series.height == 0 and series.schema == pl.Schema(queue.SERIES_COLUMNS)
        summary = queue.compute(traces, options)
        assert summary.height == 0 and summary.schema == pl.Schema(queue.COLUMNS)
        blocked = queue.blocked(traces, options)
        assert blocked.height == 0 and blocked.schema == pl.Schema(queue.BLOCKED_COLUMNS)


# ---- generated fixtures (fixtures/expected.py) ------------------------------------------------

try:
    from fixtures import expected, generate
except ImportError:  # pragma: no cover - fixtures/ ships with the repository
    expected = generate = None  # type: ignore[assignment]
needs_fixtures = pytest.mark.skipif(expected is None, reason="fixtures/ (generated scenarios) not available")


def scenario_points(traces: TraceSet, frame: pl.DataFrame, rank: int, stream: int) -> list[tuple[float, int]]:
    """Change points in scenario time t (the file holds ORIGIN_US + t; ts_us = file ts + shift)."""
    offset = traces.ranks[rank].shift_us + expected.SMALL_EXPECTED["origin_us"]
    rows = frame.filter((pl.col("rank") == rank) & (pl.col("stream") == stream))
    return [(round(t - offset, 3), q) for t, q in rows.select("ts_us", "queue_length").rows()]


@needs_fixtures
@pytest.mark.parametrize("which", ["kept", "all"])
@pytest.mark.parametrize("compat", [False, True])
def test_small_expected(small: TraceSet, which: str, compat: bool) -> None:
    truth = expected.SMALL_EXPECTED
    options = QueueOptions(scope=Scope(steps=Steps("all") if which == "all" else Steps(), hta_compat=compat))
    frame = queue.series(small, options)
    summary = queue.summarize(frame)
    for rank in truth["ranks"]:
        for stream, change_points in truth["queue_length"][which].items():
            assert scenario_points(small, frame, rank, stream) == change_points
            row = summary.filter((pl.col("rank") == rank) & (pl.col("stream") == stream)).row(0, named=True)
            for key, value in truth["queue_summary"][which][stream].items():
                assert row[key] == pytest.approx(value), (rank, stream, key)
            # Time-weighted mean = time integral / span of the stream's series.
            points = [t for t, _ in change_points]
            span = points[-1] - points[0]
            integral = truth["queue_integral"][which][stream]
            assert row["time_weighted_mean"] == pytest.approx(integral / span)


@needs_fixtures
def test_edge_cuda_graph(tmp_path: Path) -> None:
    generate.write_scenario("edge", tmp_path)
    traces = load(tmp_path / "cuda_graph")
    truth = expected.EDGE_EXPECTED["cuda_graph"]
    offset = traces.ranks[0].shift_us + expected.SMALL_EXPECTED["origin_us"]
    compat = queue.series(traces, QueueOptions(scope=Scope(hta_compat=True)))
    assert [(t - offset, q) for t, q in compat.select("ts_us", "queue_length").rows()] == truth["hta_queue_length"][7]
    # Corrected: + the graph launch at 1210, one entry until its first kernel starts at 1300.
    corrected = queue.series(traces, QueueOptions())
    assert [(t - offset, q) for t, q in corrected.select("ts_us", "queue_length").rows()] == [
        (1015.0, 1),
        (1050.0, 0),
        (1210.0, 1),
        (1300.0, 0),
    ]


# ---- real traces -----------------------------------------------------------------------------

# folder → streams with a queue (both modes): AMD's hip launches on stream 0 count (HTA lists
# them), MTIA's 12 streams, the Triton kernel's stream 7.
SHARED = {"cpu_only": 0, "rank_non_gpu": 0, "amd_trace": 1, "mtia_inference_trace": 12, "triton_example": 1}


@pytest.mark.parametrize("folder", sorted(SHARED))
def test_shared_traces(load_shared: Any, folder: str) -> None:
    traces = load_shared(folder)
    for compat in (False, True):
        options = QueueOptions(scope=Scope(hta_compat=compat))
        series = queue.series(traces, options)
        assert series.schema == pl.Schema(queue.SERIES_COLUMNS)
        # Each stream with a queue has a series that starts empty-handed and ends empty again.
        assert series.select("rank", "stream").n_unique() == SHARED[folder]
        assert (series["queue_length"] >= 0).all()
        summary = queue.compute(traces, options)
        assert summary.schema == pl.Schema(queue.COLUMNS) and summary.height == SHARED[folder], (
            folder,
            compat,
        )
        blocked = queue.blocked(traces, options)
        assert blocked.schema == pl.Schema(queue.BLOCKED_COLUMNS) and blocked.height == SHARED[folder]


def test_ns_resolution_golden(load_shared: Any) -> None:
    """Reference §F.2: stream 7 count 9752, mean 812.41, std 306.06, p25 764.75, p50 973,
    p75 1020, max 1022 (HTA 0.6.1)."""
    summary = queue.compute(load_shared("ns_resolution_trace"), QueueOptions(scope=Scope(hta_compat=True))).row(
        0, named=True
    )
    assert summary["stream"] == 7 and summary["count"] == 9752
    assert summary["mean"] == pytest.approx(812.41, abs=0.005)
    assert summary["std"] == pytest.approx(306.06, abs=0.005)
    assert (summary["p25"], summary["p50"], summary["p75"], summary["max"]) == (764.75, 973.0, 1020.0, 1022.0)


def test_overview_joins_summary_and_blocked(tmp_path: Path) -> None:
    """The Counters screen's row for stream 7: the summary's numbers plus its 34 µs (34/130) blocked."""
    traces = job(tmp_path)
    options = QueueOptions(max_queue_length=2)
    rows = {r["stream"]: r for r in queue.overview(traces, options).to_dicts()}
    assert rows[7]["time_weighted_mean"] == pytest.approx(134 / 130)
    assert rows[7]["blocked_us"] == 34.0 and rows[7]["blocked_pct"] == pytest.approx(100 * 34 / 130)
    assert (rows[20]["count"], rows[20]["blocked_us"]) == (2, 0.0)
