"""Idle time breakdown and idle interval statistics on hand-built traces."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, device, kernel, runtime, traces_of

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import idle
from htatui.analysis.views.idle import STATS_SCHEMA, IdleOptions
from htatui.jobs.load import load_traces

Event = dict[str, Any]


def job_a() -> list[Event]:
    """stream 7: gemm [100,150) (launched 90), relu [160,180) (launched 95),
    memcpy [250,260) (launched 230), gemm [400,450) (launched 255); stream 20: one NCCL kernel."""
    return [
        runtime("cudaLaunchKernel", 90, 5, 1),
        runtime("cudaLaunchKernel", 95, 5, 2),
        runtime("cudaLaunchKernel", 85, 5, 3),
        runtime("cudaMemcpyAsync", 230, 5, 4),
        runtime("cudaLaunchKernel", 255, 5, 5),
        kernel("gemm_kernel", 100, 50, stream=7, corr=1),
        kernel("relu_kernel", 160, 20, stream=7, corr=2),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 140, 60, stream=20, corr=3),
        device("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 250, 10, stream=7, corr=4),
        kernel("gemm_kernel", 400, 50, stream=7, corr=5),
    ]


def as_map(frame: pl.DataFrame, value: str) -> dict[tuple[int, int, str], Any]:
    return {(r["rank"], r["stream"], r["category"]): r[value] for r in frame.to_dicts()}


def test_each_category_corrected(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, job_a())
    out = idle.compute(traces, IdleOptions())
    # stream 7 gaps: relu: 160 − 150 = 10, launch 95 ≤ 150 and 10 < 30 → kernel_wait
    #   memcpy: 250 − 180 = 70, launch 230 > 180 → host_wait
    #   gemm:   400 − 260 = 140, launch 255 ≤ 260 and 140 ≥ 30 → other
    # total 220 → ratios 70/220, 10/220, 140/220. Stream 20 has one row, so no gap and no row.
    assert as_map(out, "idle_us") == {
        (0, 7, "host_wait"): 70,
        (0, 7, "kernel_wait"): 10,
        (0, 7, "other"): 140,
    }
    shares = as_map(out, "idle_pct")
    assert shares[(0, 7, "host_wait")] == pytest.approx(100 * 70 / 220)
    assert shares[(0, 7, "kernel_wait")] == pytest.approx(100 * 10 / 220)
    assert shares[(0, 7, "other")] == pytest.approx(100 * 140 / 220)


def test_each_category_compat(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, job_a())
    out = idle.compute(traces, IdleOptions(scope=Scope(hta_compat=True)))
    # Same gaps; HTA also counts each stream's first row as "other" with no interval, so
    # stream 20 gets an "other" row of 0 whose ratio is 0/0 (HTA: NaN, here null).
    assert as_map(out, "idle_us") == {
        (0, 7, "host_wait"): 70,
        (0, 7, "kernel_wait"): 10,
        (0, 7, "other"): 140,
        (0, 20, "other"): 0,
    }
    # ratios rounded to 2 like HTA: 0.318 → 0.32, 0.045 → 0.05, 0.636 → 0.64, then as %
    shares = as_map(out, "idle_pct")
    assert [shares[(0, 7, c)] for c in ("host_wait", "kernel_wait", "other")] == [32.0, 5.0, 64.0]
    assert shares[(0, 20, "other")] is None


def test_threshold_option(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, job_a())
    # With a 5 µs threshold the 10 µs relu gap is no longer kernel wait but other: 10 + 140.
    out = idle.compute(traces, IdleOptions(consecutive_kernel_delay_us=5))
    assert as_map(out, "idle_us") == {(0, 7, "host_wait"): 70, (0, 7, "other"): 150}


def test_streams_filter(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, job_a())
    assert idle.compute(traces, IdleOptions(scope=Scope(hta_compat=True), streams=(20,)))["stream"].to_list() == [20]
    assert idle.compute(traces, IdleOptions(streams=(99,))).height == 0


def negative_gap_job() -> list[Event]:
    """stream 7: a [100,150), b [148,170) (overlaps a by 2), c [175,200);
    stream 9: long [100,200), short [120,130), next [150,160) (all launched at 0)."""
    return [
        runtime("cudaLaunchKernel", 0, 1, 1),
        runtime("cudaLaunchKernel", 0, 1, 2),
        runtime("cudaLaunchKernel", 0, 1, 3),
        runtime("cudaLaunchKernel", 0, 1, 4),
        runtime("cudaLaunchKernel", 0, 1, 5),
        runtime("cudaLaunchKernel", 0, 1, 6),
        kernel("a", 100, 50, stream=7, corr=1),
        kernel("b", 148, 22, stream=7, corr=2),
        kernel("c", 175, 25, stream=7, corr=3),
        kernel("long", 100, 100, stream=9, corr=4),
        kernel("short", 120, 10, stream=9, corr=5),
        kernel("next", 150, 10, stream=9, corr=6),
    ]


def test_negative_gaps_clamped_vs_compat(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, negative_gap_job())
    compat = as_map(idle.compute(traces, IdleOptions(scope=Scope(hta_compat=True))), "idle_us")
    corrected = as_map(idle.compute(traces, IdleOptions()), "idle_us")
    # compat, stream 7: b − a = 148 − 150 = −2, c − b = 175 − 170 = 5 → kernel_wait 3
    # compat, stream 9: short − long = 120 − 200 = −80, next − short = 150 − 130 = 20 → −60
    assert compat[(0, 7, "kernel_wait")] == 3
    assert compat[(0, 9, "kernel_wait")] == -60
    # corrected: −2 clamps to 0 → 0 + 5 = 5; stream 9 measures from the running end (200):
    # short: −80 → 0, next: 150 − 200 = −50 → 0 → 0
    assert corrected[(0, 7, "kernel_wait")] == 5
    assert corrected[(0, 9, "kernel_wait")] == 0
    assert corrected[(0, 9, "kernel_wait")] >= 0
    stats = idle.interval_stats(traces, IdleOptions(scope=Scope(hta_compat=True)))
    s7 = stats.filter((pl.col("stream") == 7) & (pl.col("category") == "kernel_wait")).to_dicts()[0]
    assert (s7["count"], s7["min_us"], s7["max_us"]) == (2, -2, 5)


def test_interval_stats(tmp_path: Path) -> None:
    # stream 7: k0 [0,10), then gaps 10, 20, 40 before k1, k2, k3 (all launched at 0, so not
    # host wait): 10 and 20 are kernel wait, 40 is other.
    events = [runtime("cudaLaunchKernel", 0, 1, i) for i in range(4)]
    events += [
        kernel("k0", 0, 10, corr=0),
        kernel("k1", 20, 10, corr=1),  # gap 20 − 10 = 10
        kernel("k2", 50, 10, corr=2),  # gap 50 − 30 = 20
        kernel("k3", 100, 10, corr=3),  # gap 100 − 60 = 40
    ]
    traces = traces_of(tmp_path, events)
    stats = idle.interval_stats(traces, IdleOptions())
    assert stats.schema == pl.Schema(STATS_SCHEMA)
    kw = stats.filter(pl.col("category") == "kernel_wait").to_dicts()[0]
    # kernel_wait {10, 20}: mean 15, sample std √((25+25)/1) = 7.0711, quartiles 12.5/15/17.5
    assert kw["count"] == 2 and kw["mean_us"] == 15 and kw["std_us"] == pytest.approx(math.sqrt(50))
    assert (kw["min_us"], kw["p25_us"], kw["p50_us"], kw["p75_us"], kw["max_us"]) == (10, 12.5, 15, 17.5, 20)
    other = stats.filter(pl.col("category") == "other").to_dicts()[0]
    assert other["count"] == 1 and other["mean_us"] == 40 and other["std_us"] is None
    compat = idle.interval_stats(traces, IdleOptions(scope=Scope(hta_compat=True)))
    # compat: the first row joins "other" without an interval (count stays 1), std rounded 7.07
    other = compat.filter(pl.col("category") == "other").to_dicts()[0]
    assert other["count"] == 1 and other["mean_us"] == 40
    assert compat.filter(pl.col("category") == "kernel_wait")["std_us"].to_list() == [7.07]


def test_host_wait_uses_the_launch_of_the_same_correlation(tmp_path: Path) -> None:
    # k1 [0,10); k2 [50,60) launched at 30 (> 10) → host wait 40. A kernel without any launch
    # row (k3 [100,110), corr 99) can't be host wait: gap 40 → other.
    events = [
        runtime("cudaLaunchKernel", 0, 1, 1),
        runtime("cudaLaunchKernel", 30, 1, 2),
        kernel("k1", 0, 10, corr=1),
        kernel("k2", 50, 10, corr=2),
        kernel("k3", 100, 10, corr=99),
    ]
    traces = traces_of(tmp_path, events)
    for compat in (False, True):
        got = as_map(idle.compute(traces, IdleOptions(scope=Scope(hta_compat=compat))), "idle_us")
        assert got[(0, 7, "host_wait")] == 40 and got[(0, 7, "other")] == 40


def test_amd_stream_zero(tmp_path: Path) -> None:
    # ROCm default stream 0: k1 [10,30), k2 [50,60) launched by hipLaunchKernel at 40 → host wait 20
    events = [
        runtime("hipLaunchKernel", 5, 2, 1),
        runtime("hipLaunchKernel", 40, 2, 2),
        kernel("Cijk_Ailk_Bljk_SB", 10, 20, stream=0, corr=1),
        kernel("Cijk_Ailk_Bljk_SB", 50, 10, stream=0, corr=2),
    ]
    traces = traces_of(tmp_path, events)
    for compat in (False, True):
        got = as_map(idle.compute(traces, IdleOptions(scope=Scope(hta_compat=compat))), "idle_us")
        assert got[(0, 0, "host_wait")] == 20


def test_cuda_sync_rows_are_not_idle_rows(tmp_path: Path) -> None:
    # A cuda_sync row on stream 7 between two kernels is ignored in both modes (HTA's S3).
    events = [
        runtime("cudaLaunchKernel", 0, 1, 1),
        runtime("cudaLaunchKernel", 0, 1, 2),
        kernel("k1", 0, 10, corr=1),
        device("cuda_sync", "Stream Sync", 10, 30, corr=3),
        kernel("k2", 50, 10, corr=2),
    ]
    traces = traces_of(tmp_path, events)
    for compat in (False, True):
        got = as_map(idle.compute(traces, IdleOptions(scope=Scope(hta_compat=compat))), "idle_us")
        assert got[(0, 7, "other")] == 40  # 50 − 10


def test_empty(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, [cpu_op("aten::add", 0, 10)])
    for compat in (False, True):
        options = IdleOptions(scope=Scope(hta_compat=compat))
        out, stats = idle.compute(traces, options), idle.interval_stats(traces, options)
        assert out.height == 0 and out.schema == pl.Schema(idle.SCHEMA)
        assert stats.height == 0 and stats.schema == pl.Schema(STATS_SCHEMA)


# ---- generated fixtures (fixtures/expected.py) ---------------------------------------------


def _nested(frame: pl.DataFrame, value: str) -> dict[int, dict[int, dict[str, Any]]]:
    out: dict[int, dict[int, dict[str, Any]]] = {}
    for r in frame.to_dicts():
        out.setdefault(r["rank"], {}).setdefault(r["stream"], {})[r["category"]] = r[value]
    return out


def _without_empty_other(expected: dict[Any, dict[str, float]]) -> dict[Any, dict[str, float]]:
    """Corrected mode has no row for a stream's first kernel, so no 0 "other" from it alone."""
    return {s: {c: v for c, v in cats.items() if not (c == "other" and v == 0)} for s, cats in expected.items()}


@pytest.mark.parametrize("compat", [False, True])
@pytest.mark.parametrize("steps", ["kept", "all"])
def test_small_expected(generated: Path, steps: str, compat: bool) -> None:
    from fixtures.expected import SMALL_EXPECTED

    traces = load_traces([generated / "small"], use_cache=False, max_workers=1)
    options = IdleOptions(scope=Scope(steps=Steps("all") if steps == "all" else Steps(), hta_compat=compat))
    out, stats = idle.compute(traces, options), idle.interval_stats(traces, options)
    expected = SMALL_EXPECTED["idle"][steps]
    if not compat:
        expected = {rank: _without_empty_other(streams) for rank, streams in expected.items()}
    assert _nested(out, "idle_us") == expected
    shares = _nested(out, "idle_pct")
    for rank, streams in SMALL_EXPECTED["idle_ratio"][steps].items():
        for stream, cats in streams.items():
            for category, ratio in cats.items():
                if compat:
                    assert shares[rank][stream][category] == ratio * 100.0
                elif category in shares[rank][stream]:  # unrounded: within HTA's rounding
                    assert shares[rank][stream][category] == pytest.approx(100 * ratio, abs=0.51)
    counts = _nested(stats.filter(pl.col("count") > 0), "count")
    assert counts == SMALL_EXPECTED["idle_count"][steps]


@pytest.mark.parametrize("compat", [False, True])
def test_edge_expected(generated: Path, compat: bool) -> None:
    from fixtures.expected import EDGE_EXPECTED

    def streams(case: str) -> dict[int, dict[str, Any]]:
        out = idle.compute(
            load_traces([generated / "edge" / case], use_cache=False, max_workers=1),
            IdleOptions(scope=Scope(hta_compat=compat)),
        )
        return _nested(out, "idle_us").get(0, {})

    def expect(value: dict[Any, dict[str, float]]) -> dict[Any, dict[str, float]]:
        return value if compat else _without_empty_other(value)

    assert streams("cpu_only") == {}
    assert streams("no_steps") == expect(EDGE_EXPECTED["no_steps"]["idle"])
    assert streams("no_comm") == expect(EDGE_EXPECTED["no_comm"]["idle_kept"])
    assert streams("amd") == expect(EDGE_EXPECTED["amd"]["idle_kept"])
    assert streams("cuda_graph") == expect(EDGE_EXPECTED["cuda_graph"]["idle"])
    sub_us = streams("sub_us")
    if compat:
        # HTA's rounded rows [1013,1012) [1014,1013) [1014,1016) [1017,1017) (see test_temporal):
        # gaps 1014 − 1012 = 2, 1014 − 1013 = 1, 1017 − 1016 = 1 → kernel wait 4 (HTA 0.6.1: 4)
        assert sub_us == {7: {"kernel_wait": 4, "other": 0}}
    else:  # exact ns: 710 ns of kernel wait
        assert sub_us == {7: {"kernel_wait": pytest.approx(EDGE_EXPECTED["sub_us"]["idle_kernel_wait_ns"] / 1000)}}


# ---- real traces without the usual GPU work (../shared/traces) -------------------------------

EDGE_FOLDERS = [
    "cpu_only",
    "rank_non_gpu",
    "amd_trace",
    "mtia_inference_trace",
    "triton_example",
    "with_gpu_user_annotation",
]


@pytest.mark.parametrize("folder", EDGE_FOLDERS)
@pytest.mark.parametrize("compat", [False, True])
def test_shared_edge_folders(load_shared: Any, folder: str, compat: bool) -> None:
    traces = load_shared(folder)
    out = idle.compute(traces, IdleOptions(scope=Scope(hta_compat=compat)))
    stats = idle.interval_stats(traces, IdleOptions(scope=Scope(hta_compat=compat)))
    assert out.schema == pl.Schema(idle.SCHEMA) and stats.schema == pl.Schema(STATS_SCHEMA)
    if folder in ("cpu_only", "rank_non_gpu"):
        assert out.height == 0 and stats.height == 0
    assert not any(out.select(pl.col(pl.Float64).is_nan().any()).row(0))
    assert not any(stats.select(pl.col(pl.Float64).is_nan().any()).row(0))


# hta-reference.md §F.2: HTA's idle µs per (stream, category) on the shared traces.
GOLDEN = {
    "negative_queue_length_values_check": {
        (7, "kernel_wait"): 17159,
        (7, "other"): 691231,
        (25, "host_wait"): 628598,
        (25, "kernel_wait"): 85,
        (27, "host_wait"): 792592,
        (27, "kernel_wait"): 1000,
        (27, "other"): 7135,
        (84, "host_wait"): 62901,
        (84, "kernel_wait"): 12,
        (84, "other"): 665192,
        (285, "other"): 675305,
        (363, "kernel_wait"): 75,
        (363, "other"): 673182,
    },
    "nccl_parser_config": {(7, "host_wait"): 357247, (7, "kernel_wait"): 2155, (40, "host_wait"): 381499},
    "ns_resolution_trace": {(7, "host_wait"): 1709, (7, "kernel_wait"): 8404},
    "amd_trace": {(0, "host_wait"): 8780},
}


@pytest.mark.parametrize("folder", sorted(GOLDEN))
def test_golden_numbers(load_shared: Any, folder: str) -> None:
    traces = load_shared(folder)
    out = idle.compute(traces, IdleOptions(scope=Scope(hta_compat=True))).filter(pl.col("idle_us") != 0)
    assert {(r["stream"], r["category"]): r["idle_us"] for r in out.to_dicts()} == GOLDEN[folder]
    if folder == "negative_queue_length_values_check":  # the −2 µs gap, clamped in corrected mode
        stats = idle.interval_stats(traces, IdleOptions(scope=Scope(hta_compat=True)))
        assert stats.filter((pl.col("stream") == 27) & (pl.col("category") == "kernel_wait"))["min_us"][0] == -2
        corrected = idle.compute(traces, IdleOptions())
        assert corrected.filter((pl.col("stream") == 27) & (pl.col("category") == "kernel_wait"))["idle_us"][0] == 1002
    if folder == "ns_resolution_trace":  # interval counts and means
        stats = idle.interval_stats(traces, IdleOptions(scope=Scope(hta_compat=True))).filter(pl.col("stream") == 7)
        got = {r["category"]: (r["count"], r["mean_us"]) for r in stats.to_dicts() if r["count"]}
        assert got == {"host_wait": (90, 18.99), "kernel_wait": (4785, 1.76)}


def test_by_stream_is_one_row_per_stream(tmp_path: Path) -> None:
    """job_a's stream 7 (host 70, kernel 10, other 140 µs of 220) as the Idle screen's wide row."""
    traces = traces_of(tmp_path, job_a())
    wide = idle.by_stream(traces, IdleOptions())
    assert wide.height == 1
    row = wide.row(0, named=True)
    assert (row["rank"], row["stream"], row["total_us"]) == (0, 7, 220)
    assert (row["host_wait_us"], row["kernel_wait_us"], row["other_us"]) == (70, 10, 140)
    assert row["host_wait_pct"] == pytest.approx(100 * 70 / 220)
    assert row["kernel_wait_pct"] == pytest.approx(100 * 10 / 220)
    assert row["other_pct"] == pytest.approx(100 * 140 / 220)
