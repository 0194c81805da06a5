"""steps view and straggler detection on hand-built traces; expected numbers derived in comments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import kernel, runtime, step, write_trace

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import steps
from htatui.analysis.views.steps import StepsOptions, StragglerOptions
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet


def load(path: Path) -> TraceSet:
    return load_traces([path], use_cache=False, max_workers=1)


def three_steps(tmp_path: Path) -> TraceSet:
    """ProfilerStep#1 [0, 100), #2 [100, 200), #3 [200, 300) plus a GPU-side copy of step 1
    (gpu_user_annotation, as on AMD) that must not count as a second step 1."""
    events: list[dict[str, Any]] = [step(k, 100.0 * (k - 1), 100) for k in (1, 2, 3)]
    events.append(
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "ProfilerStep#1",
            "pid": 0,
            "tid": 7,
            "ts": 5,
            "dur": 90,
            "args": {},
        }
    )
    return load(write_trace(tmp_path / "rank-0.json", events, rank=0))


def test_steps_used_flag(tmp_path: Path) -> None:
    traces = three_steps(tmp_path)
    frame = steps.compute(traces, StepsOptions())
    assert frame.schema == pl.Schema(steps.COLUMNS)
    assert frame.select("step", "start_us", "dur_us", "used").rows() == [
        (1, 0.0, 100.0, True),
        (2, 100.0, 100.0, True),
        (3, 200.0, 100.0, False),  # last step dropped
    ]
    assert steps.compute(traces, StepsOptions(scope=Scope(steps=Steps("all"))))["used"].to_list() == [True, True, True]
    assert steps.profiler_steps(traces, StepsOptions()) == [1, 2]
    assert steps.compute(traces, StepsOptions(scope=Scope(hta_compat=True)))["used"].to_list() == [True, True, False]


def test_one_step_is_used_and_no_steps_is_empty(tmp_path: Path) -> None:
    one = load(write_trace(tmp_path / "one" / "rank-0.json", [step(7, 0, 50)], rank=0))
    assert steps.compute(one, StepsOptions()).select("step", "used").rows() == [(7, True)]
    events = [kernel("k", 0, 5, corr=1), runtime("cudaLaunchKernel", 0, 1, 1)]
    none = load(write_trace(tmp_path / "none" / "rank-0.json", events, rank=0))
    frame = steps.compute(none, StepsOptions())
    assert frame.height == 0 and frame.schema == pl.Schema(steps.COLUMNS)


# Start offsets of the all-reduce kernel (µs after the step start) per step and rank. Every
# kernel ends at offset 600, so its duration is 600 − start.
STARTS = {
    1: {0: 100, 1: 110, 2: 150, 3: 200},
    2: {0: 100, 1: 160, 2: 120, 3: 300},
    3: {0: 100, 1: 100, 2: 100, 3: 100},  # the last step: dropped
}


def write_job(folder: Path, kernel_name: str, ranks: int = 4) -> Path:
    """`ranks` ranks, steps 1–3 of 1000 µs at 0, 1000, 2000 (HTA drops step 3). In each step a
    cudaLaunchKernel at +10 (correlation 100·k + 1) launches the all-reduce on stream 20."""
    for rank in range(ranks):
        events: list[dict[str, Any]] = []
        for k, starts in STARTS.items():
            s = 1000.0 * (k - 1)
            corr = 100 * k + 1
            events += [
                step(k, s, 1000),
                runtime("cudaLaunchKernel", s + 10, 5, corr),
                kernel(kernel_name, s + starts[rank], 600 - starts[rank], stream=20, corr=corr),
            ]
        write_trace(folder / f"rank-{rank}.json", events, rank=rank)
    return folder


def test_stragglers_corrected_finds_nccl_dev_kernels(tmp_path: Path) -> None:
    """Step 1 marks the two latest starters {3 (200), 2 (150)}; step 2 marks {3 (300), 1 (160)}.
    Scores: rank 0 → 0, 1 → 1, 2 → 1, 3 → 2. The top two: rank 3, then rank 1 (tie with rank 2
    broken by the lower rank, as HTA's sort keeps rank order)."""
    traces = load(write_job(tmp_path, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"))
    result = steps.stragglers(traces, StragglerOptions())
    assert result.message is None
    assert result.frame.schema == pl.Schema(steps.STRAGGLER_COLUMNS)
    assert result.frame.rows() == [(0, 0, False), (1, 1, True), (2, 1, False), (3, 2, True)]
    # One candidate per step: only the latest starter is marked (rank 3 both times).
    one = steps.stragglers(traces, StragglerOptions(num_candidates=1)).frame
    assert one.filter(pl.col("is_straggler"))["rank"].to_list() == [3]
    assert one["straggler_score"].to_list() == [0, 0, 0, 2]
    # Only step 2: marks {3, 1}.
    only2 = steps.stragglers(traces, StragglerOptions(profiler_steps=(2,))).frame
    assert only2.rows() == [(0, 0, False), (1, 1, True), (2, 0, False), (3, 1, True)]
    # HTA matches only names starting with "ncclKernel" (issue #360): nothing found, no crash.
    compat = steps.stragglers(traces, StragglerOptions(scope=Scope(hta_compat=True)))
    assert compat.frame.height == 0 and compat.message is not None


def test_stragglers_compat_with_old_nccl_names(tmp_path: Path) -> None:
    traces = load(write_job(tmp_path, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"))
    for compat in (False, True):
        frame = steps.stragglers(traces, StragglerOptions(scope=Scope(hta_compat=compat))).frame
        assert frame.filter(pl.col("is_straggler"))["rank"].to_list() == [1, 3]


def test_stragglers_need_two_ranks(tmp_path: Path) -> None:
    traces = load(write_job(tmp_path, "ncclDevKernel_AllReduce", ranks=1))
    result = steps.stragglers(traces, StragglerOptions())
    assert result.frame.height == 0 and result.frame.schema == pl.Schema(steps.STRAGGLER_COLUMNS)
    assert result.message == steps.NOT_ENOUGH_RANKS == "not enough ranks: straggler detection needs ≥ 2"
    assert steps.stragglers_message(traces, StragglerOptions()) == steps.NOT_ENOUGH_RANKS


def test_stragglers_without_steps_or_comm(tmp_path: Path) -> None:
    for rank in (0, 1):
        events = [runtime("cudaLaunchKernel", 10, 5, 1), kernel("gemm", 20, 100, corr=1)]
        write_trace(tmp_path / "nosteps" / f"rank-{rank}.json", events, rank=rank)
    result = steps.stragglers(load(tmp_path / "nosteps"), StragglerOptions())
    assert result.frame.height == 0 and "ProfilerStep" in (result.message or "")
    traces = load(write_job(tmp_path / "gemm", "ampere_sgemm_128x64_tn", ranks=2))
    result = steps.stragglers(traces, StragglerOptions())
    assert result.frame.height == 0 and "communication" in (result.message or "")
    bad_step = steps.stragglers(traces, StragglerOptions(profiler_steps=(42,)))
    assert bad_step.frame.height == 0 and "42" in (bad_step.message or "")


@pytest.mark.parametrize("compat", [False, True])
def test_empty_cpu_only(tmp_path: Path, compat: bool) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {}}]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    assert steps.compute(traces, StepsOptions(scope=Scope(hta_compat=compat))).schema == pl.Schema(steps.COLUMNS)
    assert steps.stragglers(traces, StragglerOptions(scope=Scope(hta_compat=compat))).frame.height == 0


# ---- generated fixtures (fixtures/expected.py, fixtures/demo) ---------------------------------

try:
    from fixtures import expected, generate
except ImportError:  # pragma: no cover - fixtures/ ships with the repository
    expected = generate = None  # type: ignore[assignment]
needs_fixtures = pytest.mark.skipif(expected is None, reason="fixtures/ (generated scenarios) not available")
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"


@needs_fixtures
@pytest.mark.parametrize("compat", [False, True])
def test_small_expected(tmp_path: Path, compat: bool) -> None:
    generate.write_scenario("small", tmp_path)
    traces = load(tmp_path)
    truth = expected.SMALL_EXPECTED["steps"]
    frame = steps.compute(traces, StepsOptions(scope=Scope(hta_compat=compat)))
    for rank in expected.SMALL_EXPECTED["ranks"]:
        rows = frame.filter(pl.col("rank") == rank)
        assert rows["step"].to_list() == truth["all"]
        assert rows.filter(pl.col("used"))["step"].to_list() == truth["kept"]
        shift = traces.ranks[rank].shift_us
        for step_number, start, dur in rows.select("step", "start_us", "dur_us").rows():
            assert start - shift == pytest.approx(truth["start_us"][step_number])
            assert dur == pytest.approx(truth["dur"][step_number])
    assert steps.profiler_steps(traces, StepsOptions(scope=Scope(hta_compat=compat))) == truth["kept"]
    every = steps.compute(traces, StepsOptions(scope=Scope(steps=Steps("all"), hta_compat=compat)))
    assert every["used"].all()


@pytest.mark.skipif(not DEMO.is_dir(), reason="fixtures/demo not generated")
@needs_fixtures
def test_demo_straggler_is_rank_2() -> None:
    """The demo's rank 2 computes 35 % slower, so its all-reduce kernels start last."""
    traces = load(DEMO)
    one = steps.stragglers(traces, StragglerOptions(num_candidates=1)).frame
    assert one.filter(pl.col("is_straggler"))["rank"].to_list() == [2]
    assert one.filter(pl.col("rank") == 2)["straggler_score"].item() == len(
        steps.profiler_steps(traces, StepsOptions())
    )


# ---- real traces -----------------------------------------------------------------------------

# folder → step rows (used or not); none has two ranks, so no straggler frame.
SHARED = {"cpu_only": 1, "rank_non_gpu": 1, "amd_trace": 2, "mtia_inference_trace": 0, "triton_example": 1}


@pytest.mark.parametrize("folder", sorted(SHARED))
def test_shared_traces(load_shared: Any, folder: str) -> None:
    traces = load_shared(folder)
    for compat in (False, True):
        frame = steps.compute(traces, StepsOptions(scope=Scope(hta_compat=compat)))
        assert frame.schema == pl.Schema(steps.COLUMNS) and frame.height == SHARED[folder]
        result = steps.stragglers(traces, StragglerOptions(scope=Scope(hta_compat=compat)))
        assert result.frame.height == 0 and result.message == steps.NOT_ENOUGH_RANKS


def test_ns_resolution_steps(load_shared: Any) -> None:
    # Reference §F.2: iterations 101–104 (105, the last, is dropped).
    frame = steps.compute(load_shared("ns_resolution_trace"), StepsOptions())
    assert frame.select("step", "used").rows() == [
        (101, True),
        (102, True),
        (103, True),
        (104, True),
        (105, False),
    ]
