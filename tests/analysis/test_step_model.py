"""The step model (default mode's critical path) on hand-made traces: every µs of the step on a
labelled edge, waits replaced by what explains them, and what-ifs that replay the graph."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from kineto_util import Event, cpu_op, kernel, runtime, step, traces_of

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import critical_path as cp
from htatui.analysis.views.critical_path.step_graphs import job_graph, rank_graph
from htatui.analysis.views.critical_path.step_model import path_frame


def _options(**kw: object) -> cp.CriticalPathOptions:
    return cp.CriticalPathOptions(scope=Scope(steps=Steps.parse("1")), **kw)  # type: ignore[arg-type]


def _rank_path(traces: object, rank: int = 0) -> pl.DataFrame:
    built = rank_graph(traces, _options(), rank)  # type: ignore[arg-type]
    assert built.graph is not None, built.message
    return path_frame(built.graph)


def _by(path: pl.DataFrame, *keys: str) -> dict[object, object]:
    grouped = path.filter(pl.col("duration_us") > 0).group_by(*keys).agg(pl.col("duration_us").sum())
    rows = grouped.iter_rows()
    return {row[:-1] if len(keys) > 1 else row[0]: pytest.approx(row[-1]) for row in rows}


def test_a_sleep_inside_an_annotation_is_host_gap_charged_to_it(tmp_path: Path) -> None:
    """ProfilerStep#1 [0, 1000]: data_loader [10, 510] holds aten::stack [20, 70] and then sleeps;
    forward [520, 900]. Host gaps: data_loader 10 + 440, the step itself 10 + 10 + 100."""
    events = [
        step(1, 0, 1000),
        cpu_op("data_loader", 10, 500, cat="user_annotation"),
        cpu_op("aten::stack", 20, 50),
        cpu_op("forward", 520, 380),
        step(2, 1000, 100),
    ]
    path = _rank_path(traces_of(tmp_path, events))
    assert path["duration_us"].sum() == pytest.approx(1000)
    assert _by(path, "bound_by", "name") == {
        ("host_gap", "data_loader"): 450,
        ("host_gap", "ProfilerStep#1"): 120,
        ("cpu_bound", "aten::stack"): 50,
        ("cpu_bound", "forward"): 380,
    }


def gloo_sleeper(rank: int, loader: float) -> list[Event]:
    """A gloo DDP rank: step 1 [0, 1480]: data_loader [10, 10 + L] (aten::stack [20, 60], then a
    sleep), forward [L + 20, L + 220], c10d::allreduce_ [L + 230, L + 240] hands the call to gloo's
    worker (tid 2), whose gloo:all_reduce arrives at L + 260 and ends 100 µs after the last
    arrival (at 1360 with L = 1000 on the slow rank); the main thread goes on 10 µs later with
    optimizer [1370, 1470]. Step 2 is short and last."""
    last_arrival = 1000 + 260.0
    return [
        step(1, 0, 1480),
        cpu_op("data_loader", 10, loader, cat="user_annotation"),
        cpu_op("aten::stack", 20, 40),
        cpu_op("forward", loader + 20, 200),
        cpu_op("c10d::allreduce_", loader + 230, 10),
        cpu_op("gloo:all_reduce", loader + 260, last_arrival + 100 - (loader + 260), tid=2, cat="user_annotation"),
        cpu_op("optimizer", 1370, 100),
        step(2, 1480, 100),
    ]


def test_a_gloo_job_puts_the_late_ranks_sleep_on_its_path(tmp_path: Path) -> None:
    """Rank 1 sleeps 900 µs longer in data_loader: the job's path crosses to rank 1 at the
    allreduce and holds its sleep; rank 1 at rank 0's pace saves that sleep."""
    traces = traces_of(tmp_path, gloo_sleeper(0, 100), gloo_sleeper(1, 1000))
    built = job_graph(traces, _options())
    assert built.graph is not None
    path = path_frame(built.graph)
    assert path["duration_us"].sum() == pytest.approx(1480)
    assert _by(path, "rank", "bound_by", "name")[(1, "host_gap", "data_loader")] == 960
    assert _by(path, "bound_by", "name")[("cpu_communication_bound", "gloo:all_reduce")] == 100
    saving = cp.what_if_savings(traces, _options(), [cp.Change("rank", "1", to_median=True)])[0]
    assert saving.replay_us == pytest.approx(1480)
    assert saving.saved_us == pytest.approx(900, rel=0.03)
    assert "data_loader" in saving.detail
    # Rank 0 alone waits for rank 1 at the allreduce: the wait is explained, not unexplained.
    alone = _rank_path(traces, 0)
    assert _by(alone, "bound_by")["collective_wait"] == 900
    assert "unexplained_wait" not in _by(alone, "bound_by")


def test_step_summary_says_what_bounds_the_job(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, gloo_sleeper(0, 100), gloo_sleeper(1, 1000))
    summary = cp.step_summary(traces, _options())
    assert summary.step_us == pytest.approx(1480)
    assert summary.replay_us == pytest.approx(1480)
    assert summary.coverage_pct == pytest.approx(100)
    assert summary.unexplained_pct == 0
    assert summary.bound_by["bound_by"][0] == "host_gap"
    assert summary.line().startswith("path 1.5 ms of a 1.5 ms step (100.0 %)")


def test_a_sync_waits_for_the_kernel_and_a_faster_kernel_shortens_the_step(tmp_path: Path) -> None:
    """aten::mm [10, 30] launches k (cudaLaunchKernel [15, 20]) that runs [25, 525];
    cudaStreamSynchronize [40, 530] returns 5 µs after it; step [0, 600]."""
    events = [
        step(1, 0, 600),
        cpu_op("aten::mm", 10, 20),
        runtime("cudaLaunchKernel", 15, 5, 1),
        kernel("gemm", 25, 500, corr=1),
        runtime("cudaStreamSynchronize", 40, 490, 2),
        step(2, 600, 10),
    ]
    traces = traces_of(tmp_path, events)
    path = _rank_path(traces)
    assert path["duration_us"].sum() == pytest.approx(600)
    # The step's own time, aten::mm up to the launch, the launch, the kernel, the sync's return.
    assert path["edge_type"].to_list() == [
        "annotation",
        "operator",
        "launch",
        "kernel",
        "sync",
        "annotation",
        "step_end",
    ]
    assert _by(path, "bound_by") == {
        "host_gap": 10 + 70,
        "cpu_bound": 5 + 5,
        "gpu_kernel_launch_overhead": 10,
        "gpu_compute_bound": 500,
    }
    half = cp.what_if_savings(traces, _options(), [cp.Change("name", "gemm")])[0]
    assert half.saved_us == pytest.approx(250)


def test_a_kernel_that_starts_before_its_launch_is_clamped_and_counted(tmp_path: Path) -> None:
    """The kernel's start is 3 µs before its launch call (clocks): the path never runs backwards."""
    events = [
        step(1, 0, 300),
        runtime("cudaLaunchKernel", 50, 5, 1),
        kernel("k", 47, 100, corr=1),
        runtime("cudaDeviceSynchronize", 60, 100, 2),
        step(2, 300, 10),
    ]
    traces = traces_of(tmp_path, events)
    built = rank_graph(traces, _options(), 0)
    assert built.graph is not None
    assert built.graph.clamped == {"device work that starts before its launching call": 1}
    path = path_frame(built.graph)
    assert (path["duration_us"] >= 0).all()
    assert path["duration_us"].sum() == pytest.approx(300)


def test_the_autograd_thread_is_forked_and_joined(tmp_path: Path) -> None:
    """The main thread's backward [100, 1000] waits while the autograd thread (tid 2) runs
    [150, 900]: the path goes through the autograd thread's ops, not the main thread's gap."""
    events = [
        step(1, 0, 1100),
        cpu_op("backward", 100, 900, cat="user_annotation"),
        cpu_op("aten::ones_like", 110, 20),
        cpu_op("autograd::engine::evaluate_function: MmBackward0", 150, 400, tid=2),
        cpu_op("autograd::engine::evaluate_function: AddBackward0", 560, 340, tid=2),
        step(2, 1100, 10),
    ]
    path = _rank_path(traces_of(tmp_path, events))
    by = _by(path, "edge_type")
    assert by["fork"] == 20 and by["join"] == 100
    assert _by(path, "bound_by", "name")[("cpu_bound", "autograd::engine::evaluate_function: MmBackward0")] == 400
