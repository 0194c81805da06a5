"""The CUPTI view: counted kernels paired with their launches, attributed to ops, FLOPs derived.

Pinned against HTA 0.6.1's `get_cupti_counter_data_with_operators` on the shared CUPTI trace
(../shared/oracles/cupti_profiler/hta_cupti_counters.json) and against a hand-built trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, runtime, traces_of

from htatui.analysis.core.scope import Scope
from htatui.analysis.views import cupti
from htatui.trace import TraceSet

FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
HADD = "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum"
DMUL = "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum"
CYCLES = "sm__cycles_elapsed.avg"


def counted(name: str, ts: float, dur: float, **counters: Any) -> dict[str, Any]:
    event = {"ph": "X", "cat": "cuda_profiler_range", "name": name, "pid": 0, "tid": 0, "ts": ts, "dur": dur}
    return {**event, "args": counters}


def options(compat: bool = False) -> cupti.CuptiOptions:
    return cupti.CuptiOptions(scope=Scope(hta_compat=compat))


@pytest.mark.parametrize("compat", [False, True], ids=["default", "hta-compat"])
def test_matches_hta_on_the_shared_cupti_trace(
    compat: bool, load_shared: Callable[[str], TraceSet], shared_traces: Path
) -> None:
    oracle = json.loads((shared_traces.parent / "oracles" / "cupti_profiler" / "hta_cupti_counters.json").read_text())
    result = cupti.compute(load_shared("cupti_profiler"), options(compat))
    rows = result.frame.to_dicts()
    assert result.message is None
    assert len(rows) == oracle["num_rows"] == 77
    assert set(oracle["counter_columns"]) <= set(result.frame.columns)
    for ours, theirs in zip(rows, oracle["rows"], strict=True):
        assert ours["kernel"] == theirs["name"]
        assert (ours["index"], ours["launch_index"]) == (theirs["index"], theirs["index_runtime"])
        assert ours["op_stack"].split(cupti.STACK_SEPARATOR) == theirs["op_stack"]
        assert (ours["top_level_op"], ours["bottom_level_op"]) == (theirs["top_level_op"], theirs["bottom_level_op"])
        assert {name: ours[name] for name in theirs["counters"]} == theirs["counters"]
        weights = {name: 2 if "fma" in name else 1 for name in theirs["counters"]}
        assert ours["flop"] == sum(weights[name] * value for name, value in theirs["counters"].items())
        assert ours["dur_us"] == theirs["dur"]  # the range's own length (121,431 µs on every range here)


def test_shared_trace_per_op_totals(load_shared: Callable[[str], TraceSet]) -> None:
    table = cupti.by_op(load_shared("cupti_profiler"), options()).frame
    assert table["kernels"].sum() == 77
    conv = table.filter(pl.col("op") == "aten::cudnn_convolution").row(0, named=True)
    # 28 cuDNN convolution kernels: Σ ffma = 23,887,265,792, Σ fadd = 945,340,416, Σ fmul = 408,567,808.
    assert conv["kernels"] == 28
    assert conv["flop"] == 2 * 23_887_265_792 + 945_340_416 + 408_567_808
    assert conv["dur_us"] == 28 * 121_431.0
    assert table["op"][0] == "aten::cudnn_convolution"  # the most FLOPs first


def _job(tmp_path: Path, *, launches: int = 2) -> TraceSet:
    events = [
        cpu_op("aten::linear", 0.0, 28.0),
        cpu_op("aten::addmm", 5.0, 20.0),
        runtime("cudaLaunchKernel", 10.0, 5.0, 1),
        cpu_op("aten::relu", 30.0, 15.0),
        runtime("cudaLaunchKernel", 35.0, 5.0, 2),
        runtime("cudaMemcpyAsync", 41.0, 2.0, 3),
        # Ranges start after their launches (CUPTI replays each kernel); one lacks two counters.
        counted("gemm", 100.0, 2.0, **{FFMA: 10, HADD: 3, DMUL: 1, CYCLES: 7.5}),
        counted("relu_kernel", 200.0, 4.0, **{FFMA: 6, "note": "text is no counter"}),
    ]
    if launches == 1:
        events = [e for e in events if e.get("args", {}).get("correlation") != 2]
    return traces_of(tmp_path, events)


def test_hand_built_pairing_stacks_and_flops(tmp_path: Path) -> None:
    frame = cupti.compute(_job(tmp_path), options()).frame
    assert frame["kernel"].to_list() == ["gemm", "relu_kernel"]
    assert frame["op_stack"].to_list() == ["aten::linear > aten::addmm", "aten::relu"]
    assert frame["top_level_op"].to_list() == ["aten::linear", "aten::relu"]
    assert frame["bottom_level_op"].to_list() == ["aten::addmm", "aten::relu"]
    assert frame.schema[FFMA] == pl.Int64 and frame.schema[CYCLES] == pl.Float64
    assert "note" not in frame.columns
    gemm, relu = frame.to_dicts()
    # gemm: 2×10 fp32 FMA + 3 fp16 adds + 1 fp64 mul = 24 FLOPs over 2 µs.
    assert (gemm["flop_fp32"], gemm["flop_fp16"], gemm["flop_fp64"], gemm["flop"]) == (20.0, 3.0, 1.0, 24.0)
    assert gemm["tflop_per_s"] == pytest.approx(24 / 2e-6 / 1e12)
    assert gemm[CYCLES] == 7.5
    # relu_kernel recorded only ffma: the missing counters are null, the FLOPs count what is there.
    assert relu[HADD] is None and relu["flop"] == 12.0 and relu["flop_fp16"] == 0.0


def test_hand_built_per_op(tmp_path: Path) -> None:
    table = cupti.by_op(_job(tmp_path), options()).frame
    assert table.select("op", "kernels", "flop", "dur_us").rows() == [
        ("aten::addmm", 1, 24.0, 2.0),
        ("aten::relu", 1, 12.0, 4.0),
    ]
    assert table.filter(pl.col("op") == "aten::relu")[HADD].to_list() == [None]


def test_counts_that_differ_leave_the_rank_out(tmp_path: Path) -> None:
    result = cupti.compute(_job(tmp_path, launches=1), options(compat=True))
    assert result.frame.height == 0
    assert result.message == "rank 0 left out: 2 counted kernels but 1 kernel launches"
    assert cupti.by_op(_job(tmp_path, launches=1), options()).frame.height == 0


def test_ranges_collapsed_to_one_ts_are_said(tmp_path: Path) -> None:
    """Issue 35: "2 counted kernels but 1 kernel launches" did not say that every range had one ts."""
    events = [
        runtime("cudaLaunchKernel", 10.0, 5.0, 1),
        counted("gemm", 100.0, 2.0, **{FFMA: 10}),
        counted("relu_kernel", 100.0, 4.0, **{FFMA: 6}),
    ]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    result = cupti.compute(traces_of(tmp_path / "a", events), options())
    assert result.frame.height == 0
    assert result.message == (
        "rank 0 left out: 2 counted kernels but 1 kernel launches (the 2 ranges collapsed to one ts (90.000 µs))"
    )
    paired = cupti.compute(traces_of(tmp_path / "b", [*events, runtime("cudaLaunchKernel", 20.0, 5.0, 2)]), options())
    assert paired.frame["kernel"].to_list() == ["gemm", "relu_kernel"]  # file order breaks the tie
    assert (
        paired.message == "rank 0: the 2 ranges collapsed to one ts (90.000 µs), paired with the launches in file order"
    )


def test_no_ranges_is_an_empty_table(tmp_path: Path) -> None:
    result = cupti.compute(traces_of(tmp_path, [cpu_op("aten::add", 0.0, 1.0)]), options())
    assert result.frame.height == 0 and list(result.frame.schema.items()) == list(cupti.KERNEL_COLUMNS.items())
    assert result.message is not None


@pytest.mark.parametrize("table", ["main", "by-op"])
def test_report_prints_the_tables(
    table: str, shared_traces: Path, load_shared: Callable[[str], TraceSet], capsys: pytest.CaptureFixture[str]
) -> None:
    from htatui.cli.main import main

    flags = [] if table == "main" else [f"--{table}"]
    job = str(shared_traces / "cupti_profiler")
    assert main(["report", job, "--no-cache", "--view", "cupti", *flags, "--format", "csv"]) == 0
    compute = cupti.compute if table == "main" else cupti.by_op
    assert capsys.readouterr().out == compute(load_shared("cupti_profiler"), options()).frame.write_csv()
