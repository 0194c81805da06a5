"""A roofline that obeys physics (issue 34) and bounds on the model's inputs (issue 35: 1, 2, 3, 8, 9).

Each test builds the trace that showed a bug and checks the number a GPU can produce, worked out
by hand in the docstring; the last runs every shared trace: no row above its roof without a flag.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, runtime, traces_of

from htatui.analysis.core.rules import Rules
from htatui.analysis.core.scope import Scope
from htatui.analysis.perf.peaks import DevicePeaksError, device_from_properties, find_device, read_devices
from htatui.analysis.views import cupti, ops
from htatui.analysis.views.ops import OpsOptions

BF16 = "c10::BFloat16"
MODEL = OpsOptions(group_by="shape", flops=True, kinds="op", sort_by="name", descending=False)


def op(name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    event = cpu_op(name, ts, dur)
    event["args"].update(args)
    return event


def launch(corr: int, ts: float) -> dict[str, Any]:
    return runtime("cudaLaunchKernel", ts, 1, corr)


@pytest.fixture
def test_gpu(tmp_path: Path) -> OpsOptions:
    """`MODEL` with "Test GPU" in its rules: 1,000 bf16 TFLOP/s on its matrix units, 60 fp32 and
    120 bf16 on its vector units, 3 TB/s, a 50 MB L2."""
    peaks = tmp_path / "peaks.toml"
    peaks.write_text(
        '[[device]]\nname = "Test"\nmatch = "Test GPU"\nmemory_tbps = 3.0\nl2_mb = 50\n'
        "matrix = { bf16 = 1000.0 }\nvector = { fp32 = 60.0, bf16 = 120.0 }\n"
    )
    return replace(MODEL, scope=Scope(rules=Rules(peaks_files=(str(peaks),))))


def rows(frame: pl.DataFrame, name: str) -> list[dict[str, Any]]:
    return frame.filter(pl.col("name") == name).sort("input_types").to_dicts()


# ---- rows that mean one thing ------------------------------------------------------------


def test_autocast_nested_linear_one_row_per_dtype(tmp_path: Path, test_gpu: OpsOptions) -> None:
    """Under autocast the float aten::linear x [8,1024,768], w [32000,768] calls a cast of w
    (aten::copy_: 147 MB in 60 µs) and the bf16 aten::linear of the same shapes, whose mm kernel
    (`nvjet_…`, no dtype in its name: its op's bf16) runs 600 µs. FLOPs 2·8192·32000·768 =
    402,653,184,000. Two rows, both measured against the bf16 matrix roof (1,000): the outer
    over 660 µs: 610.08 TFLOP/s, 61.01 %; the inner over 600 µs: 671.09 TFLOP/s, 67.11 %. (One
    row with the fp32 peak, as before, gave 1,040 %.)"""
    x, w = [8, 1024, 768], [32000, 768]
    dims = {"Input Dims": [x, w, []], "Concrete Inputs": ["", "", ""]}
    trace = tmp_path / "t"
    trace.mkdir()
    traces = traces_of(
        trace,
        [
            op("aten::linear", 0, 100, **dims, **{"Input type": ["float", "float", ""]}),
            op("aten::copy_", 2, 5, **{"Input Dims": [w, w, []], "Input type": [BF16, "float", "Scalar"]}),
            launch(1, 3),
            op("aten::linear", 10, 80, **dims, **{"Input type": [BF16, BF16, ""]}),
            op("aten::mm", 12, 70, **{"Input Dims": [[8192, 768], [768, 32000]], "Input type": [BF16, BF16]}),
            launch(2, 14),
            kernel("void at::native::vectorized_elementwise_kernel<copy>", 200, 60, corr=1),
            kernel("nvjet_tst_192x128_64x5_1x2_h_bz_coopB_TNT", 260, 600, corr=2),
        ],
    )
    frame = ops.compute(traces, test_gpu)
    outer, inner = sorted(rows(frame, "aten::linear"), key=lambda r: r["input_types"] != "fp32,fp32,-")
    flops = 2 * 8192 * 32000 * 768
    assert (outer["input_types"], outer["dtype"], outer["unit"], outer["peak_tflop_per_s"]) == (
        "fp32,fp32,-",
        "bf16",
        "matrix",
        1000.0,
    )
    assert outer["tflop_per_s"] == pytest.approx(flops / 660 / 1e6)
    assert outer["pct_of_peak"] == pytest.approx(100 * flops / 660 / 1e6 / 1000)
    assert (inner["input_types"], inner["dtype"], inner["busy_incl_us"]) == ("bf16,bf16,-", "bf16", 600.0)
    assert inner["pct_of_peak"] == pytest.approx(100 * flops / 600 / 1e6 / 1000)
    assert frame.filter(pl.col("pct_of_peak") > 100).height == 0


def test_row_over_calls_with_gpu_work_total_over_total(tmp_path: Path, test_gpu: OpsOptions) -> None:
    """Three calls of aten::mul [1000,1000] bf16 (F = 1e6 FLOP, B = 6e6 bytes each): one on the
    CPU (no kernel), one whose kernel runs 10 µs, one 30 µs. The row is over the two with GPU
    work: gpu_calls 2, busy 40 µs; tflop_per_s = 2e6/40/1e6 = 0.05, mean of the calls' rates
    (0.1 + 0.0333)/2 = 0.0667; tb_per_s 0.3, mean 0.4; bytes per call 6e6 (the CPU call is not
    averaged in). A mul nested in a mul of the same row (a wrapper calling itself) is counted
    once: its kernel belongs to both, the row's busy time stays 40 µs."""
    args = {"Input Dims": [[1000, 1000], [1000, 1000]], "Input type": [BF16, BF16]}
    trace = tmp_path / "t"
    trace.mkdir()
    traces = traces_of(
        trace,
        [
            op("aten::mul", 0, 5, **args),
            op("aten::mul", 10, 20, **args),
            launch(1, 12),
            op("aten::mul", 40, 20, **args),
            op("aten::mul", 42, 10, **args),
            launch(2, 44),
            kernel("mul_kernel", 100, 10, corr=1),
            kernel("mul_kernel", 200, 30, corr=2),
        ],
    )
    (row,) = rows(ops.compute(traces, test_gpu), "aten::mul")
    # The op tree folds the nested call into its parent (op_events' dedup): 3 calls, 2 on the GPU.
    assert (row["count"], row["gpu_calls"], row["busy_incl_us"], row["bytes_moved"]) == (3, 2, 40.0, 6e6)
    assert row["tflop_per_s"] == pytest.approx(0.05)
    assert row["mean_tflop_per_s"] == pytest.approx((0.1 + 1 / 30) / 2)
    assert (row["tb_per_s"], row["mean_tb_per_s"]) == (pytest.approx(0.3), pytest.approx((0.6 + 0.2) / 2))
    # Vector work in bf16 against the vector bf16 roof (120), memory-bound at 1/6 FLOP/B.
    assert (row["unit"], row["bound"], row["peak_tflop_per_s"]) == ("vector", "memory", 120.0)


def test_call_nested_in_its_own_row_counted_once(tmp_path: Path, test_gpu: OpsOptions) -> None:
    """aten::mul [1000,1000] bf16 ⊃ aten::contiguous ⊃ aten::mul of the same arguments, whose
    kernel runs 10 µs: both calls own the kernel (their subtrees hold it), but the row counts the
    outer one only: gpu_calls 1, busy 10 µs, 1e6 FLOP / 10 µs = 0.1 TFLOP/s (counted twice:
    2e6 over 20 µs, and flop totals doubled)."""
    args = {"Input Dims": [[1000, 1000], [1000, 1000]], "Input type": [BF16, BF16]}
    trace = tmp_path / "t"
    trace.mkdir()
    traces = traces_of(
        trace,
        [
            op("aten::mul", 0, 100, **args),
            op("aten::contiguous", 10, 80, **{"Input Dims": [[1000, 1000]], "Input type": [BF16]}),
            op("aten::mul", 20, 60, **args),
            launch(1, 30),
            kernel("mul_kernel", 200, 10, corr=1),
        ],
    )
    (row,) = rows(ops.compute(traces, test_gpu), "aten::mul")
    assert (row["count"], row["gpu_calls"], row["busy_incl_us"], row["flop_count"]) == (2, 1, 10.0, 1e6)
    assert row["tflop_per_s"] == pytest.approx(0.1)


def test_zero_flop_row_has_no_compute_roof_and_flags(tmp_path: Path, test_gpu: OpsOptions) -> None:
    """aten::fill_ of [1000,1000] fp32 writes 4e6 bytes in 2 µs: 2 TB/s, 66.7 % of the 3 TB/s
    roof, and no compute peak beside it (it computes nothing). An addmm-free aten::mm of
    [4096,4096]² bf16 (137.4 GFLOP) whose kernel lasted 0.1 µs would be 1.37e6 TFLOP/s: above
    the compute roof, flagged `model?`. An aten::add [8192,8192] bf16 moving 402.7 MB in 100 µs
    (4.03 TB/s, over the 3 TB/s roof) needs (402.7 − 50) MB from DRAM: 3.53 TB/s, still over:
    `model?`; the same add of [2048,2048] (25.2 MB, under the 50 MB cache) in 6 µs (4.19 TB/s):
    `cache-resident`. A kernel of 0.001 µs or less (the clock's resolution) gives no rate."""
    mm = {"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": [BF16, BF16]}
    big = {"Input Dims": [[8192, 8192], [8192, 8192], []], "Input type": [BF16, BF16, "Scalar"]}
    small = {"Input Dims": [[2048, 2048], [2048, 2048], []], "Input type": [BF16, BF16, "Scalar"]}
    trace = tmp_path / "t"
    trace.mkdir()
    traces = traces_of(
        trace,
        [
            op("aten::fill_", 0, 5, **{"Input Dims": [[1000, 1000], []], "Input type": ["float", "Scalar"]}),
            launch(1, 1),
            op("aten::mm", 10, 5, **mm),
            launch(2, 11),
            op("aten::add", 20, 5, **big),
            launch(3, 21),
            op("aten::add", 30, 5, **small),
            launch(4, 31),
            op("aten::sub", 40, 5, **small),
            launch(5, 41),
            kernel("fill", 100, 2, corr=1),
            kernel("gemm", 110, 0.1, corr=2),
            kernel("add", 120, 100, corr=3),
            kernel("add", 300, 6, corr=4),
            kernel("sub", 400, 0.001, corr=5),
        ],
    )
    frame = ops.compute(traces, test_gpu)
    (fill,) = rows(frame, "aten::fill_")
    assert (fill["gflop"], fill["peak_tflop_per_s"], fill["bound"]) == (0.0, None, "memory")
    assert fill["pct_of_peak"] == pytest.approx(100 * 2 / 3)
    (mm_row,) = rows(frame, "aten::mm")
    assert (mm_row["flag"], mm_row["pct_of_peak"] > 100) == ("model?", True)
    adds = {r["input_dims"]: r for r in rows(frame, "aten::add")}
    assert adds["[[8192, 8192], [8192, 8192], []]"]["flag"] == "model?"
    assert adds["[[2048, 2048], [2048, 2048], []]"]["flag"] == "cache-resident"
    (sub,) = rows(frame, "aten::sub")
    assert (sub["gpu_calls"], sub["tflop_per_s"], sub["pct_of_peak"]) == (0, None, None)
    assert frame.filter((pl.col("pct_of_peak") > 100) & pl.col("flag").is_null()).height == 0


# ---- devices -----------------------------------------------------------------------------


def test_device_found_by_sms_arch_and_memory_when_unnamed() -> None:
    """vLLM's ROCm traces name no device: 304 CUs, compute capability 9.4 (gfx942), 206 GB →
    MI300X. An unnamed H100 (132 SMs, 9.0, 85 GB) → H100 SXM; 141 GB → H200; the same SMs and
    arch with 40 GB fit nothing. A named device still matches by name."""
    mi300 = {"name": "", "numSms": 304, "computeMajor": 9, "computeMinor": 4, "totalGlobalMem": 206141652992}
    assert device_from_properties(mi300).name == "MI300X"  # type: ignore[union-attr]
    assert device_from_properties({**mi300, "computeMinor": 0, "gcnArchName": "gfx942:sramecc+:xnack-"}).name == (  # type: ignore[union-attr]
        "MI300X"
    )
    h100 = {"name": "", "numSms": 132, "computeMajor": 9, "computeMinor": 0, "totalGlobalMem": 85017493504}
    assert device_from_properties(h100).name == "H100 SXM"  # type: ignore[union-attr]
    assert device_from_properties({**h100, "totalGlobalMem": 150_000_000_000}).name == "H200"  # type: ignore[union-attr]
    assert device_from_properties({**h100, "totalGlobalMem": 40_000_000_000}) is None
    assert find_device("", 304) is None  # an arch is needed too
    h100_named = find_device("NVIDIA H100 80GB HBM3", 132)
    assert h100_named is not None and h100_named.roof("bf16", "vector") == 133.8
    assert h100_named.roof("fp32", "matrix") == 66.9  # no fp32 tensor cores: the vector units
    matrix, vector = h100_named.roof("bf16", "matrix"), h100_named.roof("bf16", "vector")
    assert matrix is not None and matrix / h100_named.memory_tbps == pytest.approx(295.34, rel=1e-3)
    assert vector is not None and vector / h100_named.memory_tbps == pytest.approx(39.94, rel=1e-3)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("memory_tbps = inf", "needs a positive memory_tbps"),
        ("memory_tbps = 1e-300", "needs a positive memory_tbps"),
        ("memory_tbps = 1.0\nmatrix = { bf16 = inf }", "needs matrix as a table of positive numbers"),
        ("memory_tbps = 1.0\nvector = { fp32 = 1e-300 }", "needs vector as a table of positive numbers"),
    ],
)
def test_peaks_file_refuses_inf_and_tiny_numbers(tmp_path: Path, line: str, message: str) -> None:
    """Issue 35.8: `inf` and 1e-300 are not a GPU's figures: the file is refused, naming it."""
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[[device]]\nname = "X"\nmatch = "X"\n{line}\n')
    with pytest.raises(DevicePeaksError, match=f"bad.toml: device 'X' {message}"):
        read_devices(bad)


def test_regexes_bounded(tmp_path: Path) -> None:
    """Issue 35.9: a device named "H100"×20,000 (80 KB) is looked up in well under a second (the
    shipped `H100.*(SXM|HBM3)` took minutes: quadratic backtracking); a user regex such as
    `(a+)+$`, `(a|aa)*` or `(x+x+)+y` is refused when the file is read, and a possessive one is
    allowed."""
    started = time.perf_counter()
    assert find_device("H100" * 20000) is None
    assert find_device("NVIDIA H100 80GB HBM3" + " " * 100000) is not None
    assert time.perf_counter() - started < 2.0
    for pattern in ("(a+)+$", "(a|aa)*", "(x+x+)+y", "((ab)*)+"):
        path = tmp_path / "re.toml"
        path.write_text(f"[[device]]\nname = \"X\"\nmatch = '{pattern}'\nmemory_tbps = 1.0\n")
        with pytest.raises(DevicePeaksError, match="can backtrack without end"):
            read_devices(path)
    path.write_text("[[device]]\nname = \"X\"\nmatch = '(a+)++$|[(+)]+|H100 (SXM|PCIe)'\nmemory_tbps = 1.0\n")
    assert [d.name for d in read_devices(path)] == ["X"]


# ---- bounds on the inputs (issue 35.1-3) -------------------------------------------------


def test_profiler_flops_and_hostile_dims_dropped_with_one_note(tmp_path: Path, test_gpu: OpsOptions) -> None:
    """Issue 35.1 and 35.2: the profiler's `flops` of 1e300, −1e12 and 2**70 are dropped (the
    calls keep their formula's FLOPs), as are `Input Dims` with a negative dim, [2e19] (past
    int64, a float) and [1e18] elements (over 2**42): those calls get no figure. One note names
    the file and each field's count; no rate is negative or astronomic."""
    mm = {"Input type": [BF16, BF16]}
    trace = tmp_path / "t"
    trace.mkdir()
    traces = traces_of(
        trace,
        [
            op("aten::mm", 0, 5, flops=1e300, **{"Input Dims": [[4, 3], [3, 5]]}, **mm),
            op("aten::mm", 10, 5, flops=-1e12, **{"Input Dims": [[4, 3], [3, 5]]}, **mm),
            op("aten::mm", 20, 5, flops=2**70, **{"Input Dims": [[4, 3], [3, 5]]}, **mm),
            launch(1, 21),
            op("aten::mm", 30, 5, **{"Input Dims": [[-4, 3], [3, 5]]}, **mm),
            op("aten::mm", 40, 5, **{"Input Dims": [[2e19, 3], [3, 5]]}, **mm),
            op("aten::relu", 50, 5, **{"Input Dims": [[10**18]], "Input type": [BF16]}),
            launch(2, 51),
            kernel("gemm", 100, 10, corr=1),
            kernel("relu", 200, 10, corr=2),
        ],
    )
    made = ops.main(traces, test_gpu)
    assert made.message is not None
    assert "rank-0.json: dropped 3 'Input Dims' values, 3 'flops' values no GPU can produce" in made.message
    frame = made.frame
    numbers = ["gflop", "bytes_moved", "tflop_per_s", "tb_per_s", "pct_of_peak", "flop_count"]
    assert all((frame[c].drop_nulls() >= 0).all() for c in numbers)
    assert (frame["pct_of_peak"].drop_nulls() <= 100).all()
    mm_rows = rows(frame, "aten::mm")
    # The formula's 120 FLOP stand for the dropped figures (one call of the three ran on the GPU).
    assert {r["input_dims"]: r["flop_count"] for r in mm_rows}["[[4, 3], [3, 5]]"] == 120.0
    assert rows(frame, "aten::relu")[0]["gflop"] is None


def test_cupti_counters_bounded(tmp_path: Path) -> None:
    """Issue 35.3: counters of −5, 1e300, 2**70, text, null and a list are dropped (null, never
    0) with a note counting them; a range of 1e-9 µs gives no rate, nor does a count no device
    can reach in its range (1e17 FFMA in 2 µs, on "Test GPU", which the table lacks: above 1e6
    TFLOP/s); a sane counter still does: 1,000 FFMA thread instructions (2,000 FLOP) over 2 µs =
    0.001 TFLOP/s."""
    ffma = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"

    def counted(ts: float, dur: float, value: object) -> dict[str, Any]:
        event = kernel("k", ts, dur)
        event.update(cat="cuda_profiler_range", args={ffma: value})
        return event

    values: list[object] = [1000, -5, 1e300, 2**70, "many", None, [1], 10**17, 1000]
    events: list[dict[str, Any]] = []
    for i, value in enumerate(values):
        events.append(op("aten::relu", i * 10, 5))
        events.append(runtime("cudaLaunchKernel", i * 10 + 1, 1, i + 1))
        events.append(counted(1000 + i * 10, 1e-9 if i == len(values) - 1 else 2, value))
    trace = tmp_path / "t"
    trace.mkdir()
    made = cupti.compute(traces_of(trace, events), cupti.CuptiOptions())
    assert made.message is not None
    assert f"dropped 6 '{ffma}' values" in made.message
    assert "1 ranges of 1 ns or less (the clock's resolution): no rate" in made.message
    frame = made.frame.sort("ts_us")
    assert frame[ffma].to_list() == [1000] + [None] * 6 + [10**17, 1000]
    # 1e17 FFMA in 2 µs would be 1e11 TFLOP/s: beyond any device's roof, so no rate.
    assert "1 kernels' counters give more than 1e+06 TFLOP/s (any device's highest roof): no rate" in made.message
    assert frame["tflop_per_s"].to_list() == [pytest.approx(0.001)] + [None] * 8


# ---- every shared trace ------------------------------------------------------------------


def shared_folders() -> list[str]:
    root = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


@pytest.mark.parametrize("folder", shared_folders())
def test_no_row_above_its_roof_unflagged(load_shared: Any, folder: str) -> None:
    """On every shared trace the model's table has no row above 100 % of its roof without a flag,
    and no negative figure."""
    try:
        traces = load_shared(folder)
    except Exception as exc:  # noqa: BLE001 - a folder that is not a loadable job (a memory timeline)
        pytest.skip(f"{folder}: not a trace job ({exc})")
    frame = ops.compute(traces, OpsOptions(group_by="shape", flops=True))
    assert frame.filter((pl.col("pct_of_peak") > 100) & pl.col("flag").is_null()).height == 0
    for column in ("gflop", "bytes_moved", "tflop_per_s", "tb_per_s", "pct_of_peak", "busy_incl_us"):
        assert (frame[column].drop_nulls() >= 0).all(), column
