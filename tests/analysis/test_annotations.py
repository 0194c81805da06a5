"""annotations view on hand-built traces; expected numbers derived in the comments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, runtime, step, write_trace

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import annotations as user_annotations
from htatui.analysis.views.annotations import AnnotationOptions
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet


def load(path: Path) -> TraceSet:
    return load_traces([path], use_cache=False, max_workers=1)


def gpu_annotation(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "gpu_user_annotation",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"External id": 1},
    }


def job(tmp_path: Path) -> TraceSet:
    """Steps 1 [0, 1000), 2 [1000, 2000), 3 [2000, 3000) (step 3 is dropped by default).
    Per step k (s = 1000·(k−1)): CPU `## forward ##` (s+10, 100) and `Optimizer.step` (s+500, 20 + 10·k);
    GPU `## forward ##` (s+50, 200 + 10·k) and `Optimizer.step` (s+600, 30)."""
    events: list[dict[str, Any]] = []
    for k in (1, 2, 3):
        s = 1000.0 * (k - 1)
        events += [
            step(k, s, 1000),
            cpu_op("## forward ##", s + 10, 100, cat="user_annotation"),
            cpu_op("Optimizer.step#SGD.step", s + 500, 20 + 10 * k, cat="user_annotation"),
            gpu_annotation("## forward ##", s + 50, 200 + 10 * k),
            gpu_annotation("Optimizer.step#SGD.step", s + 600, 30),
            runtime("cudaLaunchKernel", s + 20, 5, k),
            kernel("gemm", s + 60, 100, corr=k),
        ]
    return load(write_trace(tmp_path / "rank-0.json", events, rank=0))


@pytest.mark.parametrize("compat", [False, True])
def test_gpu_annotations(tmp_path: Path, compat: bool) -> None:
    frame = user_annotations.compute(job(tmp_path), AnnotationOptions(scope=Scope(hta_compat=compat)))
    assert frame.schema == pl.Schema(user_annotations.COLUMNS)
    # Steps 1–2: forward 210 + 220 = 430 (mean 215); Optimizer.step 30 + 30.
    assert frame.rows() == [
        (0, "## forward ##", 2, 430.0, 215.0),
        (0, "Optimizer.step#SGD.step", 2, 60.0, 30.0),
    ]
    every = user_annotations.compute(
        job(tmp_path), AnnotationOptions(scope=Scope(steps=Steps("all"), hta_compat=compat))
    )
    assert every.filter(pl.col("name") == "## forward ##").row(0) == (0, "## forward ##", 3, 660.0, 220.0)


def test_cpu_annotations(tmp_path: Path) -> None:
    frame = user_annotations.compute(job(tmp_path), AnnotationOptions(use_gpu_annotation=False))
    # CPU side, steps 1–2: ProfilerStep rows count too; Optimizer.step 30 + 40.
    assert frame.rows() == [
        (0, "## forward ##", 2, 200.0, 100.0),
        (0, "Optimizer.step#SGD.step", 2, 70.0, 35.0),
        (0, "ProfilerStep#1", 1, 1000.0, 1000.0),
        (0, "ProfilerStep#2", 1, 1000.0, 1000.0),
    ]


def test_compat_folding(tmp_path: Path) -> None:
    """Five names with totals 50, 40, 30, 20, 10 (one span each) and num_kernels = 2.
    Sorted by total: cumulative sums 50, 90, 120, 140, 150; their 0.8 quantile (linear) sits at
    position 3.2 → 140 + 0.2 × 10 = 142. Names past position 2 or above 142 fold into "others":
    positions 2, 3, 4 → others with total 60 and mean (30 + 20 + 10) / 3 = 20. The two named rows
    keep their total as mean (HTA's folded frame has one row per name)."""
    events = [gpu_annotation(f"a{i}", 100.0 * i, 10.0 * (5 - i)) for i in range(5)]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    options = AnnotationOptions(scope=Scope(hta_compat=True), num_kernels=2)
    assert user_annotations.compute(traces, options).rows() == [
        (0, "a0", 1, 50.0, 50.0),
        (0, "a1", 1, 40.0, 40.0),
        (0, "others", 3, 60.0, 20.0),
    ]
    # Corrected mode never folds.
    assert user_annotations.compute(traces, AnnotationOptions(num_kernels=2)).height == 5


@pytest.mark.parametrize("compat", [False, True])
def test_empty(tmp_path: Path, compat: bool) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {}}]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    for gpu in (True, False):
        frame = user_annotations.compute(
            traces, AnnotationOptions(scope=Scope(hta_compat=compat), use_gpu_annotation=gpu)
        )
        assert frame.height == 0 and frame.schema == pl.Schema(user_annotations.COLUMNS)


# ---- generated fixtures (fixtures/expected.py) ------------------------------------------------

try:
    from fixtures import expected, generate
except ImportError:  # pragma: no cover - fixtures/ ships with the repository
    expected = generate = None  # type: ignore[assignment]
needs_fixtures = pytest.mark.skipif(expected is None, reason="fixtures/ (generated scenarios) not available")


@needs_fixtures
@pytest.mark.parametrize("which", ["kept", "all"])
@pytest.mark.parametrize("compat", [False, True])
def test_small_expected(small: TraceSet, which: str, compat: bool) -> None:
    truth = expected.SMALL_EXPECTED
    every = which == "all"
    gpu = user_annotations.compute(
        small, AnnotationOptions(scope=Scope(steps=Steps("all") if every else Steps(), hta_compat=compat))
    )
    cpu = user_annotations.compute(
        small,
        AnnotationOptions(
            scope=Scope(steps=Steps("all") if every else Steps(), hta_compat=compat), use_gpu_annotation=False
        ),
    )
    for rank in truth["ranks"]:
        ours = {n: (c, s) for _, n, c, s, _ in gpu.filter(pl.col("rank") == rank).rows()}
        assert ours == truth["gpu_annotations"][which][rank]
        ours_cpu = {n: (c, s) for _, n, c, s, _ in cpu.filter(pl.col("rank") == rank).rows()}
        assert ours_cpu == truth["cpu_annotations"][which]


# ---- real traces -----------------------------------------------------------------------------

# folder → gpu_user_annotation rows: AMD has two ("ProfilerStep#1", "Optimizer.step#SGD.step").
SHARED = {"cpu_only": 0, "rank_non_gpu": 0, "amd_trace": 2, "mtia_inference_trace": 0, "triton_example": 0}


@pytest.mark.parametrize("folder", sorted(SHARED))
def test_shared_traces(load_shared: Any, folder: str) -> None:
    traces = load_shared(folder)
    for compat in (False, True):
        frame = user_annotations.compute(traces, AnnotationOptions(scope=Scope(hta_compat=compat)))
        assert frame.schema == pl.Schema(user_annotations.COLUMNS) and frame.height == SHARED[folder]


def test_ns_resolution_golden(load_shared: Any) -> None:
    """Reference §F.2: "## backward ##" 81 µs (3×, mean 27), "DistributedDataParallel.forward"
    123880 (4×), "Optimizer.step#SGD.step" 3334 (3×, mean 1111.33) — HTA's rounded numbers."""
    frame = user_annotations.compute(
        load_shared("ns_resolution_trace"), AnnotationOptions(scope=Scope(hta_compat=True))
    )
    rows = {r["name"]: r for r in frame.to_dicts()}
    assert (rows["## backward ##"]["count"], rows["## backward ##"]["sum_us"]) == (3, 81.0)
    assert (
        rows["DistributedDataParallel.forward"]["count"],
        rows["DistributedDataParallel.forward"]["sum_us"],
    ) == (
        4,
        123880.0,
    )
    assert rows["Optimizer.step#SGD.step"]["mean_us"] == pytest.approx(1111.33, abs=0.005)
    # Corrected mode keeps the exact ns timestamps: a little more than HTA's rounded spans.
    exact = user_annotations.compute(load_shared("ns_resolution_trace"), AnnotationOptions())
    assert exact.filter(pl.col("name") == "## backward ##")["sum_us"].item() >= 81.0


def test_a_job_without_gpu_annotations_says_why_its_table_is_empty(tmp_path: Path) -> None:
    """Issue 38 #7: `annotations · … · step 10: no rows` gave no reason while `check` knew it."""
    from kineto_util import cpu_op, kernel, runtime, traces_of

    from htatui.analysis.registry import BY_ID, frame_of, make_table

    traces = traces_of(tmp_path, [cpu_op("op", 0, 10), runtime("cudaLaunchKernel", 1, 2, 1), kernel("k", 5, 3, corr=1)])
    view = BY_ID["annotations"]
    frame, message = frame_of(make_table(view.main, traces, view.options()))
    assert frame.height == 0 and message is not None and message.startswith("no GPU user annotations")
