"""patterns view on hand-built traces (numbers derived in the comments), plus parity with numbers
that HTA 0.6.1 produced on ../shared/traces (recorded as literals; skipped without the traces)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, runtime, write_trace

from htatui.analysis.core.scope import Scope
from htatui.analysis.views import patterns
from htatui.analysis.views.patterns import PatternsOptions
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet


def load(path: Path) -> TraceSet:
    return load_traces([path], use_cache=False, max_workers=1)


def gpu(cat: str, name: str, ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": corr},
    }


class Trace:
    """Builds an event list and remembers each event's position (= its `index` in the file)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.at: dict[str, int] = {}

    def add(self, label: str, event: dict[str, Any]) -> None:
        self.at[label] = len(self.events)
        self.events.append(event)

    def indices(self, *labels: str) -> list[int]:
        return sorted(self.at[label] for label in labels)


def linear_job() -> Trace:
    """Host thread (pid 100, tid 1), GPU stream 7; no ProfilerStep, so nothing is filtered.

    "## forward ##" [0, 700] is the depth-0 parent of everything:
      L1 aten::linear [10, 110]: aten::t [12, 17]; aten::addmm [20, 90] with launches
         corr 1 → gemm [40, 60], corr 2 → bias [61, 65], memset call corr 3 → Memset [66, 68]
         pattern "aten::linear|gemm|bias|Memset (Device)", GPU 20+4+2 = 26, CPU 100
      L2 aten::linear [200, 250]: corr 4 → gemm [220, 230], 5 → bias [231, 233], 6 → Memset [234, 235]
         same pattern, GPU 10+2+1 = 13, CPU 50
      L3 aten::linear [300, 340]: corr 7 → gemm [312, 320], 8 → relu [321, 324], 9 → bias [325, 327],
         and a cudaStreamSynchronize corr 18 → "Stream Sync" (cuda_sync) [330, 336]
         default: "aten::linear|gemm|relu|bias", GPU 8+3+2 = 13, CPU 40
         compat (HTA counts any stream > 0 row): "...|bias|Stream Sync", GPU 13+6 = 19
      L4 aten::linear [400, 420]: corr 10 → gemm [410, 415], 11 → bias [416, 417] (2 kernels)
         "aten::linear|gemm|bias", GPU 6, CPU 20 — only with min_len ≤ 2
      checkpoint [500, 560] > L5 aten::linear [505, 555] with corr 12-14: depth 2, deeper than
         the other candidates (depth 1), so never a root
      F aten::linear_fused [600, 630] (the name contains "aten::linear"): corr 15 → k1, 16 → k2,
         17 → k3 (each 1 µs at 610, 612, 614): "aten::linear_fused|k1|k2|k3", GPU 3, CPU 30
    Sorting: count desc, then text; "aten::linear_" < "aten::linear|" because '_' < '|'.
    """
    t = Trace()
    t.add("fwd", cpu_op("## forward ##", 0, 700, cat="user_annotation"))
    t.add("L1", cpu_op("aten::linear", 10, 100))
    t.add("L1.t", cpu_op("aten::t", 12, 5))
    t.add("L1.addmm", cpu_op("aten::addmm", 20, 70))
    t.add("L1.r1", runtime("cudaLaunchKernel", 25, 5, 1))
    t.add("L1.r2", runtime("cudaLaunchKernel", 35, 5, 2))
    t.add("L1.r3", runtime("cudaMemsetAsync", 45, 3, 3))
    t.add("L1.k1", kernel("gemm", 40, 20, corr=1))
    t.add("L1.k2", kernel("bias", 61, 4, corr=2))
    t.add("L1.k3", gpu("gpu_memset", "Memset (Device)", 66, 2, 3))
    t.add("L2", cpu_op("aten::linear", 200, 50))
    t.add("L2.r1", runtime("cudaLaunchKernel", 210, 5, 4))
    t.add("L2.r2", runtime("cudaLaunchKernel", 216, 5, 5))
    t.add("L2.r3", runtime("cudaMemsetAsync", 222, 2, 6))
    t.add("L2.k1", kernel("gemm", 220, 10, corr=4))
    t.add("L2.k2", kernel("bias", 231, 2, corr=5))
    t.add("L2.k3", gpu("gpu_memset", "Memset (Device)", 234, 1, 6))
    t.add("L3", cpu_op("aten::linear", 300, 40))
    t.add("L3.r1", runtime("cudaLaunchKernel", 305, 5, 7))
    t.add("L3.r2", runtime("cudaLaunchKernel", 311, 5, 8))
    t.add("L3.r3", runtime("cudaLaunchKernel", 317, 5, 9))
    t.add("L3.r4", runtime("cudaStreamSynchronize", 325, 12, 18))
    t.add("L3.k1", kernel("gemm", 312, 8, corr=7))
    t.add("L3.k2", kernel("relu", 321, 3, corr=8))
    t.add("L3.k3", kernel("bias", 325, 2, corr=9))
    t.add("L3.sync", gpu("cuda_sync", "Stream Sync", 330, 6, 18))
    t.add("L4", cpu_op("aten::linear", 400, 20))
    t.add("L4.r1", runtime("cudaLaunchKernel", 405, 3, 10))
    t.add("L4.r2", runtime("cudaLaunchKernel", 409, 3, 11))
    t.add("L4.k1", kernel("gemm", 410, 5, corr=10))
    t.add("L4.k2", kernel("bias", 416, 1, corr=11))
    t.add("ckpt", cpu_op("checkpoint", 500, 60))
    t.add("L5", cpu_op("aten::linear", 505, 50))
    for i, corr in enumerate((12, 13, 14)):
        t.add(f"L5.r{i}", runtime("cudaLaunchKernel", 510 + 10 * i, 3, corr))
        t.add(f"L5.k{i}", kernel("deep", 540 + 3 * i, 2, corr=corr))
    t.add("F", cpu_op("aten::linear_fused", 600, 30))
    for i, corr in enumerate((15, 16, 17)):
        t.add(f"F.r{i}", runtime("cudaLaunchKernel", 601 + 2 * i, 1, corr))
        t.add(f"F.k{i}", kernel(f"k{i + 1}", 610 + 2 * i, 1, corr=corr))
    return t


@pytest.fixture
def job(tmp_path: Path) -> tuple[Trace, TraceSet]:
    t = linear_job()
    return t, load(write_trace(tmp_path / "rank-0.json", t.events, rank=0))


TOP = ("aten::linear|gemm|bias|Memset (Device)", 2, 39.0, 150.0)
FUSED = ("aten::linear_fused|k1|k2|k3", 1, 3.0, 30.0)
RELU = ("aten::linear|gemm|relu|bias", 1, 13.0, 40.0)
SHORT = ("aten::linear|gemm|bias", 1, 6.0, 20.0)


def test_patterns_default(job: tuple[Trace, TraceSet]) -> None:
    _, traces = job
    frame = patterns.compute(traces, PatternsOptions())
    assert frame.schema == pl.Schema(patterns.COLUMNS)
    # L1 + L2 share a pattern (26 + 13 GPU, 100 + 50 CPU); L4 has 2 kernels < 3; L5 is deeper.
    assert frame.rows() == [TOP, FUSED, RELU]


def test_min_len_and_top_k(job: tuple[Trace, TraceSet]) -> None:
    _, traces = job
    assert patterns.compute(traces, PatternsOptions(min_len=2)).rows() == [TOP, FUSED, SHORT, RELU]
    assert patterns.compute(traces, PatternsOptions(min_len=2, top_k=2)).rows() == [TOP, FUSED]
    assert patterns.compute(traces, PatternsOptions(min_len=4)).height == 0
    assert patterns.compute(traces, PatternsOptions(top_k=None)).height == 3


def test_the_kept_call_stack_holds_what_the_matching_reads(job: tuple[Trace, TraceSet]) -> None:
    # The call stack is kept on the job while the page shows (a new operator redoes only the
    # matching): its matching columns, and the events only where compat matching reads them.
    _, traces = job
    job_of_its_own = TraceSet(ranks=traces.ranks)
    for compat in (False, True):
        patterns.compute(job_of_its_own, PatternsOptions(scope=Scope(hta_compat=compat)))
        kept = [v for k, v in job_of_its_own.derived.items() if k[0] == "patterns.stack" and k[2] is compat]
        assert len(kept) == 1
        events, stack, _links = kept[0]
        assert tuple(stack.columns) == patterns._MATCH_READS and stack.height > 0
        assert tuple(events.columns) == patterns._COMPAT_READS
        assert (events.height > 0) is compat


def test_compat_counts_sync_rows(job: tuple[Trace, TraceSet]) -> None:
    _, traces = job
    frame = patterns.compute(traces, PatternsOptions(scope=Scope(hta_compat=True)))
    # HTA's GPU rows are any rows with a stream > 0: L3's Stream Sync (6 µs at 330) joins its pattern.
    assert frame.rows() == [TOP, FUSED, ("aten::linear|gemm|relu|bias|Stream Sync", 1, 19.0, 40.0)]


def test_operator_substring_and_depth(job: tuple[Trace, TraceSet]) -> None:
    _, traces = job
    # Only "checkpoint" contains "point": depth 1, 3 kernels beneath it (L5's).
    assert patterns.compute(traces, PatternsOptions(operator="point")).rows() == [
        ("checkpoint|deep|deep|deep", 1, 6.0, 60.0)
    ]
    # "addmm" exists only under L1 with 2 kernels + 1 memset.
    assert patterns.compute(traces, PatternsOptions(operator="aten::addmm")).rows() == [
        ("aten::addmm|gemm|bias|Memset (Device)", 1, 26.0, 70.0)
    ]


def test_pattern_indices(job: tuple[Trace, TraceSet]) -> None:
    t, traces = job
    frame = patterns.pattern_indices(traces, PatternsOptions(top_k=2))
    assert frame.schema == pl.Schema(patterns.INDICES_COLUMNS)
    top = [f"L1{s}" for s in ("", ".t", ".addmm", ".r1", ".r2", ".r3", ".k1", ".k2", ".k3")]
    top += [f"L2{s}" for s in ("", ".r1", ".r2", ".r3", ".k1", ".k2", ".k3")]
    fused = ["F", "F.r0", "F.r1", "F.r2", "F.k0", "F.k1", "F.k2"]
    assert frame.rows() == [(TOP[0], 2, t.indices(*top)), (FUSED[0], 1, t.indices(*fused))]


def test_empty_cases(job: tuple[Trace, TraceSet], tmp_path: Path) -> None:
    _, traces = job
    for options in (
        PatternsOptions(operator="aten::conv2d"),
        PatternsOptions(operator=""),
        PatternsOptions(rank=3),
        PatternsOptions(scope=Scope(ranks=(5,))),
    ):
        frame = patterns.compute(traces, options)
        assert frame.height == 0 and frame.schema == pl.Schema(patterns.COLUMNS)
        assert patterns.pattern_indices(traces, options).schema == pl.Schema(patterns.INDICES_COLUMNS)
    cpu_only = load(write_trace(tmp_path / "cpu" / "rank-0.json", [cpu_op("aten::linear", 0, 10)], rank=0))
    assert patterns.compute(cpu_only, PatternsOptions(min_len=0)).rows() == [("aten::linear", 1, 0.0, 10.0)]
    assert patterns.compute(cpu_only, PatternsOptions()).height == 0


def test_rank_option_picks_the_rank(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    a = linear_job()
    write_trace(folder / "rank-0.json", [cpu_op("aten::linear", 0, 10)], rank=0)
    write_trace(folder / "rank-1.json", a.events, rank=1)
    traces = load_traces([folder], use_cache=False, max_workers=1)
    assert patterns.compute(traces, PatternsOptions()).height == 0  # first rank (0) has no kernels
    assert patterns.compute(traces, PatternsOptions(rank=1)).rows()[0] == TOP
    assert patterns.compute(traces, PatternsOptions(scope=Scope(ranks=(1,)))).rows()[0] == TOP


def test_backward_thread_hangs_under_backward_annotation(tmp_path: Path) -> None:
    """Main thread tid 1: ProfilerStep#1 [0, 300] > "## backward ##" [100, 300].
    Backward thread tid 2: "autograd::engine::evaluate_function: MmBackward0" [120, 200] >
    aten::mm [130, 190] > cudaLaunchKernel corr 1 → mm_bwd [150, 160] and corr 2 → mm_bwd2 [161, 171].
    Linked as in HTA, the annotation's pattern holds the backward thread's kernels:
    "## backward ##|mm_bwd|mm_bwd2", GPU 20, CPU 200. Without the link it would have none.
    aten::mm: depth 2 on its thread + 2 (annotation depth 1 + 1) = 4; it is the only candidate.
    """
    events = [
        cpu_op("ProfilerStep#1", 0, 300, cat="user_annotation"),
        cpu_op("## backward ##", 100, 200, cat="user_annotation"),
        cpu_op("autograd::engine::evaluate_function: MmBackward0", 120, 80, tid=2),
        cpu_op("aten::mm", 130, 60, tid=2),
        runtime("cudaLaunchKernel", 140, 5, 1, tid=2),
        runtime("cudaLaunchKernel", 146, 5, 2, tid=2),
        kernel("mm_bwd", 150, 10, corr=1),
        kernel("mm_bwd2", 161, 10, corr=2),
    ]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    options = PatternsOptions(operator="## backward ##", min_len=1)
    assert patterns.compute(traces, options).rows() == [("## backward ##|mm_bwd|mm_bwd2", 1, 20.0, 200.0)]
    assert patterns.pattern_indices(traces, options)["indices"].to_list() == [[1, 2, 3, 4, 5, 6, 7]]
    assert patterns.compute(traces, PatternsOptions(operator="aten::mm", min_len=2)).rows() == [
        ("aten::mm|mm_bwd|mm_bwd2", 1, 20.0, 60.0)
    ]


# --------------------------------------------------------------------------- parity with HTA 0.6.1

ALEXNET_PATTERN = (
    "aten::linear|Memset (Device)|ampere_sgemm_32x32_sliced1x4_tn|void epilogue::impl::globalKernel"
    "<float, float, float, true, true>(int, int, long, float*, cublasLtEpilogue_t, int, float*, long, "
    "void*, long, long, long, float*, long, int*)"
)


@pytest.mark.parametrize("compat", [False, True])
def test_parity_alexnet(load_shared: Any, compat: bool) -> None:
    # HTA: TraceAnalysis(trace_dir="critical_path/alexnet").get_frequent_cuda_kernel_sequences(
    #   "aten::linear", output_dir, min_pattern_len=3, rank=0, top_k=5) → one row:
    #   count 2, "GPU kernel duration (us)" 208.0, "CPU op duration (us)" 10652.0
    traces = load_shared("critical_path/alexnet")
    frame = patterns.compute(traces, PatternsOptions(scope=Scope(hta_compat=compat)))
    assert frame.rows() == [(ALEXNET_PATTERN, 2, 208.0, 10652.0)]


@pytest.mark.parametrize("compat", [False, True])
def test_parity_trace_diff_control(load_shared: Any, compat: bool) -> None:
    traces = load_shared("trace_diff/control")
    # HTA: get_frequent_cuda_kernel_sequences("aten::linear", out, min_pattern_len=3, rank=3,
    #   top_k=5) → one row: count 10, GPU 986.0, CPU 1123.0, four names:
    #   aten::linear | <elementwise direct_copy kernel> | ampere_sgemm_32x128_tn | <elementwise add kernel>
    linear = patterns.compute(traces, PatternsOptions(scope=Scope(hta_compat=compat)))
    assert linear.select("count", "gpu_sum_us", "cpu_sum_us").rows() == [(10, 986.0, 1123.0)]
    names = linear["pattern"][0].split("|")
    assert len(names) == 4 and names[0] == "aten::linear" and names[2] == "ampere_sgemm_32x128_tn"
    assert "direct_copy_kernel_cuda" in names[1] and "CUDAFunctor_add<float>" in names[3]

    # HTA: get_frequent_cuda_kernel_sequences("aten::mm", out, min_pattern_len=1, rank=3,
    #   top_k=1000) → 45 patterns; the first five (count, GPU, CPU):
    mm_options = PatternsOptions(scope=Scope(hta_compat=compat), operator="aten::mm", min_len=1)
    mm = patterns.compute(traces, mm_options)
    assert mm.select("count", "gpu_sum_us", "cpu_sum_us").rows() == [
        (240, 4492.0, 9401.0),
        (145, 2060.0, 4336.0),
        (65, 456.0, 1714.0),
        (40, 438.0, 1154.0),
        (35, 362.0, 1351.0),
    ]
    assert patterns.compute(traces, PatternsOptions(operator="aten::mm", min_len=1, top_k=None)).height == 45
    # …and its overlaid file marks, for the top pattern, 3360 events whose positions sum to
    # 245464015 (read back from HTA's overlaid_control.json.gz, events with args "Patterns").
    top = patterns.pattern_indices(traces, mm_options)["indices"][0].to_list()
    assert (len(top), sum(top)) == (3360, 245464015)

    # HTA: same call with "## backward ##", min_pattern_len=1: 5 patterns (one per step), each
    # the annotation plus 1023 kernels of the backward thread (HTA links that thread under the
    # annotation); (GPU, CPU) per pattern, and 7811 overlaid events each:
    backward_options = PatternsOptions(scope=Scope(hta_compat=compat), operator="## backward ##", min_len=1)
    backward = patterns.compute(traces, backward_options)
    assert backward["count"].to_list() == [1] * 5
    assert sorted(backward.select("gpu_sum_us", "cpu_sum_us").rows()) == [
        (36239.0, 34160.0),
        (37699.0, 35253.0),
        (43316.0, 34551.0),
        (43347.0, 34552.0),
        (44242.0, 32120.0),
    ]
    assert {len(p.split("|")) for p in backward["pattern"].to_list()} == {1024}
    assert patterns.pattern_indices(traces, backward_options)["indices"].list.len().to_list() == [7811] * 5


def test_parity_ns_resolution_default_mode(load_shared: Any) -> None:
    # HTA's ns rounding makes its call graph fail on this trace (issue #254), so the reference is
    # HTA with HTA_DISABLE_NS_ROUNDING=1, which matches htatui's default mode (no rounding):
    # get_frequent_cuda_kernel_sequences("aten::linear", out, min_pattern_len=1, rank=0)
    #   → one row: count 4, GPU 122.624, CPU 666.69
    # get_frequent_cuda_kernel_sequences("aten::batch_norm", …, min_pattern_len=1)
    #   → 4 patterns, first (count, GPU, CPU) = (112, 5009.637, 9683.644)
    traces = load_shared("ns_resolution_trace")
    linear = patterns.compute(traces, PatternsOptions(min_len=1))
    assert linear["count"].to_list() == [4]
    assert linear["gpu_sum_us"][0] == pytest.approx(122.624, abs=1e-6)
    assert linear["cpu_sum_us"][0] == pytest.approx(666.69, abs=1e-6)
    norm = patterns.compute(traces, PatternsOptions(operator="aten::batch_norm", min_len=1))
    assert norm.height == 4
    assert norm.row(0)[1:] == pytest.approx((112, 5009.637, 9683.644), abs=1e-6)


def test_parity_negative_queue_length_compat_reproduces_hta_nesting(load_shared: Any) -> None:
    # HTA: get_frequent_cuda_kernel_sequences(op, out, min_pattern_len=1, rank=0, top_k=1000):
    #   "aten::mm"    → 3 patterns, each count 1: (GPU, CPU) = (109, 108), (46, 95), (148, 61)
    #   "aten::copy_" → (count, GPU, CPU) = (397, 9481, 4183), (28, 39, 1645), (28, 16792, 341),
    #                   (8, 15, 579195)
    # HTA finds aten::mm in the first step only: a mis-sorted zero-length event leaves a 1 µs
    # aten::item "open" on the backward thread, and every later backward op nests under it
    # (one level deeper). Compat mode reproduces that; the default nesting finds all 4 steps.
    traces = load_shared("negative_queue_length_values_check")
    mm = patterns.compute(traces, PatternsOptions(scope=Scope(hta_compat=True), operator="aten::mm", min_len=1))
    assert sorted(mm.drop("pattern").rows()) == [(1, 46.0, 95.0), (1, 109.0, 108.0), (1, 148.0, 61.0)]
    copy = patterns.compute(traces, PatternsOptions(scope=Scope(hta_compat=True), operator="aten::copy_", min_len=1))
    assert copy.drop("pattern").rows() == [
        (397, 9481.0, 4183.0),
        (28, 39.0, 1645.0),
        (28, 16792.0, 341.0),
        (8, 15.0, 579195.0),
    ]
    mm_default = patterns.compute(traces, PatternsOptions(operator="aten::mm", min_len=1))
    assert sorted(mm_default.drop("pattern").rows()) == [(4, 178.0, 370.0), (4, 431.0, 370.0), (4, 583.0, 240.0)]
    copy_default = patterns.compute(traces, PatternsOptions(operator="aten::copy_", min_len=1))
    assert copy_default.drop("pattern").rows()[0] == (868, 18599.0, 9042.0)
