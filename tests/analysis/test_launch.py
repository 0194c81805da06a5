"""launch view on hand-built traces; every expected number is derived in the comments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import kernel, named, runtime, step, write_trace

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import launch
from htatui.analysis.views.launch import LaunchOptions
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet
from htatui.trace.kineto import MTIA_LAUNCH


def load(path: Path) -> TraceSet:
    return load_traces([path], use_cache=False, max_workers=1)


def device_op(cat: str, name: str, ts: float, dur: float, corr: int, *, stream: int = 7, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": corr, **args},
    }


def host_call(cat: str, name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 100,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, **args},
    }


def cuda_job(tmp_path: Path) -> TraceSet:
    """Five launches of five kinds plus one call without GPU work (no ProfilerStep: nothing is
    dropped).

    corr | call                    | cpu [ts, end) | GPU work                         | delay
    1    | cudaLaunchKernel        | [100, 110)    | kernel [130, 135)                | 20
    2    | cudaLaunchKernel        | [200, 260)    | kernel [262, 362)                | 2
    3    | cudaMemcpyAsync         | [300, 308)    | gpu_memcpy [450, 454)            | 142
    4    | cuLaunchKernel (driver) | [500, 510)    | kernel [505, 525)                | -5
    5    | cudaGraphLaunch         | [600, 610)    | kernels [620,630) [640,650) [660,680) | 10, gpu 60
    6    | cudaEventRecord         | [700, 702)    | —
    """
    events = [
        runtime("cudaLaunchKernel", 100, 10, 1),
        kernel("k_short", 130, 5, corr=1),
        runtime("cudaLaunchKernel", 200, 60, 2),
        kernel("k_slow_launch", 262, 100, corr=2),
        runtime("cudaMemcpyAsync", 300, 8, 3),
        device_op(
            "gpu_memcpy",
            "Memcpy HtoD (Pinned -> Device)",
            450,
            4,
            3,
            bytes=4000,
            **named({"memory bandwidth (GB/s)": 1.0}),
        ),
        host_call("cuda_driver", "cuLaunchKernel", 500, 10, 4),
        kernel("triton_k", 505, 20, corr=4),
        runtime("cudaGraphLaunch", 600, 10, 5),
        kernel("graph_a", 620, 10, corr=5),
        kernel("graph_b", 640, 10, corr=5),
        kernel("graph_c", 660, 20, corr=5),
        runtime("cudaEventRecord", 700, 2, 6),
    ]
    return load(write_trace(tmp_path / "rank-0.json", events, rank=0))


def test_corrected_rows(tmp_path: Path) -> None:
    frame = launch.compute(cuda_job(tmp_path), LaunchOptions())
    assert frame.columns == list(launch.COLUMNS)
    assert frame.schema == pl.Schema(launch.COLUMNS)
    rows = {r["correlation"]: r for r in frame.to_dicts()}
    assert sorted(rows) == [1, 2, 3, 4, 5]  # 6 launched nothing
    assert (
        rows[1]["kernel"],
        rows[1]["cpu_duration_us"],
        rows[1]["gpu_duration_us"],
        rows[1]["launch_delay_us"],
    ) == ("k_short", 10.0, 5.0, 20.0)
    assert rows[2]["launch_delay_us"] == 2.0  # 262 - 260
    assert rows[3]["kernel"] == "Memcpy HtoD (Pinned -> Device)" and rows[3]["launch_delay_us"] == 142.0
    # cuLaunchKernel counts; its kernel started 5 µs before the call returned: not clipped.
    assert rows[4]["kernel"] == "triton_k" and rows[4]["launch_delay_us"] == -5.0
    # One row per graph launch: first kernel start 620 to last kernel end 680.
    assert rows[5]["kernel"] == "cudaGraphLaunch (3 kernels)"
    assert rows[5]["gpu_duration_us"] == 60.0 and rows[5]["launch_delay_us"] == 10.0  # 620 - 610
    assert frame["rank"].to_list() == [0] * 5


def test_compat_rows(tmp_path: Path) -> None:
    # HTA: only cudaLaunchKernel(ExC), the MTIA launch and cudaMemcpy/MemsetAsync.
    frame = launch.compute(cuda_job(tmp_path), LaunchOptions(scope=Scope(hta_compat=True)))
    assert frame["correlation"].to_list() == [1, 2, 3]
    assert frame["launch_delay_us"].to_list() == [20.0, 2.0, 142.0]
    no_memory = launch.compute(
        cuda_job(tmp_path), LaunchOptions(scope=Scope(hta_compat=True), include_memory_events=False)
    )
    assert no_memory["correlation"].to_list() == [1, 2]


def test_graph_launch_can_be_left_out(tmp_path: Path) -> None:
    frame = launch.compute(cuda_job(tmp_path), LaunchOptions(include_graph_launches=False))
    assert frame["correlation"].to_list() == [1, 2, 3, 4]


def test_summary_and_outliers(tmp_path: Path) -> None:
    traces = cuda_job(tmp_path)
    options = LaunchOptions()
    summary = launch.summary(traces, options)
    assert summary.columns == list(launch.SUMMARY_COLUMNS)
    row = summary.row(0, named=True)
    # cpu = [10, 60, 8, 10, 10]; gpu = [5, 100, 4, 20, 60]; delay = [20, 2, 142, -5, 10].
    assert row["count"] == 5
    assert row["short_count"] == 2  # corr 1 (5 < 10 ≤ 50) and 3 (4 < 8)
    assert row["runtime_outlier_count"] == 1  # corr 2: 60 > 50
    assert row["delay_outlier_count"] == 1  # corr 3: 142 > 100
    # Sorted cpu [8, 10, 10, 10, 60]: p50 = 10; p90 at position 3.6 = 10 + 0.6 × 50 = 40;
    # p99 at 3.96 = 10 + 0.96 × 50 = 58.
    assert (row["cpu_p50_us"], row["cpu_p90_us"], row["cpu_p99_us"]) == pytest.approx((10.0, 40.0, 58.0))
    # Sorted delay [-5, 2, 10, 20, 142]: p50 = 10, mean = 169 / 5.
    assert row["delay_p50_us"] == 10.0 and row["delay_mean_us"] == pytest.approx(33.8)
    # Sorted gpu [4, 5, 20, 60, 100]: p50 = 20, mean = 189 / 5.
    assert row["gpu_p50_us"] == 20.0 and row["gpu_mean_us"] == pytest.approx(37.8)
    assert launch.outliers(traces, options, "short")["correlation"].to_list() == [1, 3]
    assert launch.outliers(traces, options, "runtime")["correlation"].to_list() == [2]
    assert launch.outliers(traces, options, "delay")["correlation"].to_list() == [3]
    # Cutoffs move the lists: with runtime cutoff 5 nothing is "short" (every cpu > 5).
    tight = LaunchOptions(runtime_cutoff_us=5.0, launch_delay_cutoff_us=15.0)
    assert launch.outliers(traces, tight, "short").height == 0
    assert launch.outliers(traces, tight, "runtime").height == 5
    assert launch.outliers(traces, tight, "delay")["correlation"].to_list() == [1, 3]
    with pytest.raises(ValueError):
        launch.outliers(traces, options, "bogus")  # type: ignore[arg-type]


def amd_job(tmp_path: Path) -> TraceSet:
    """ROCm: hip* calls whose `stream` arg is a hex string, work on the default stream 0.

    corr 1 hipLaunchKernel [100, 110) → Cijk gemm [115, 135): delay 5
    corr 2 hipExtModuleLaunchKernel [200, 205) → kernel [210, 212): delay 5
    corr 3 hipMemcpyWithStream [300, 360) (synchronous) → copy [310, 330): delay 310 - 360 = -50
    """
    events = [
        host_call("cuda_runtime", "hipLaunchKernel", 100, 10, 1, stream="0x0", kernel="Cijk_gemm"),
        kernel("Cijk_gemm", 115, 20, stream=0, corr=1),
        host_call("cuda_runtime", "hipExtModuleLaunchKernel", 200, 5, 2, stream="0x0"),
        kernel("triton_red", 210, 2, stream=0, corr=2),
        host_call("cuda_runtime", "hipMemcpyWithStream", 300, 60, 3, stream="0x0"),
        device_op("gpu_memcpy", "Memcpy HtoD (Host -> Device)", 310, 20, 3, stream=0),
    ]
    return load(write_trace(tmp_path / "rank-0.json", events, rank=0))


def test_hip_launches_on_stream_zero(tmp_path: Path) -> None:
    traces = amd_job(tmp_path)
    frame = launch.compute(traces, LaunchOptions())
    assert frame.select("correlation", "launch_delay_us").rows() == [(1, 5.0), (2, 5.0), (3, -50.0)]
    # HTA knows no hip* launch name: 0 rows (reference §F amd_trace).
    assert launch.compute(traces, LaunchOptions(scope=Scope(hta_compat=True))).height == 0


def test_mtia_launch(tmp_path: Path) -> None:
    events = [
        host_call("mtia_runtime", MTIA_LAUNCH, 100, 10, 7),
        device_op("mtia_ccp_events", "merge", 150, 40, 7, stream=101),
    ]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    for compat in (False, True):
        frame = launch.compute(traces, LaunchOptions(scope=Scope(hta_compat=compat)))
        assert frame.select("kernel", "cpu_duration_us", "gpu_duration_us", "launch_delay_us").rows() == [
            ("merge", 10.0, 40.0, 40.0)
        ]


def test_last_step_dropped(tmp_path: Path) -> None:
    """Steps 1 [0, 100), 2 [100, 200), 3 [200, 300); one launch per step (corr = step). HTA's rule
    drops step 3's launch (its call starts at 210 ≥ 200)."""
    events: list[dict[str, Any]] = []
    for k in (1, 2, 3):
        s = 100.0 * (k - 1)
        events += [step(k, s, 100), runtime("cudaLaunchKernel", s + 10, 5, k), kernel("k", s + 20, 5, corr=k)]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    for compat in (False, True):
        assert launch.compute(traces, LaunchOptions(scope=Scope(hta_compat=compat)))["correlation"].to_list() == [1, 2]
        every = LaunchOptions(scope=Scope(steps=Steps("all"), hta_compat=compat))
        assert launch.compute(traces, every)["correlation"].to_list() == [1, 2, 3]


def test_ns_rounding_in_compat_and_clip(tmp_path: Path) -> None:
    """Fractional timestamps: call [100.4, 110.6), kernel [109.9, 113.2).

    Corrected: cpu 10.2, gpu 3.3, delay 109.9 - 110.6 = -0.7.
    Compat (HTA's ceil start / floor end): call [101, 110) → 9; kernel [110, 113) → 3;
    delay 110 - 110 = 0 (and it would be clipped at 0 anyway)."""
    events = [runtime("cudaLaunchKernel", 100.4, 10.2, 1), kernel("k", 109.9, 3.3, corr=1)]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    corrected = launch.compute(traces, LaunchOptions()).row(0, named=True)
    assert corrected["cpu_duration_us"] == pytest.approx(10.2)
    assert corrected["gpu_duration_us"] == pytest.approx(3.3)
    assert corrected["launch_delay_us"] == pytest.approx(-0.7)
    compat = launch.compute(traces, LaunchOptions(scope=Scope(hta_compat=True))).row(0, named=True)
    assert (compat["cpu_duration_us"], compat["gpu_duration_us"], compat["launch_delay_us"]) == (
        9.0,
        3.0,
        0.0,
    )


def test_compat_clips_negative_delay(tmp_path: Path) -> None:
    # call [100, 120), kernel starts at 110: delay -10 → HTA clips to 0.
    events = [runtime("cudaLaunchKernel", 100, 20, 1), kernel("k", 110, 5, corr=1)]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    assert launch.compute(traces, LaunchOptions(scope=Scope(hta_compat=True)))["launch_delay_us"].to_list() == [0.0]
    assert launch.compute(traces, LaunchOptions())["launch_delay_us"].to_list() == [-10.0]


def test_ranks_option(tmp_path: Path) -> None:
    for rank in (0, 1):
        events = [runtime("cudaLaunchKernel", 100, 10, 1), kernel("k", 120, 5 + rank, corr=1)]
        write_trace(tmp_path / f"rank-{rank}.json", events, rank=rank)
    traces = load(tmp_path)
    assert launch.compute(traces, LaunchOptions())["rank"].to_list() == [0, 1]
    assert launch.compute(traces, LaunchOptions(scope=Scope(ranks=(1,))))["gpu_duration_us"].to_list() == [6.0]
    assert launch.summary(traces, LaunchOptions())["rank"].to_list() == [0, 1]


def test_empty_cpu_only(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {}}]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    for compat in (False, True):
        options = LaunchOptions(scope=Scope(hta_compat=compat))
        frame = launch.compute(traces, options)
        assert frame.height == 0 and frame.schema == pl.Schema(launch.COLUMNS)
        summary = launch.summary(traces, options)
        assert summary.height == 0 and summary.schema == pl.Schema(launch.SUMMARY_COLUMNS)
        for kind in launch.OUTLIER_KINDS:  # no launch, so no outlier of any kind
            outliers = launch.outliers(traces, options, kind)
            assert outliers.height == 0 and outliers.schema == pl.Schema(launch.COLUMNS)


# ---- generated fixtures (fixtures/expected.py) ------------------------------------------------

try:
    from fixtures import expected, generate
except ImportError:  # pragma: no cover - fixtures/ ships with the repository
    expected = generate = None  # type: ignore[assignment]
needs_fixtures = pytest.mark.skipif(expected is None, reason="fixtures/ (generated scenarios) not available")


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("edge")
    generate.write_scenario("edge", folder)
    return folder


@needs_fixtures
@pytest.mark.parametrize("which", ["kept", "all"])
def test_small_expected(small: TraceSet, which: str) -> None:
    every = which == "all"
    truth = expected.SMALL_EXPECTED["launch"][which]
    for compat in (False, True):
        frame = launch.compute(
            small, LaunchOptions(scope=Scope(steps=Steps("all") if every else Steps(), hta_compat=compat))
        )
        for rank, rows in truth.items():
            ours = {
                r["correlation"]: (r["cpu_duration_us"], r["gpu_duration_us"], r["launch_delay_us"])
                for r in frame.filter(pl.col("rank") == rank).to_dicts()
            }
            assert set(ours) == set(rows)
            for corr, (cpu, gpu, delay) in rows.items():
                if not compat and corr % 100 == 7:
                    delay = -5.0  # the add kernel starts 5 µs before its call returns: not clipped
                assert ours[corr] == pytest.approx((cpu, gpu, delay)), (compat, rank, corr)


@needs_fixtures
def test_edge_cuda_graph(edge: Path) -> None:
    truth = expected.EDGE_EXPECTED["cuda_graph"]
    traces = load(edge / "cuda_graph")
    compat = launch.compute(traces, LaunchOptions(scope=Scope(hta_compat=True)))
    assert {
        r[0]: r[1:]
        for r in compat.select("correlation", "cpu_duration_us", "gpu_duration_us", "launch_delay_us").rows()
    } == truth["hta_launch_stats"]
    # Corrected: + the graph launch [1210, 1230) → kernels 1300 … 1475: gpu 175, delay 70.
    graph = launch.compute(traces, LaunchOptions()).filter(pl.col("correlation") == truth["graph_correlation"])
    assert graph.select("kernel", "cpu_duration_us", "gpu_duration_us", "launch_delay_us").rows() == [
        (f"cudaGraphLaunch ({truth['graph_kernels']} kernels)", 20.0, 175.0, 70.0)
    ]


@needs_fixtures
def test_edge_amd(edge: Path) -> None:
    traces = load(edge / "amd")
    assert (
        launch.compute(traces, LaunchOptions(scope=Scope(hta_compat=True))).height
        == expected.EDGE_EXPECTED["amd"]["hta_launch_stats_rows"]
    )
    frame = launch.compute(traces, LaunchOptions())
    assert frame.height > 0 and frame["kernel"].cast(pl.Utf8).str.starts_with("Cijk").any()


# ---- real traces without (CUDA) launches ------------------------------------------------------

# folder → (rows corrected, rows compat). AMD: 16 hip* launches that HTA does not recognise;
# Triton: one cuLaunchKernel (HTA: not a launch name); MTIA: 73 runFunction launches.
SHARED = {
    "cpu_only": (0, 0),
    "rank_non_gpu": (0, 0),
    "amd_trace": (16, 0),
    "mtia_inference_trace": (73, 73),
    "triton_example": (1, 0),
}


@pytest.mark.parametrize("folder", sorted(SHARED))
def test_shared_traces(load_shared: Any, folder: str) -> None:
    traces = load_shared(folder)
    for compat, rows in zip((False, True), SHARED[folder], strict=True):
        options = LaunchOptions(scope=Scope(hta_compat=compat))
        frame = launch.compute(traces, options)
        assert frame.schema == pl.Schema(launch.COLUMNS) and frame.height == rows, (folder, compat)
        summary = launch.summary(traces, options)
        assert summary.schema == pl.Schema(launch.SUMMARY_COLUMNS) and summary.height == min(rows, 1)
        if rows:
            assert not any(summary.select(pl.col(pl.Float64).is_nan().any()).row(0)), (folder, compat)


def test_ns_resolution_golden(load_shared: Any) -> None:
    """Reference §F.2 (HTA 0.6.1): 4876 rows; cpu_duration mean 39.39, gpu_duration mean 76.81,
    launch_delay mean 66048.57 µs."""
    summary = launch.summary(load_shared("ns_resolution_trace"), LaunchOptions(scope=Scope(hta_compat=True))).row(
        0, named=True
    )
    assert summary["count"] == 4876
    assert summary["cpu_mean_us"] == pytest.approx(39.39, abs=0.005)
    assert summary["gpu_mean_us"] == pytest.approx(76.81, abs=0.005)
    assert summary["delay_mean_us"] == pytest.approx(66048.57, abs=0.005)


def test_histograms_by_hand() -> None:
    """Delays 0, 10, 10, 30 in 3 bins of 10 µs → 1, 2, 1 at centres 5, 15, 25 (30 falls in the
    last bin); CPU times all 5 → one bin of 4 at 5; no GPU times → no rows for that metric."""
    frame = pl.DataFrame(
        {
            "launch_delay_us": [0.0, 10.0, 10.0, 30.0],
            "cpu_duration_us": [5.0, 5.0, 5.0, 5.0],
            "gpu_duration_us": [None, None, None, None],
        },
        schema={"launch_delay_us": pl.Float64, "cpu_duration_us": pl.Float64, "gpu_duration_us": pl.Float64},
    )
    out = launch.histograms_of(frame, bins=3)
    assert out.schema == pl.Schema(launch.HISTOGRAM_COLUMNS)
    delay = out.filter(pl.col("metric") == "launch_delay_us")
    assert delay["bin_center_us"].to_list() == [5.0, 15.0, 25.0] and delay["count"].to_list() == [1, 2, 1]
    cpu = out.filter(pl.col("metric") == "cpu_duration_us")
    assert cpu.rows() == [("cpu_duration_us", 0, 5.0, 4)]
    assert out.filter(pl.col("metric") == "gpu_duration_us").height == 0
