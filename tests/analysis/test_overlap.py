"""Communication/computation overlap on hand-built traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, traces_of

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import overlap
from htatui.analysis.views.overlap import SCHEMA, OverlapOptions
from htatui.jobs.load import load_traces

Event = dict[str, Any]
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float"


def memcpy(ts: float, dur: float, stream: int = 7) -> Event:
    args = {"device": 0, "stream": stream, "correlation": 99}
    return {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": stream,
            "ts": ts, "dur": dur, "args": args}  # fmt: skip


@pytest.mark.parametrize("compat", [False, True])
def test_comm_overlapping_compute(tmp_path: Path, compat: bool) -> None:
    events = [
        kernel("gemm_kernel", 100, 50, stream=7, corr=1),  # [100,150)
        kernel("relu_kernel", 160, 20, stream=7, corr=2),  # [160,180)
        kernel("gemm_kernel", 130, 40, stream=8, corr=3),  # [130,170) on another stream
        kernel(NCCL, 140, 60, stream=20, corr=4),  # [140,200)
        kernel(NCCL, 300, 40, stream=20, corr=5),  # [300,340), nothing overlaps it
        memcpy(300, 40),  # memory kernels are ignored
    ]
    out = overlap.compute(traces_of(tmp_path, events), OverlapOptions(scope=Scope(hta_compat=compat)))
    # compute union [100,180); comm union [140,200) ∪ [300,340) = 100 µs
    # overlap = [140,180) = 40 → 40 %
    assert out.to_dicts() == [{"rank": 0, "overlap_pct": 40.0}]


def test_rounding_in_compat(tmp_path: Path) -> None:
    events = [kernel("gemm_kernel", 0, 10, corr=1), kernel(NCCL, 5, 30, stream=20, corr=2)]
    traces = traces_of(tmp_path, events)
    # overlap [5,10) = 5 of 30 µs of comm → 16.666… %; compat rounds to 16.67
    assert overlap.compute(traces, OverlapOptions())["overlap_pct"][0] == pytest.approx(100 / 6)
    assert overlap.compute(traces, OverlapOptions(scope=Scope(hta_compat=True)))["overlap_pct"][0] == 16.67


def test_no_communication_is_null_and_no_gpu_is_no_row(tmp_path: Path) -> None:
    rank0 = [kernel("gemm_kernel", 0, 10, corr=1)]  # compute only → null (HTA: NaN)
    rank1 = [cpu_op("aten::add", 0, 10)]  # no GPU activity → no row
    rank2 = [kernel(NCCL, 0, 10, stream=20, corr=1)]  # comm only → 0 %
    traces = traces_of(tmp_path, rank0, rank1, rank2)
    for compat in (False, True):
        out = overlap.compute(traces, OverlapOptions(scope=Scope(hta_compat=compat)))
        assert out.schema == pl.Schema(SCHEMA)
        assert out.to_dicts() == [{"rank": 0, "overlap_pct": None}, {"rank": 2, "overlap_pct": 0.0}]


def test_empty(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, [cpu_op("aten::add", 0, 10)])
    out = overlap.compute(traces, OverlapOptions())
    assert out.height == 0 and out.schema == pl.Schema(SCHEMA)


# ---- generated fixtures (fixtures/expected.py) ---------------------------------------------


@pytest.mark.parametrize("compat", [False, True])
@pytest.mark.parametrize("steps", ["kept", "all"])
def test_small_expected(tmp_path: Path, steps: str, compat: bool) -> None:
    from fixtures.expected import SMALL_EXPECTED
    from fixtures.generate import write_scenario

    write_scenario("small", tmp_path)
    traces = load_traces([tmp_path], use_cache=False, max_workers=1)
    out = overlap.compute(
        traces, OverlapOptions(scope=Scope(steps=Steps("all") if steps == "all" else Steps(), hta_compat=compat))
    )
    got = dict(out.iter_rows())
    assert got == SMALL_EXPECTED["overlap_pctg"]
    # the same ratio from the overlap and communication times
    for rank, (both, comm) in SMALL_EXPECTED["overlap_us"][steps].items():
        assert got[rank] == pytest.approx(100 * both / comm)


@pytest.mark.parametrize("compat", [False, True])
def test_edge_expected(tmp_path: Path, compat: bool) -> None:
    from fixtures.expected import EDGE_EXPECTED
    from fixtures.generate import write_scenario

    write_scenario("edge", tmp_path)
    options = OverlapOptions(scope=Scope(hta_compat=compat))
    no_comm = overlap.compute(load_traces([tmp_path / "no_comm"], use_cache=False, max_workers=1), options)
    assert no_comm["overlap_pct"].to_list() == [EDGE_EXPECTED["no_comm"]["overlap_pctg"]]  # [None]
    assert overlap.compute(load_traces([tmp_path / "cpu_only"], use_cache=False, max_workers=1), options).height == 0
    assert overlap.compute(load_traces([tmp_path / "amd"], use_cache=False, max_workers=1), options)[
        "overlap_pct"
    ].to_list() == [None]


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
    out = overlap.compute(load_shared(folder), OverlapOptions(scope=Scope(hta_compat=compat)))
    assert out.schema == pl.Schema(SCHEMA)
    if folder in ("cpu_only", "rank_non_gpu"):
        assert out.height == 0
    # none of these has communication kernels: a null per rank with GPU work, never NaN
    assert out["overlap_pct"].null_count() == out.height


# hta-reference.md §F.2 (NaN there is null here).
GOLDEN = {
    "negative_queue_length_values_check": 1.37,
    "nccl_parser_config": 14.31,
    "ns_resolution_trace": None,
    "amd_trace": None,
}


@pytest.mark.parametrize("folder", sorted(GOLDEN))
def test_golden_numbers(load_shared: Any, folder: str) -> None:
    out = overlap.compute(load_shared(folder), OverlapOptions(scope=Scope(hta_compat=True)))
    assert out["overlap_pct"].to_list() == [GOLDEN[folder]]


def test_the_cpu_collectives_note_reads_a_dataset_until_a_rank_has_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a dataset the note's check reads a rank at a time and stops at the first rank with CPU
    collectives; ranks it read are dropped again. Without any, every rank is read, and NO_COMM."""
    from htatui.jobs.ingest import ingest
    from htatui.trace.model import RankTrace

    def rank(collective: bool) -> list[Event]:
        ops = [cpu_op("gloo:all_reduce", 10, 5)] if collective else [cpu_op("aten::add", 10, 5)]
        return [*ops, kernel("gemm_kernel", 100, 50, stream=7, corr=1)]

    dropped: list[int] = []
    unload = RankTrace.unload

    def counted(self: RankTrace) -> None:
        if self.loaded:  # a rank read, dropped
            dropped.append(self.rank)
        unload(self)

    monkeypatch.setattr(RankTrace, "unload", counted)
    for name, ranks, note, read in (
        ("gloo", [rank(False), rank(True), rank(True), rank(True)], overlap.CPU_COLLECTIVES, [0, 1]),
        ("none", [rank(False)] * 3, overlap.NO_COMM, [0, 1, 2]),
    ):
        (tmp_path / name).mkdir()
        traces_of(tmp_path / name, *ranks)
        ingest([tmp_path / name], tmp_path / f"{name}.ds", max_workers=1)
        stored = load_traces([tmp_path / f"{name}.ds"])
        dropped.clear()
        found = overlap.table(stored, OverlapOptions())
        assert found.message == note and found.frame["overlap_pct"].to_list() == [None] * len(ranks)
        assert dropped == read and not any(r.loaded for r in stored.ranks.values())
        # The same note as over the folder, where every rank is loaded.
        direct = overlap.table(load_traces([tmp_path / name], use_cache=False, max_workers=1), OverlapOptions())
        assert direct.frame.equals(found.frame) and direct.message == found.message
