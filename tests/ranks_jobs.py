"""Generated jobs with planted straggler answers, shared by the ranks analysis and screen tests."""

from __future__ import annotations

from typing import Any

from kineto_util import cpu_op, kernel, runtime, step

Event = dict[str, Any]

SLOW_RANK = 2


def gloo_rank(rank: int) -> list[Event]:
    """A 4-rank DDP step on gloo (no GPU at all), 3 steps of 1000 µs at B = (n−1)·1000.

    data_loader lasts L = 100 µs (400 on rank 2), forward 200, backward until B+800, optimizer
    100. The gloo:all_reduce runs on the gloo thread (tid 2) from B+L+300 (arrival) to B+800
    (when the last rank arrived, + 100): fast ranks arrive at B+400, rank 2 at B+700.
    Step 3 is the last and is dropped, so steps 1 and 2 are analysed.
    """
    loader = 400.0 if rank == SLOW_RANK else 100.0
    events: list[Event] = []
    for n in (1, 2, 3):
        base = (n - 1) * 1000.0
        events += [
            step(n, base, 1000),
            cpu_op("data_loader", base, loader, cat="user_annotation"),
            cpu_op("forward", base + loader, 200, cat="user_annotation"),
            cpu_op("backward", base + loader + 200, 800 - loader - 200, cat="user_annotation"),
            cpu_op("optimizer", base + 800, 100, cat="user_annotation"),
            cpu_op("gloo:all_reduce", base + loader + 300, 800 - loader - 300, tid=2, cat="user_annotation"),
            cpu_op("c10d::allreduce_", base + loader + 250, 5),
        ]
    return events


SLOW_GEMM_RANK = 1
ALLREDUCE_ARGS: dict[str, Any] = {
    "Collective name": "allreduce",
    "In msg nelems": 1_000_000,
    "Out msg nelems": 1_000_000,
    "Group size": 3,
    "dtype": "Float",
    "Process Group Name": "0",
}


def nccl_rank(rank: int) -> list[Event]:
    """A 3-rank NCCL job, 3 steps of 1000 µs at B: forward [B, B+100) launches a gemm (corr 1)
    and an all_reduce (corr 2). The gemm runs [B+100, B+100+G) with G = 200 (500 on rank 1);
    the NCCL kernel starts when the gemm ends (B+300, or B+600 on rank 1) and ends at B+700."""
    gemm = 500.0 if rank == SLOW_GEMM_RANK else 200.0
    events: list[Event] = []
    for n in (1, 2, 3):
        base = (n - 1) * 1000.0
        c1, c2 = 10 * n + 1, 10 * n + 2
        events += [
            step(n, base, 1000),
            cpu_op("forward", base, 100, cat="user_annotation"),
            runtime("cudaLaunchKernel", base + 10, 5, c1),
            runtime("cudaLaunchKernel", base + 20, 5, c2),
            kernel("sm80_xmma_gemm_f32", base + 100, gemm, corr=c1),
            kernel(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                base + 100 + gemm,
                600 - gemm,
                corr=c2,
                **ALLREDUCE_ARGS,
            ),
        ]
    return events


def skewed_rank(rank: int) -> list[Event]:
    """4 ranks, one step [0, 1000). Two all_reduces (NCCL ≥ 2.19 names, no args): the first
    arrives at 100, 150, 400, 200 (rank 2 last) and ends at 500; the second arrives at 600 on
    every rank and ends at 700."""
    arrival = [100.0, 150.0, 400.0, 200.0][rank]
    name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    return [
        step(1, 0, 1000),
        runtime("cudaLaunchKernel", 10, 5, 1),
        runtime("cudaLaunchKernel", 20, 5, 2),
        kernel(name, arrival, 500 - arrival, corr=1),
        kernel(name, 600, 100, corr=2),
    ]


SLOW_SHM_RANK = 1


def shm_rank(rank: int, collective: str = "_C::shm_allreduce") -> list[Event]:
    """A 2-rank vLLM CPU job (tensor parallel over shared memory, no GPU), 3 steps of 1000 µs at B.

    Each step: `aten::mm` [B, B+A) with A = 200 (500 on rank 1), then `collective` from B+A to
    B+600 (the last rank arrives at B+500, + 100 of work), `aten::mm` [B+600, B+800) and a second
    `collective` [B+800, B+900) that both ranks reach together. Rank 0 waits 300 µs a step for
    rank 1 in the first one. Step 3 is the last and is left out: steps 1 and 2 are analysed.
    """
    attention = 500.0 if rank == SLOW_SHM_RANK else 200.0
    events: list[Event] = []
    for n in (1, 2, 3):
        base = (n - 1) * 1000.0
        events += [
            step(n, base, 1000),
            cpu_op("aten::mm", base, attention),
            cpu_op(collective, base + attention, 600 - attention),
            cpu_op("aten::mm", base + 600, 200),
            cpu_op(collective, base + 800, 100),
        ]
    return events
