"""The step model on jobs shaped like the issue's real ones (a gloo job whose rank 2's data loader
sleeps, a compute straggler, an 8-rank job of all-to-alls and all-reduces), and on fixtures/demo:
the job's path, the straggler what-if and the Ranks page name the same rank and phase."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from kineto_util import Event, cpu_op, kernel, runtime, step, traces_of

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import critical_path as cp
from htatui.analysis.views import ranks as ranks_view
from htatui.jobs.load import load_traces

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
NCCL_ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
NCCL_ALL_TO_ALL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


def gloo_rank(loader: float, last_loader: float, steps: int = 3) -> list[Event]:
    """A gloo DDP rank, steps of 40 ms at B: data_loader [B+10, B+10+L] (a 40 µs op, then a sleep),
    forward 200 µs, c10d::allreduce_ hands the call to gloo's worker (tid 2), which arrives 20 µs
    after and ends 100 µs after the last rank's arrival; the main thread goes on 10 µs later with
    optimizer (100 µs); the step ends 10 µs after it. `last_loader`: the slowest rank's L."""
    events: list[Event] = []
    for n in range(1, steps + 1):
        b = (n - 1) * 40_000.0
        done = b + last_loader + 260 + 100
        events += [
            step(n, b, done + 120 - b),
            cpu_op("data_loader", b + 10, loader, cat="user_annotation"),
            cpu_op("aten::stack", b + 20, 40),
            cpu_op("forward", b + loader + 20, 200, cat="user_annotation"),
            cpu_op("c10d::allreduce_", b + loader + 230, 10),
            cpu_op("gloo:all_reduce", b + loader + 260, done - (b + loader + 260), tid=2, cat="user_annotation"),
            cpu_op("optimizer", done + 10, 100, cat="user_annotation"),
        ]
    return events


def test_a_gloo_job_whose_rank_2_sleeps_names_rank_2_and_its_data_loader(tmp_path: Path) -> None:
    """4 ranks, rank 2's data loader sleeps 30 ms a step: the job's path is rank 2's sleep; rank 2
    at the others' pace saves it (2 steps × 29.9 ms), as the Ranks page's data_loader cause says."""
    sleep = 30_000.0
    traces = traces_of(tmp_path, *(gloo_rank(sleep if r == 2 else 100.0, sleep) for r in range(4)))
    options = cp.CriticalPathOptions()
    top = cp.job(traces, options).frame.row(0, named=True)
    assert (top["rank"], top["name"], top["bound_by"]) == (2, "data_loader", "host_gap")
    assert top["pct"] > 80  # the rest: the steps' own work
    straggler = cp.straggler_what_if(traces, options).frame.row(0, named=True)
    assert straggler["key"] == "2" and straggler["detail"].startswith("data_loader")
    assert straggler["saved_us"] == pytest.approx(2 * (sleep - 100), rel=0.03)
    ranks = ranks_view.stragglers(traces, ranks_view.RanksOptions()).frame.row(0, named=True)
    assert (ranks["rank"], ranks["cause_phase"]) == (2, "data_loader")


def nccl_rank(gemm: float, slowest: float, steps: int = 3) -> list[Event]:
    """An NCCL rank, steps of 1000 µs at B: aten::mm [B+5, B+30] launches its gemm (stream 7,
    [B+100, B+100+G]) and the all-reduce that follows it on the stream; the all-reduce ends 100 µs
    after the slowest rank's gemm; cudaDeviceSynchronize [B+50, B+5+end] waits for it and the step
    ends 15 µs later."""
    events: list[Event] = []
    for n in range(1, steps + 1):
        b = (n - 1) * 1000.0
        done = b + 100 + slowest + 100
        c = 10 * n
        events += [
            step(n, b, done + 20 - b),
            cpu_op("aten::mm", b + 5, 25),
            runtime("cudaLaunchKernel", b + 10, 5, c + 1),
            runtime("cudaLaunchKernel", b + 40, 5, c + 2),
            kernel("sm90_xmma_gemm_bf16bf16_bf16f32", b + 100, gemm, corr=c + 1),
            kernel(NCCL_ALL_REDUCE, b + 100 + gemm, done - (b + 100 + gemm), corr=c + 2),
            runtime("cudaDeviceSynchronize", b + 50, done + 5 - (b + 50), c + 3),
        ]
    return events


def test_a_compute_straggler_is_its_gemm(tmp_path: Path) -> None:
    """Rank 1's gemm takes 500 µs, the others' 200: the job's path is rank 1's gemm; rank 1 at the
    others' pace saves 300 µs a step, its GPU compute being the phase."""
    traces = traces_of(tmp_path, *(nccl_rank(500.0 if r == 1 else 200.0, 500.0) for r in range(3)))
    options = cp.CriticalPathOptions()
    top = cp.job(traces, options).frame.row(0, named=True)
    assert (top["rank"], top["name"], top["bound_by"], top["instances"]) == (
        1,
        "sm90_xmma_gemm_bf16bf16_bf16f32",
        "gpu_compute_bound",
        2,
    )
    first = cp.job_what_if(traces, options).frame.row(0, named=True)
    assert (first["group"], first["key"]) == ("rank", "1") and first["detail"].startswith("GPU compute")
    assert first["saved_us"] == pytest.approx(2 * 300)
    ranks = ranks_view.stragglers(traces, ranks_view.RanksOptions()).frame.row(0, named=True)
    # The Ranks page names the kernel (its one compute kernel is all its GPU compute).
    assert (ranks["rank"], ranks["cause_phase"]) == (1, "kernel sm90_xmma_gemm_bf16bf16_bf16f32")


def dlrm_rank(rank: int, ranks: int = 8) -> list[Event]:
    """An 8-rank step: an all-to-all of embeddings (its kernel starts at B+50+5·rank, ends at
    B+200), dense compute (rank 5: 600 µs, the others 300), an all-reduce that ends 80 µs after
    the last rank's compute, and a sync."""
    dense = 600.0 if rank == 5 else 300.0
    events: list[Event] = []
    for n in (1, 2, 3):
        b = (n - 1) * 2000.0
        c = 10 * n
        arrive = b + 50 + 5 * rank
        last = b + 200 + 600
        events += [
            step(n, b, last + 80 + 30 - b),
            cpu_op("aten::index_select", b + 2, 30),
            runtime("cudaLaunchKernel", b + 10, 5, c + 1),
            runtime("cudaLaunchKernel", b + 20, 5, c + 2),
            runtime("cudaLaunchKernel", b + 30, 5, c + 3),
            kernel(NCCL_ALL_TO_ALL, arrive, b + 200 - arrive, corr=c + 1),
            kernel("dense_mlp_gemm", b + 200, dense, corr=c + 2),
            kernel(NCCL_ALL_REDUCE, b + 200 + dense, last + 80 - (b + 200 + dense), corr=c + 3),
            runtime("cudaDeviceSynchronize", b + 40, last + 85 - (b + 40), c + 4),
        ]
    return events


def test_an_eight_rank_job_covers_its_step_and_crosses_to_the_slow_rank(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *(dlrm_rank(r) for r in range(8)))
    options = cp.CriticalPathOptions(scope=Scope(steps=Steps.parse("2")))
    summary = cp.step_summary(traces, options)
    assert summary.coverage_pct == pytest.approx(100) and summary.unexplained_pct == 0
    assert summary.replay_us == pytest.approx(summary.step_us)
    assert cp.job(traces, options).frame.row(0, named=True)["rank"] == 5
    for rank in range(8):
        alone = cp.edges(traces, cp.CriticalPathOptions(scope=options.scope, rank=rank))
        assert alone.frame["duration_us"].sum() == pytest.approx(910)
        assert alone.message is not None and alone.message.startswith("path 0.9 ms of a 0.9 ms step (100.0 %)")


def test_the_demo_names_rank_2_and_its_gpu_compute_everywhere() -> None:
    """fixtures/demo's planted straggler: the Ranks page, the straggler what-if, the job's what-if
    and the job's path all name rank 2 and its GPU compute; the what-if's saving is the Ranks
    page's delay within 10 %."""
    traces = load_traces([DEMO], use_cache=False, max_workers=1)
    options = cp.CriticalPathOptions()
    ranks = ranks_view.stragglers(traces, ranks_view.RanksOptions()).frame.row(0, named=True)
    assert (ranks["rank"], ranks["cause_phase"]) == (2, "GPU compute")
    straggler = cp.straggler_what_if(traces, options).frame.row(0, named=True)
    assert straggler["key"] == "2" and straggler["detail"].startswith("GPU compute")
    assert straggler["saved_us"] == pytest.approx(ranks["delay_us"], rel=0.10)
    job = cp.job_what_if(traces, options).frame.row(0, named=True)
    assert (job["group"], job["key"], job["saved_us"]) == ("rank", "2", straggler["saved_us"])
    top = cp.job(traces, options).frame.row(0, named=True)
    assert (top["rank"], top["bound_by"]) == (2, "gpu_compute_bound")
    summary = cp.step_summary(traces, options)
    assert summary.bound_by.row(0, named=True)["bound_by"] == "gpu_compute_bound"
    assert pl.Series(cp.straggler_what_if(traces, options).frame["saved_us"]).to_list()[1:] == [0.0, 0.0, 0.0]
