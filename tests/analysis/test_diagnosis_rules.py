"""Each Diagnosis rule on a hand-built trace that triggers it and one that must not.

Jobs of 3 ProfilerSteps of S µs (the last left out, as in every view): the numbers counted are
steps 1 and 2's, per step. Each finding's `estimate_us` is the time its change acts on per step
(× (1 − factor) where the change makes it faster rather than removing it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kineto_util import cpu_op, device, kernel, runtime, step, traces_of, write_trace
from memory_util import memory_event
from ranks_jobs import SLOW_RANK, gloo_rank, nccl_rank

from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.core.scope import Scope
from htatui.analysis.diagnosis import DiagnosisOptions
from htatui.analysis.registry import BY_ID, frame_of, make_table
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

Event = dict[str, Any]
S = 1000.0
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
GEMM = "sm80_xmma_gemm_bf16bf16_bf16f32"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def job(tmp_path: Path, make: Callable[[int, float], list[Event]], *, ranks: int = 1, step_us: float = S) -> TraceSet:
    """`ranks` ranks of 3 steps of `step_us`; `make(n, base)` gives step n's events from `base`."""
    return traces_of(
        tmp_path,
        *[
            [event for n in (1, 2, 3) for event in (step(n, (n - 1) * step_us, step_us), *make(n, (n - 1) * step_us))]
            for _ in range(ranks)
        ],
    )


def findings(traces: TraceSet, rules: Rules = SHIPPED_RULES) -> dict[str, dict[str, Any]]:
    """The diagnosis' findings by rule (the first of each rule) under `rules`."""
    view = BY_ID["diagnosis"]
    frame = frame_of(make_table(view.main, traces, DiagnosisOptions(Scope(rules=rules))))[0]
    out: dict[str, dict[str, Any]] = {}
    for row in frame.to_dicts():
        out.setdefault(row["rule"], row)
    return out


# ---- straggler and exposed communication ----------------------------------------------------
def test_straggler_is_the_ranks_pages_straggler_and_its_phase(tmp_path: Path) -> None:
    """ranks_jobs.gloo_rank: the fast ranks arrive at the all_reduce at B+400, rank 2 (data_loader
    400 µs, not 100) at B+700: each other rank waits 300 µs, rank 2 delays them the median, 300 µs a
    call, 600 over steps 1-2: 300 µs a step, 30 % of the 1000-µs step. Its data_loader: 800 µs
    against the others' 200: +600."""
    traces = traces_of(tmp_path, *[gloo_rank(rank) for rank in range(4)])
    found = findings(traces)["straggler"]
    assert found["rank"] == SLOW_RANK
    assert found["estimate_us"] == pytest.approx(300.0)
    assert found["estimate_pct"] == pytest.approx(30.0)
    assert found["what"] == "rank 2 holds up the other ranks: its data_loader runs 600 µs past theirs"
    assert found["where"] == "rank 2 · steps 1-2 · data_loader"
    assert "loads its data slower" in found["change"]
    assert (found["page"], found["table"], json.loads(found["row"])) == ("ranks", "stragglers", {"rank": 2})
    assert found["what_if"] == "rank 2 at the median's pace"


def test_no_straggler_when_the_ranks_run_alike(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *[gloo_rank(0) for _ in range(4)])
    assert "straggler" not in findings(traces)


def test_exposed_comm_is_the_transfer_of_the_rank_that_waits_least(tmp_path: Path) -> None:
    """ranks_jobs.nccl_rank: the all_reduce kernel runs alone [B+300, B+700) on ranks 0 and 2 (their
    gemm ends at B+300) and [B+600, B+700) on rank 1 (whose gemm ends there): 100 µs a step on rank 1,
    10 % of the step; the what-if halves it: estimate 50 µs."""
    traces = traces_of(tmp_path, *[nccl_rank(rank) for rank in range(3)])
    found = findings(traces)["exposed_comm"]
    assert found["rank"] == 1
    assert found["estimate_us"] == pytest.approx(50.0)
    assert "100 µs a step (10.0 % of the step)" in found["what"]
    assert "(the most: rank 2, 400 µs)" in found["evidence"]
    assert (found["page"], found["table"]) == ("kernels", "kernel-types")
    assert json.loads(found["row"]) == {"rank": "1", "kernel_type": "COMMUNICATION"}


def test_no_exposed_comm_when_computation_hides_it(tmp_path: Path) -> None:
    """The all_reduce [B+200, B+600) runs inside the gemm [B+100, B+700): nothing is exposed."""

    def make(n: int, base: float) -> list[Event]:
        c = 10 * n
        return [
            runtime("cudaLaunchKernel", base + 1, 2, c),
            runtime("cudaLaunchKernel", base + 4, 2, c + 1),
            kernel(GEMM, base + 100, 600, corr=c),
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", base + 200, 400, corr=c + 1, stream=8),
        ]

    assert "exposed_comm" not in findings(job(tmp_path, make))


# ---- the host ---------------------------------------------------------------------------------
def spaced_kernels(count: int, every: float, dur: float) -> Callable[[int, float], list[Event]]:
    """`count` launches a step, one each `every` µs (5 µs calls), each kernel `dur` µs from 10 µs after."""

    def make(n: int, base: float) -> list[Event]:
        events = []
        for i in range(count):
            c = 10_000 * n + i
            events += [
                runtime("cudaLaunchKernel", base + every * i, 5, c),
                kernel("k", base + every * i + 10, dur, corr=c),
            ]
        return events

    return make


def test_host_bound_counts_the_gpu_waiting_for_launches(tmp_path: Path) -> None:
    """10 kernels of 10 µs a step, launched 100 µs apart: the GPU span of steps 1-2 is [10, 1920),
    busy 200, idle 1710 (89.5 %), every gap host wait (each launch starts after the kernel before
    ended): 855 µs a step; the what-if halves it: estimate 427.5 µs."""
    found = findings(job(tmp_path, spaced_kernels(10, 100, 10)))["host_bound"]
    assert found["estimate_us"] == pytest.approx(427.5)
    assert (
        found["what"] == "the GPU waits for the host: idle 90 % of the time, 100 % of that for the host to launch work"
    )
    assert json.loads(found["row"]) == {"rank": 0, "stream": 7}
    assert (found["page"], found["table"]) == ("idle", "idle --by-stream")


def test_no_host_bound_when_the_gpu_is_kept_busy(tmp_path: Path) -> None:
    """10 kernels of 95 µs back to back, all launched at the step's start: idle 50 of 1950 µs (2.6 %)."""

    def make(n: int, base: float) -> list[Event]:
        events = []
        for i in range(10):
            c = 100 * n + i
            events += [runtime("cudaLaunchKernel", base + i, 1, c), kernel("k", base + 10 + 95 * i, 95, corr=c)]
        return events

    assert "host_bound" not in findings(job(tmp_path, make))


def test_kernel_storm_counts_the_bubbles_before_short_kernels(tmp_path: Path) -> None:
    """250 launches a step of 10 ms (5 µs calls: 12.5 % of the step), kernels of 2 µs 40 µs apart:
    each waits 38 µs after the one before (the trace's first kernel has none before it): 499 × 38 µs
    over 2 steps = 9481 µs a step; halved: estimate 4740.5 µs."""
    found = findings(job(tmp_path, spaced_kernels(250, 40, 2), step_us=10_000))["kernel_storm"]
    assert found["estimate_us"] == pytest.approx(499 * 38 / 2 / 2)
    assert found["what"] == "a storm of small kernels: 250 launches a step, half of them under 2.0 µs on the GPU"
    assert (found["page"], found["table"], json.loads(found["row"])) == ("launch", "launch --summary", {"rank": 0})


def test_no_kernel_storm_with_few_launches(tmp_path: Path) -> None:
    assert "kernel_storm" not in findings(job(tmp_path, spaced_kernels(50, 40, 2), step_us=10_000))


def sync_step(queued_before_sync: bool) -> Callable[[int, float], list[Event]]:
    """k1 [B+10, B+410); a cudaStreamSynchronize [B+20, B+412); k2 200 µs, launched after the
    sync (at B+612, running from B+615) or before it (running from B+410)."""

    def make(n: int, base: float) -> list[Event]:
        c = 10 * n
        k2 = [runtime("cudaLaunchKernel", base + 8, 2, c + 1), kernel("k2", base + 410, 200, corr=c + 1)]
        if not queued_before_sync:
            k2 = [runtime("cudaLaunchKernel", base + 612, 3, c + 1), kernel("k2", base + 615, 200, corr=c + 1)]
        return [
            runtime("cudaLaunchKernel", base + 5, 3, c),
            kernel("k1", base + 10, 400, corr=c),
            runtime("cudaStreamSynchronize", base + 20, 392, c + 2),
            *k2,
        ]

    return make


def test_sync_counts_the_gpu_idle_after_it(tmp_path: Path) -> None:
    """The sync returns at B+412 with the GPU idle since B+410; k2 starts at B+615: 203 µs a step of
    idle after it, which removing the sync (factor 0) estimate:."""
    found = findings(job(tmp_path, sync_step(queued_before_sync=False)))["sync"]
    assert found["estimate_us"] == pytest.approx(203.0)
    assert "1 times a step (cudaStreamSynchronize" in found["what"]
    assert "392 µs a step in synchronising calls" in found["evidence"]
    assert (found["page"], found["table"], json.loads(found["row"])) == (
        "ops",
        "ops",
        {"rank": 0, "name": "cudaStreamSynchronize"},
    )


def test_no_sync_finding_when_work_is_queued_behind_it(tmp_path: Path) -> None:
    assert "sync" not in findings(job(tmp_path, sync_step(queued_before_sync=True)))


def copy_step(name: str) -> Callable[[int, float], list[Event]]:
    def make(n: int, base: float) -> list[Event]:
        return [runtime("cudaMemcpyAsync", base + 5, 5, n), device("gpu_memcpy", name, base + 20, 50, corr=n)]

    return make


def test_pageable_copy(tmp_path: Path) -> None:
    """One 50 µs copy from pageable memory a step (5 %); the what-if halves it: estimate 25 µs."""
    found = findings(job(tmp_path, copy_step("Memcpy HtoD (Pageable -> Device)")))["pageable_copy"]
    assert found["estimate_us"] == pytest.approx(25.0)
    assert found["what"] == "copies to or from pageable host memory: 1 a step, 50 µs on the GPU"
    assert json.loads(found["row"]) == {"rank": 0, "name": "Memcpy HtoD (Pageable -> Device)"}


def test_no_pageable_copy_from_pinned_memory(tmp_path: Path) -> None:
    assert "pageable_copy" not in findings(job(tmp_path, copy_step("Memcpy HtoD (Pinned -> Device)")))


def loader_step(loader_us: float) -> Callable[[int, float], list[Event]]:
    """The data loader [B, B+loader) first in the step, then a kernel [B+220, B+900)."""

    def make(n: int, base: float) -> list[Event]:
        return [
            cpu_op(LOADER, base, loader_us, cat="user_annotation"),
            runtime("cudaLaunchKernel", base + 210, 5, n),
            kernel("k", base + 220, 680, corr=n),
        ]

    return make


def test_data_loader_counts_the_gpu_idle_while_it_loads(tmp_path: Path) -> None:
    """200 µs of the 1000-µs step (20 %), the GPU idle all of it (step 1: nothing ran yet; step 2:
    the kernel before ended at 900): removing it (factor 0) estimate: 200 µs."""
    found = findings(job(tmp_path, loader_step(200)))["data_loader"]
    assert found["estimate_us"] == pytest.approx(200.0)
    assert found["what"] == "the data loader takes 20.0 % of the step (200 µs)"
    assert (found["page"], found["table"], json.loads(found["row"])) == ("ranks", "rank-steps", {"rank": 0, "step": 1})


def test_no_data_loader_finding_under_five_percent(tmp_path: Path) -> None:
    assert "data_loader" not in findings(job(tmp_path, loader_step(20)))


def test_step_gaps_are_the_idle_at_the_steps_edges(tmp_path: Path) -> None:
    """A kernel [B+300, B+700) alone in each step: 300 µs idle before it and 300 after, 60 %."""

    def make(n: int, base: float) -> list[Event]:
        return [runtime("cudaLaunchKernel", base + 290, 5, n), kernel("k", base + 300, 400, corr=n)]

    found = findings(job(tmp_path, make))["step_gaps"]
    assert found["estimate_us"] == pytest.approx(600.0)
    assert "300 µs a step from the step's start to its first GPU work, 300 µs from" in found["evidence"]
    assert json.loads(found["row"]) == {"rank": 0, "step": 1}


def test_step_gaps_leave_the_data_loaders_time_to_its_rule(tmp_path: Path) -> None:
    """The data loader [B, B+200) first, then a kernel [B+300, B+700): of the 300 µs before the
    kernel, 200 are the loader's (the data_loader rule's), so the edges hold 100 + 300 µs, 40 %."""

    def make(n: int, base: float) -> list[Event]:
        return [
            cpu_op(LOADER, base, 200, cat="user_annotation"),
            runtime("cudaLaunchKernel", base + 290, 5, n),
            kernel("k", base + 300, 400, corr=n),
        ]

    found = findings(job(tmp_path, make))["step_gaps"]
    assert found["estimate_us"] == pytest.approx(400.0)
    assert "100 µs a step from the step's start to its first GPU work, 300 µs from" in found["evidence"]


def test_no_step_gaps_when_the_gpu_works_edge_to_edge(tmp_path: Path) -> None:
    def make(n: int, base: float) -> list[Event]:
        return [runtime("cudaLaunchKernel", base + 1, 3, n), kernel("k", base + 5, 990, corr=n)]

    assert "step_gaps" not in findings(job(tmp_path, make))


# ---- the GPU's own work ------------------------------------------------------------------------
def compute_step(gemm_us: float, elementwise_us: float) -> Callable[[int, float], list[Event]]:
    def make(n: int, base: float) -> list[Event]:
        c = 10 * n
        return [
            runtime("cudaLaunchKernel", base + 1, 3, c),
            runtime("cudaLaunchKernel", base + 5, 3, c + 1),
            kernel(GEMM, base + 10, gemm_us, corr=c),
            kernel(ELEMENTWISE, base + 10 + gemm_us, elementwise_us, corr=c + 1),
        ]

    return make


def test_gpu_compute_names_the_largest_kernel_family(tmp_path: Path) -> None:
    """A 700 µs GEMM and a 100 µs elementwise kernel a step: the GPU computes 1600 of its 1800-µs
    span (88.9 %); GEMM takes 700 µs a step, 70 %; the what-if (20 % faster) estimate: 140 µs."""
    found = findings(job(tmp_path, compute_step(700, 100)))["gpu_compute"]
    assert found["estimate_us"] == pytest.approx(140.0)
    assert found["what"] == (
        "the step is bound by GPU compute, and GEMM kernels take the most of it: 700 µs a step (70 %)"
    )
    assert json.loads(found["row"]) == {"rank": 0, "name": GEMM}


def test_no_gpu_compute_finding_when_the_gpu_mostly_waits(tmp_path: Path) -> None:
    """100 + 50 µs of kernels a step: the GPU computes 300 of its 1150-µs span (26 %)."""
    assert "gpu_compute" not in findings(job(tmp_path, compute_step(100, 50)))


def mm_step(dtype: str, kernel_us: float) -> Callable[[int, float], list[Event]]:
    """aten::mm of two 4096² matrices (2·4096³ FLOP) launching one kernel of `kernel_us`, named as
    cuBLAS names its kernel for that dtype (the roofline reads a GEMM's dtype from its kernel)."""
    name = "ampere_sgemm_128x64_nn" if dtype == "float" else GEMM

    def make(n: int, base: float) -> list[Event]:
        mm = cpu_op("aten::mm", base, 20)
        mm["args"].update({"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": [dtype, dtype]})
        return [mm, runtime("cudaLaunchKernel", base + 2, 5, n), kernel(name, base + 30, kernel_us, corr=n)]

    return make


@pytest.fixture
def h100_peaks(tmp_path_factory: pytest.TempPathFactory) -> Rules:
    """The test traces' "Test GPU" with an H100 SXM's roofs (fp32 67, TF32 494.7, bf16 989.4 TFLOP/s)."""
    peaks = tmp_path_factory.mktemp("peaks") / "peaks.toml"
    peaks.write_text(
        '[[device]]\nname = "Test"\nmatch = "Test GPU"\nmemory_tbps = 3.35\n'
        "tflops = { fp32 = 67.0, tf32 = 494.7, bf16 = 989.4 }\n"
    )
    return Rules(peaks_files=(str(peaks),))


def test_gemm_roof_finds_fp32_matmuls_off_the_tensor_cores(tmp_path: Path, h100_peaks: Rules) -> None:
    """2·4096³ = 137.44 GFLOP in 10 ms: 13.74 TFLOP/s, 20.5 % of the fp32 roof (67, no tensor cores),
    10 ms of a 20-ms step; at 70 % of the roof it would take 2.93 ms: estimate 7.07 ms saved."""
    found = findings(job(tmp_path, mm_step("float", 10_000), step_us=20_000), h100_peaks)["gemm_roof"]
    pct = 100 * 2 * 4096**3 / 10_000e-6 / 1e12 / 67.0
    assert pct == pytest.approx(20.51, abs=0.01)
    assert found["estimate_us"] == pytest.approx(10_000 * (1 - pct / 70))
    assert found["what"] == "matrix multiplies run in fp32 without tensor cores: 10,000 µs a step"
    assert "set_float32_matmul_precision" in found["change"]
    assert json.loads(found["row"]) == {"rank": 0, "name": "aten::mm"}


def test_no_gemm_roof_finding_for_a_bf16_matmul_near_its_roof(tmp_path: Path, h100_peaks: Rules) -> None:
    """The same mm in bf16 in 200 µs: 687 TFLOP/s, 69 % of 989.4."""
    assert "gemm_roof" not in findings(job(tmp_path, mm_step("c10::BFloat16", 200), step_us=20_000), h100_peaks)


def chains_step(chain: int) -> Callable[[int, float], list[Event]]:
    """5 chains a step of `chain` elementwise kernels of 20 µs back to back, each after a 50-µs GEMM."""

    def make(n: int, base: float) -> list[Event]:
        events: list[Event] = []
        t = base + 10
        for _ in range(5):
            events.append(kernel(GEMM, t, 50))
            t += 50
            for _ in range(chain):
                events.append(kernel(ELEMENTWISE, t, 20))
                t += 20
        return events

    return make


def test_fusion_finds_chains_of_small_elementwise_kernels(tmp_path: Path) -> None:
    """5 chains of 5 × 20 µs a step: 500 µs (50 %); fused, half of it: estimate 250 µs."""
    found = findings(job(tmp_path, chains_step(5)))["fusion"]
    assert found["estimate_us"] == pytest.approx(250.0)
    assert found["what"] == "chains of small memory-bound kernels: 5 a step, 500 µs (50.0 % of the step)"
    assert "5.0 kernels a chain" in found["evidence"]


def test_no_fusion_finding_for_chains_of_three(tmp_path: Path) -> None:
    assert "fusion" not in findings(job(tmp_path, chains_step(3)))


# ---- memory -----------------------------------------------------------------------------------
MIB = 2**20


def memory_job(tmp_path: Path, *, reserved: int, leak: bool, capacity: int = 80 * 1024 * MIB) -> TraceSet:
    """3 steps of 1000 µs, a 100-MiB allocation at B+10 of each, freed at B+500 unless `leak`."""
    events: list[Event] = []
    live = 0
    for n in (1, 2, 3):
        base = (n - 1) * S
        live += 100 * MIB
        events += [step(n, base, S), memory_event(base + 10, 100 * MIB, live, 1000 + n, reserved=reserved)]
        if not leak:
            live -= 100 * MIB
            events.append(memory_event(base + 500, -100 * MIB, live, 1000 + n, reserved=reserved))
    properties = [{"id": 0, "name": "Test GPU", "numSms": 108, "totalGlobalMem": capacity}]
    write_trace(tmp_path / "rank-0.json", events, rank=0, extra={"deviceProperties": properties})
    return load_traces([tmp_path], use_cache=False, max_workers=1)


def test_memory_near_the_devices_capacity(tmp_path: Path) -> None:
    """950 MiB reserved on a 1000-MiB device: 95 % ≥ 90 %."""
    found = findings(memory_job(tmp_path, reserved=950 * MIB, leak=False, capacity=1000 * MIB))["memory"]
    assert found["what"] == "memory is close to the device's capacity: 0.9 of 1.0 GiB at the peak"
    assert found["where"] == "rank 0 · cuda:0"
    assert (found["page"], found["table"], json.loads(found["row"])) == ("memory", "", {"device": "cuda:0"})
    assert found["estimate_us"] == 0.0 and found["what_if"] == "not modelled"


def test_memory_growing_every_step(tmp_path: Path) -> None:
    """Live memory at the step starts: 0, 100, 200 MiB (never freed): +200 MiB, a probable leak."""
    found = findings(memory_job(tmp_path, reserved=400 * MIB, leak=True))["memory"]
    assert found["what"] == "live memory grows every step: +200 MiB over 3 steps (a probable leak)"


def test_no_memory_finding_when_memory_is_freed_and_roomy(tmp_path: Path) -> None:
    assert "memory" not in findings(memory_job(tmp_path, reserved=400 * MIB, leak=False))
