"""kernel-types, kernels (top-k folding) and kernel-spread on hand-built traces."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, device, kernel, runtime, traces_of

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import kernels
from htatui.analysis.views.kernels import KernelsOptions, KernelSpreadOptions, KernelTypesOptions
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

Event = dict[str, Any]


NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float"


def job_a() -> list[Event]:
    """stream 7: gemm [100,150), relu [160,180), memcpy [250,260), gemm [400,450);
    stream 20: NCCL [140,200)."""
    return [
        kernel("gemm_kernel", 100, 50, stream=7, corr=1),
        kernel("relu_kernel", 160, 20, stream=7, corr=2),
        kernel(NCCL, 140, 60, stream=20, corr=3),
        device("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 250, 10, stream=7, corr=4),
        kernel("gemm_kernel", 400, 50, stream=7, corr=5),
    ]


def types_map(frame: pl.DataFrame, rank: str) -> dict[str, tuple[float, float]]:
    return {r["kernel_type"]: (r["duration_us"], r["pct"]) for r in frame.filter(pl.col("rank") == rank).to_dicts()}


@pytest.mark.parametrize("compat", [False, True])
def test_kernel_type_states(tmp_path: Path, compat: bool) -> None:
    traces = traces_of(tmp_path, job_a())
    out = kernels.compute_types(traces, KernelTypesOptions(scope=Scope(hta_compat=compat)))
    assert out.schema == pl.Schema(kernels.TYPES_SCHEMA)
    # Sweep: 100–140 COMP (40), 140–150 COMP+COMM (10), 150–160 COMM (10), 160–180 COMP+COMM (20),
    # 180–200 COMM (20), 250–260 MEMORY (10), 400–450 COMP (50). Total 160.
    # COMP 90 (56.25 %), COMM 30 (18.75 %), COMP+COMM 30 (18.75 %), MEMORY 10 (6.25 %)
    expected = {
        "COMPUTATION": (90, 56.25),
        "COMMUNICATION": (30, 18.75),
        "COMPUTATION overlapping COMMUNICATION": (30, 18.75),
        "MEMORY": (10, 6.25),
    }
    if compat:  # HTA rounds the percentage to 1 decimal (half to even: 56.25 → 56.2)
        expected = {k: (d, round(p, 1)) for k, (d, p) in expected.items()}
    assert types_map(out, "all") == expected
    assert types_map(out, "0") == expected
    assert out["rank"].to_list()[:4] == ["all"] * 4


def test_kernel_types_sum_over_ranks(tmp_path: Path) -> None:
    # rank 0: gemm 50; rank 1: gemm 30 overlapping NCCL [10,50) from 20 → COMP 10, both 20, COMM 20.
    rank0 = [kernel("gemm_kernel", 0, 50, corr=1)]
    rank1 = [kernel("gemm_kernel", 0, 30, corr=1), kernel(NCCL, 10, 40, stream=20, corr=2)]
    out = kernels.compute_types(traces_of(tmp_path, rank0, rank1), KernelTypesOptions())
    # all: COMP 50 + 10 = 60, COMP+COMM 20, COMM 20 (total 100)
    assert types_map(out, "all") == {
        "COMPUTATION": (60, 60.0),
        "COMPUTATION overlapping COMMUNICATION": (20, 20.0),
        "COMMUNICATION": (20, 20.0),
    }
    assert types_map(out, "0") == {"COMPUTATION": (50, 100.0)}
    assert out["rank"].to_list() == ["all"] * 3 + ["0"] + ["1"] * 3


def folding_job() -> list[Event]:
    """Compute kernels: a ×3 (10, 20, 30 → 60), b ×2 (15, 25 → 40), c ×1 (30), d ×2 (2, 3 → 5),
    e ×1 (3), back to back on stream 7."""
    durations = {"a": [10, 20, 30], "b": [15, 25], "c": [30], "d": [2, 3], "e": [3]}
    events: list[Event] = []
    t = 0.0
    for name, durs in durations.items():
        for dur in durs:
            events.append(kernel(name, t, dur, corr=len(events) + 1))
            t += dur + 1
    return events


def by_name(frame: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in frame.to_dicts()}


def test_folding_keeps_true_stats_in_corrected_mode(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, folding_job())
    out = kernels.compute(traces, KernelsOptions(top_k=3))
    assert out.schema == pl.Schema(kernels.KERNELS_SCHEMA)
    # sums sorted: a 60, b 40, c 30, d 5, e 3; cumsum 60, 100, 130, 135, 138;
    # 0.8 quantile of the cumsums: position 3.2 → 135 + 0.2·3 = 135.6 → e folds by the ratio rule;
    # top_k = 3 folds positions ≥ 3 (d, e). Named a, b, c keep their launch stats.
    rows = by_name(out)
    assert list(rows) == ["a", "b", "c", "others"]
    a, b, c, others = rows["a"], rows["b"], rows["c"], rows["others"]
    assert (a["count"], a["sum_us"], a["mean_us"], a["min_us"], a["max_us"], a["std_us"]) == (
        3,
        60,
        20,
        10,
        30,
        10,
    )
    assert (b["count"], b["mean_us"], b["min_us"], b["max_us"]) == (2, 20, 15, 25)
    assert b["std_us"] == pytest.approx(math.sqrt(50))  # (−5)² + 5² over n − 1 = 1
    assert (c["count"], c["std_us"]) == (1, 0)  # a single launch has std 0
    # others = launches 2, 3, 3: sum 8, mean 8/3, min 2, max 3, std √((4/9 + 1/9 + 1/9)/2) = √(1/3)
    assert (others["count"], others["sum_us"], others["min_us"], others["max_us"]) == (3, 8, 2, 3)
    assert others["mean_us"] == pytest.approx(8 / 3)
    assert others["std_us"] == pytest.approx(math.sqrt(1 / 3))


def test_folding_reproduces_hta_quirk_in_compat(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, folding_job())
    rows = by_name(kernels.compute(traces, KernelsOptions(scope=Scope(hta_compat=True), top_k=3)))
    # HTA re-aggregates the per-name sums: named rows get max = min = mean = sum, std 0 …
    a = rows["a"]
    assert (a["sum_us"], a["mean_us"], a["min_us"], a["max_us"], a["std_us"]) == (60, 60, 60, 60, 0)
    # … and "others" describes the per-name sums {5, 3}: mean 4, min 3, max 5, std √2
    others = rows["others"]
    assert (others["sum_us"], others["mean_us"], others["min_us"], others["max_us"]) == (8, 4, 3, 5)
    assert others["std_us"] == pytest.approx(math.sqrt(2))


def test_ratio_rule_folds_beyond_top_k(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, folding_job())
    # top_k = 4 alone would fold only e; with duration_ratio 0.5 the threshold is the median
    # cumsum, 130, so d (135) and e (138) fold, c (130, not > 130) stays.
    out = kernels.compute(traces, KernelsOptions(top_k=4, duration_ratio=0.5))
    assert list(by_name(out)) == ["a", "b", "c", "others"]
    assert by_name(out)["others"]["sum_us"] == 8


def test_no_folding(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, folding_job())
    # top_k=None: nothing folds; top_k=5 with 5 names: HTA folds only when names > num_kernels.
    for options in (KernelsOptions(top_k=None), KernelsOptions(scope=Scope(hta_compat=True), top_k=5)):
        rows = by_name(kernels.compute(traces, options))
        assert list(rows) == ["a", "b", "c", "d", "e"]
        assert (rows["a"]["mean_us"], rows["a"]["std_us"]) == (20, 10)  # true per-launch stats


def test_types_and_ranks_are_separate(tmp_path: Path) -> None:
    rank0 = job_a()
    rank1 = [kernel("gemm_kernel", 0, 7, corr=1)]
    out = kernels.compute(traces_of(tmp_path, rank0, rank1), KernelsOptions())
    got = {(r["rank"], r["kernel_type"], r["name"]): (r["count"], r["sum_us"]) for r in out.to_dicts()}
    assert got == {
        (0, "COMMUNICATION", NCCL): (1, 60),
        (0, "COMPUTATION", "gemm_kernel"): (2, 100),
        (0, "COMPUTATION", "relu_kernel"): (1, 20),
        (0, "MEMORY", "Memcpy HtoD (Pinned -> Device)"): (1, 10),
        (1, "COMPUTATION", "gemm_kernel"): (1, 7),
    }


def test_spread(tmp_path: Path) -> None:
    # rank 0: big ×3 (10, 20, 30), small ×1 (5); rank 1: big ×1 (40), small ×2 (1, 3)
    rank0 = [kernel("big", 0, 10, corr=1), kernel("big", 20, 20, corr=2), kernel("big", 50, 30, corr=3)]
    rank0.append(kernel("small", 90, 5, corr=4))
    rank1 = [kernel("big", 0, 40, corr=1), kernel("small", 50, 1, corr=2), kernel("small", 60, 3, corr=3)]
    traces = traces_of(tmp_path, rank0, rank1)
    out = kernels.spread(traces, KernelSpreadOptions(top_k=1))
    assert out.schema == pl.Schema(kernels.SPREAD_SCHEMA)
    # top 1 compute kernel by total over ranks: big (100) over small (9)
    got = [(r["name"], r["rank"], r["mean_us"], r["min_us"], r["max_us"]) for r in out.to_dicts()]
    assert got == [("big", 0, 20, 10, 30), ("big", 1, 40, 40, 40)]
    everything = kernels.spread(traces, KernelSpreadOptions(top_k=None))
    assert everything.filter(pl.col("name") == "small")["mean_us"].to_list() == [5, 2]


def test_other_rows_are_left_out(tmp_path: Path) -> None:
    # A cuda_sync row is OTHER: in no table (compat types "Event Sync" OTHER by name too).
    events = [kernel("gemm_kernel", 0, 10, corr=1), device("cuda_sync", "Event Sync", 10, 5, corr=2)]
    traces = traces_of(tmp_path, events)
    for compat in (False, True):
        assert kernels.compute(traces, KernelsOptions(scope=Scope(hta_compat=compat)))["name"].to_list() == [
            "gemm_kernel"
        ]
        types = kernels.compute_types(traces, KernelTypesOptions(scope=Scope(hta_compat=compat)))
        assert set(types["kernel_type"]) == {"COMPUTATION"}


def test_corrected_typing_by_category(tmp_path: Path) -> None:
    # An RCCL kernel (not "nccl…"): COMMUNICATION only in corrected mode; HTA types it COMPUTATION.
    events = [kernel("rcclGenericKernel", 0, 10, corr=1), kernel("gemm_kernel", 20, 10, corr=2)]
    traces = traces_of(tmp_path, events)
    corrected = kernels.compute(traces, KernelsOptions())
    compat = kernels.compute(traces, KernelsOptions(scope=Scope(hta_compat=True)))
    assert corrected.filter(pl.col("name") == "rcclGenericKernel")["kernel_type"].to_list() == ["COMMUNICATION"]
    assert compat.filter(pl.col("name") == "rcclGenericKernel")["kernel_type"].to_list() == ["COMPUTATION"]


def test_empty(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, [cpu_op("aten::add", 0, 10), runtime("cudaLaunchKernel", 0, 1, 1)])
    for compat in (False, True):
        assert kernels.compute_types(traces, KernelTypesOptions(scope=Scope(hta_compat=compat))).shape == (0, 4)
        assert kernels.compute(traces, KernelsOptions(scope=Scope(hta_compat=compat))).shape == (0, 9)
        assert kernels.spread(traces, KernelSpreadOptions(scope=Scope(hta_compat=compat))).shape == (0, 6)


# ---- generated fixtures (fixtures/expected.py) ---------------------------------------------


@pytest.mark.parametrize("compat", [False, True])
@pytest.mark.parametrize("steps", ["kept", "all"])
def test_small_expected(generated: Path, steps: str, compat: bool) -> None:
    from fixtures.expected import SMALL_EXPECTED

    traces = load_traces([generated / "small"], use_cache=False, max_workers=1)
    include_last_step = steps == "all"
    types = kernels.compute_types(
        traces, KernelTypesOptions(scope=Scope(steps=Steps("all") if include_last_step else Steps(), hta_compat=compat))
    )
    expected_types = SMALL_EXPECTED["kernel_types"][steps]
    for rank in (0, 1):
        assert {k: d for k, (d, _) in types_map(types, str(rank)).items()} == expected_types[rank]
    overall = types_map(types, "all")
    assert {k: d for k, (d, _) in overall.items()} == expected_types["total"]
    for state, pct in expected_types["percentage"].items():  # HTA's 1-decimal rounding
        assert overall[state][1] == (pct if compat else pytest.approx(pct, abs=0.05))

    out = kernels.compute(
        traces, KernelsOptions(scope=Scope(steps=Steps("all") if include_last_step else Steps(), hta_compat=compat))
    )
    expected = SMALL_EXPECTED["kernels"][steps]
    type_of = SMALL_EXPECTED["kernel_type_of"]
    got = {
        (r["rank"], r["name"]): (
            r["kernel_type"],
            r["count"],
            r["sum_us"],
            r["mean_us"],
            r["min_us"],
            r["max_us"],
        )
        for r in out.to_dicts()
    }
    assert got == {
        (rank, name): (type_of[name], s["count"], s["sum"], s["mean"], s["min"], s["max"])
        for rank, names in expected.items()
        for name, s in names.items()
    }
    for r in out.to_dicts():
        assert r["std_us"] == pytest.approx(expected[r["rank"]][r["name"]]["std"])

    spread = kernels.spread(
        traces,
        KernelSpreadOptions(scope=Scope(steps=Steps("all") if include_last_step else Steps(), hta_compat=compat)),
    )
    for r in spread.to_dicts():  # 6 names, all under top_k: per-rank mean/min/max of each
        s = expected[r["rank"]][r["name"]]
        assert (r["kernel_type"], r["mean_us"], r["min_us"], r["max_us"]) == (
            type_of[r["name"]],
            s["mean"],
            s["min"],
            s["max"],
        )
    assert spread.height == sum(len(names) for names in expected.values())


@pytest.mark.parametrize("compat", [False, True])
def test_edge_expected(generated: Path, compat: bool) -> None:
    from fixtures.expected import EDGE_EXPECTED

    def load(case: str) -> TraceSet:
        return load_traces([generated / "edge" / case], use_cache=False, max_workers=1)

    no_comm = kernels.compute_types(load("no_comm"), KernelTypesOptions(scope=Scope(hta_compat=compat)))
    assert {k: d for k, (d, _) in types_map(no_comm, "all").items()} == EDGE_EXPECTED["no_comm"]["kernel_types_kept"]
    assert kernels.compute(load("cpu_only"), KernelsOptions(scope=Scope(hta_compat=compat))).height == 0
    amd = kernels.compute(load("amd"), KernelsOptions(scope=Scope(hta_compat=compat)))
    assert EDGE_EXPECTED["amd"]["gemm"] in amd.filter(pl.col("kernel_type") == "COMPUTATION")["name"].to_list()
    sub_us = kernels.compute(load("sub_us"), KernelsOptions(scope=Scope(hta_compat=compat)))
    got = {r["name"]: (r["count"], r["sum_us"]) for r in sub_us.to_dicts()}
    if compat:  # HTA's rounded durations: relu −1, add −1 + 0, gemm 2 (HTA 0.6.1 prints the same)
        expected: dict[str, tuple[int, float]] = {"relu": (1, -1), "add": (2, -1), "gemm": (1, 2)}
    else:
        expected = {k: (n, ns / 1000) for k, (n, ns) in {"relu": (1, 640), "add": (2, 1330), "gemm": (1, 2250)}.items()}
    from fixtures.scenarios import ADD, GEMM, RELU

    names = {"relu": RELU, "add": ADD, "gemm": GEMM}
    assert got == {names[k]: pytest.approx(v) for k, v in expected.items()}


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
    types = kernels.compute_types(traces, KernelTypesOptions(scope=Scope(hta_compat=compat)))
    table = kernels.compute(traces, KernelsOptions(scope=Scope(hta_compat=compat)))
    spread = kernels.spread(traces, KernelSpreadOptions(scope=Scope(hta_compat=compat)))
    assert types.schema == pl.Schema(kernels.TYPES_SCHEMA)
    assert table.schema == pl.Schema(kernels.KERNELS_SCHEMA)
    assert spread.schema == pl.Schema(kernels.SPREAD_SCHEMA)
    if folder in ("cpu_only", "rank_non_gpu"):
        assert types.height == table.height == spread.height == 0
    for frame in (types, table, spread):
        assert not any(frame.select(pl.col(pl.Float64).is_nan().any()).row(0))


# hta-reference.md §F.2: HTA's kernel-type table (µs, % to 1 decimal) on the shared traces.
GOLDEN = {
    "negative_queue_length_values_check": {
        "COMPUTATION": (138794, 44.7),
        "COMMUNICATION": (134025, 43.1),
        "MEMORY": (32246, 10.4),
        "COMPUTATION overlapping MEMORY": (3171, 1.0),
        "COMPUTATION overlapping COMMUNICATION": (1871, 0.6),
        "COMMUNICATION overlapping MEMORY": (594, 0.2),
    },
    "nccl_parser_config": {
        "COMPUTATION": (71696, 74.1),
        "COMMUNICATION": (20621, 21.3),
        "COMPUTATION overlapping COMMUNICATION": (3473, 3.6),
        "MEMORY": (831, 0.9),
        "COMMUNICATION overlapping MEMORY": (184, 0.2),
    },
    "ns_resolution_trace": {"COMPUTATION": (372150, 99.4), "MEMORY": (2371, 0.6)},
    "amd_trace": {"COMPUTATION": (96, 73.3), "MEMORY": (35, 26.7)},
}


@pytest.mark.parametrize("folder", sorted(GOLDEN))
def test_golden_numbers(load_shared: Any, folder: str) -> None:
    traces = load_shared(folder)
    assert (
        types_map(kernels.compute_types(traces, KernelTypesOptions(scope=Scope(hta_compat=True))), "all")
        == GOLDEN[folder]
    )
    if folder == "ns_resolution_trace":  # 13 kernel rows; memcpy keeps launch stats, compute "others" folds
        table = kernels.compute(traces, KernelsOptions(scope=Scope(hta_compat=True)))
        assert table.height == 13
        dtod = by_name(table)["Memcpy DtoD (Device -> Device)"]
        assert (dtod["sum_us"], dtod["max_us"], dtod["min_us"], round(dtod["mean_us"], 4)) == (
            1985,
            27,
            0,
            1.5508,
        )
        others = table.filter((pl.col("name") == "others") & (pl.col("kernel_type") == "COMPUTATION")).to_dicts()[0]
        assert (others["sum_us"], others["max_us"], others["min_us"], round(others["mean_us"], 2)) == (
            191567,
            12758,
            5,
            2859.21,
        )
