"""The profiler's aggregation rules (docs/semantics-ops.md) on tiny hand-built traces.

Each trace isolates one rule of `EventList._build_tree` / key_averages; the expected numbers
are worked out in the docstrings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, named, runtime, step, traces_of

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.model import job_tree
from htatui.analysis.views import op_tree, ops
from htatui.analysis.views.ops import OpsOptions
from htatui.cli.main import main
from htatui.trace import TraceSet


def op(
    name: str, ts: float, dur: float, *, tid: int = 1, external_id: int | None = None, **args: Any
) -> dict[str, Any]:
    event = cpu_op(name, ts, dur, tid=tid)
    if external_id is not None:
        event["args"]["External id"] = external_id
    event["args"].update(args)
    return event


def table(traces: TraceSet, kinds: str = "all", **options: Any) -> dict[tuple[str, str], tuple[Any, ...]]:
    frame = ops.compute(traces, OpsOptions(kinds=kinds, **options))
    return {(r[1], r[2]): r[3:] for r in frame.rows()}


def test_only_child_with_the_parents_name_is_folded_in(tmp_path: Path) -> None:
    """aten::layer_norm [0, 100] ⊃ aten::layer_norm [10, 90] ⊃ aten::layer_norm [15, 85] (an
    autocast / dispatcher re-entry) ⊃ aten::native_layer_norm [20, 80] ⊃ cudaLaunchKernel
    [30, 35] → 6 µs kernel. Each inner layer_norm is its parent's only child with its name:
    folded in, so one call of 100 µs, self 100 − 60 = 40, GPU total 6 (not 3 calls, 18 µs).
    aten::add_ [200, 300] ⊃ aten::add_ [210, 250] and cudaLaunchKernel [260, 265] → 4 µs: two
    children, nothing folded: 2 calls, total 140, self (100 − 40 − 5) + 40 = 95, GPU 4 / 4."""
    traces = traces_of(
        tmp_path,
        [
            op("aten::layer_norm", 0, 100),
            op("aten::layer_norm", 10, 80),
            op("aten::layer_norm", 15, 70),
            op("aten::native_layer_norm", 20, 60),
            runtime("cudaLaunchKernel", 30, 5, 1),
            kernel("ln_kernel", 40, 6, corr=1),
            op("aten::add_", 200, 100),
            op("aten::add_", 210, 40),
            runtime("cudaLaunchKernel", 260, 5, 2),
            kernel("add_kernel", 270, 4, corr=2),
        ],
    )
    rows = table(traces)
    assert rows[("aten::layer_norm", "op")] == (1, 100.0, 40.0, 0.0, 6.0)
    assert rows[("aten::native_layer_norm", "op")] == (1, 60.0, 55.0, 6.0, 6.0)
    assert rows[("aten::add_", "op")] == (2, 140.0, 95.0, 4.0, 4.0)
    assert rows[("ln_kernel", "kernel")] == (1, 0.0, 0.0, 6.0, 6.0)


def test_nesting_edges(tmp_path: Path) -> None:
    """aten::a [0, 50] holds aten::d [10, 20]. aten::b [40, 60] outlasts a: not its child.
    aten::c at 50 with no duration starts at a's end: not a's child either, but b's (b is
    open then). So a: self 40; b is top level (self 20 − 0)."""
    traces = traces_of(
        tmp_path,
        [op("aten::a", 0, 50), op("aten::d", 10, 10), op("aten::b", 40, 20), op("aten::c", 50, 0)],
    )
    rows = table(traces)
    assert rows[("aten::a", "op")] == (1, 50.0, 40.0, 0.0, 0.0)
    assert rows[("aten::b", "op")] == (1, 20.0, 20.0, 0.0, 0.0)
    assert rows[("aten::c", "op")] == (1, 0.0, 0.0, 0.0, 0.0)
    events = ops.instances(traces, OpsOptions())
    parents = dict(zip(events["name"], events["parent"], strict=True))
    positions = dict(zip(events["name"], events["pos"], strict=True))
    assert parents["aten::b"] is None and parents["aten::d"] == positions["aten::a"]
    assert parents["aten::c"] == positions["aten::b"]


def test_call_on_another_thread_nests_under_the_op_its_external_id_names(tmp_path: Path) -> None:
    """aten::copy_ [0, 100] on thread 1 (External id 7); its cudaMemcpyAsync [10, 20] was
    recorded on thread 2 with External id 7: the profiler moves it under copy_, so copy_'s
    self time is 100 − 10 = 90, and the 15 µs copy is copy_'s GPU time."""
    call = runtime("cudaMemcpyAsync", 10, 10, 3, tid=2)
    call["args"]["External id"] = 7
    copy = kernel("Memcpy HtoD", 30, 15, corr=3, **{"External id": 7})
    copy["cat"] = "gpu_memcpy"
    traces = traces_of(tmp_path, [op("aten::copy_", 0, 100, external_id=7), call, copy])
    rows = table(traces)
    assert rows[("aten::copy_", "op")] == (1, 100.0, 90.0, 15.0, 15.0)
    assert rows[("cudaMemcpyAsync", "runtime")] == (1, 10.0, 10.0, 0.0, 0.0)
    assert rows[("Memcpy HtoD", "memcpy")] == (1, 0.0, 0.0, 15.0, 15.0)


def test_graph_launch_kernels_belong_to_the_op_around_the_launch(tmp_path: Path) -> None:
    """CUDAGraph::replay [0, 50] ⊃ cudaGraphLaunch [5, 15] (correlation 9); the graph's three
    kernels (2, 3, 4 µs) all carry correlation 9: replay's GPU self = total = 9 µs; each kernel
    is its own device row (count 3 for the name used three times)."""
    traces = traces_of(
        tmp_path,
        [
            op("CUDAGraph::replay", 0, 50),
            runtime("cudaGraphLaunch", 5, 10, 9),
            kernel("graph_kernel", 20, 2, corr=9),
            kernel("graph_kernel", 23, 3, corr=9),
            kernel("graph_kernel", 27, 4, corr=9),
        ],
    )
    rows = table(traces)
    assert rows[("CUDAGraph::replay", "op")] == (1, 50.0, 40.0, 9.0, 9.0)
    assert rows[("cudaGraphLaunch", "runtime")] == (1, 10.0, 10.0, 0.0, 0.0)
    assert rows[("graph_kernel", "kernel")] == (3, 0.0, 0.0, 9.0, 9.0)


def test_triton_launcher_has_its_cpu_time(tmp_path: Path) -> None:
    """Torch-Compiled Region [0, 100] ⊃ triton_poi_fused_0 [10, 40] (a cpu_op with a stream
    argument: inductor's launcher) ⊃ cuLaunchKernel [20, 30] → the kernel of the same name, 8 µs.
    As key_averages on h100_gpt_compile: the launcher row (kind kernel-launcher) has its 30 µs of
    CPU time, 20 µs self (30 − the 10 µs launch), and its kernel's 8 µs of GPU time; the region's
    self time is 100 − 30 = 70 µs; the kernel is a row of its own."""
    driver = runtime("cuLaunchKernel", 20, 10, 5)
    driver["cat"] = "cuda_driver"
    traces = traces_of(
        tmp_path,
        [
            op("Torch-Compiled Region: 0/0", 0, 100),
            op("triton_poi_fused_0", 10, 30, stream=0),
            driver,
            kernel("triton_poi_fused_0", 50, 8, corr=5),
        ],
    )
    rows = table(traces)
    assert rows[("triton_poi_fused_0", "kernel-launcher")] == (1, 30.0, 20.0, 8.0, 8.0)
    assert rows[("Torch-Compiled Region: 0/0", "op")] == (1, 100.0, 70.0, 0.0, 8.0)
    assert rows[("cuLaunchKernel", "driver")] == (1, 10.0, 10.0, 0.0, 0.0)
    assert rows[("triton_poi_fused_0", "kernel")] == (1, 0.0, 0.0, 8.0, 8.0)


def test_op_named_like_its_kernel_is_a_launcher(tmp_path: Path) -> None:
    """Without the stream argument (older inductor), a cpu_op that launched a kernel of its own
    name is the launcher too: triton_red_fused_1 [0, 20] ⊃ cuLaunchKernel [5, 10] → 3 µs kernel
    triton_red_fused_1; aten::mul [30, 40] ⊃ cudaLaunchKernel [32, 34] → kernel "mul_kernel"
    stays an op."""
    driver = runtime("cuLaunchKernel", 5, 5, 1)
    driver["cat"] = "cuda_driver"
    traces = traces_of(
        tmp_path,
        [
            op("triton_red_fused_1", 0, 20),
            driver,
            kernel("triton_red_fused_1", 12, 3, corr=1),
            op("aten::mul", 30, 10),
            runtime("cudaLaunchKernel", 32, 2, 2),
            kernel("mul_kernel", 36, 1, corr=2),
        ],
    )
    rows = table(traces, kinds="host")
    assert rows[("triton_red_fused_1", "kernel-launcher")] == (1, 20.0, 15.0, 3.0, 3.0)
    assert rows[("aten::mul", "op")] == (1, 10.0, 8.0, 1.0, 1.0)


def test_every_step_is_kept_and_named_profiler_step_star(tmp_path: Path) -> None:
    """Two steps of 100 µs with an op each: with --steps all, as key_averages, `ProfilerStep*`
    has 2 calls; the default scope leaves the last step out, as every view does (1 call, and
    aten::mul its 20 µs); HTA-compatible mode drops the last step, as HTA does: 1 call."""
    traces = traces_of(
        tmp_path, [step(1, 0, 100), op("aten::mul", 10, 20), step(2, 100, 100), op("aten::mul", 110, 30)]
    )
    rows = table(traces, scope=Scope(steps=Steps("all")))
    assert rows[("ProfilerStep*", "annotation")] == (2, 200.0, 150.0, 0.0, 0.0)
    assert rows[("aten::mul", "op")] == (2, 50.0, 50.0, 0.0, 0.0)
    default = table(traces)
    assert default[("ProfilerStep*", "annotation")] == (1, 100.0, 80.0, 0.0, 0.0)
    assert default[("aten::mul", "op")] == (1, 20.0, 20.0, 0.0, 0.0)
    compat = ops.compute(traces, OpsOptions(scope=Scope(hta_compat=True)))
    assert compat.filter(pl.col("name") == "ProfilerStep*")["count"].to_list() == [1]


def test_group_by_input_shape(tmp_path: Path) -> None:
    """key_averages(group_by_input_shape=True): one row per (name, shapes). aten::mm with
    [[64, 100], [100, 512]] twice (10 and 12 µs) and [[100, 64], [64, 512]] once (5 µs); the
    annotation has no shapes: "[]". Grouped by name again, the rows add up to 3 calls, 27 µs."""
    a = op("aten::mm", 10, 10, **named({"Input Dims": [[64, 100], [100, 512]]}))
    b = op("aten::mm", 30, 12, **named({"Input Dims": [[64, 100], [100, 512]]}))
    c = op("aten::mm", 50, 5, **named({"Input Dims": [[100, 64], [64, 512]]}))
    traces = traces_of(tmp_path, [cpu_op("forward", 0, 100, cat="user_annotation"), a, b, c])
    frame = ops.compute(traces, OpsOptions(group_by="shape", sort_by="cpu_total_us"))
    assert frame.columns[:5] == ["rank", "name", "kind", "input_dims", "count"]
    assert frame.select("name", "input_dims", "count", "cpu_total_us").rows() == [
        ("forward", "[]", 1, 100.0),
        ("aten::mm", "[[64, 100], [100, 512]]", 2, 22.0),
        ("aten::mm", "[[100, 64], [64, 512]]", 1, 5.0),
    ]
    by_name = ops.compute(traces, OpsOptions(kinds="op"))
    assert by_name.select("name", "count", "cpu_total_us").rows() == [("aten::mm", 3, 27.0)]
    with pytest.raises(ValueError, match="group_by"):
        ops.compute(traces, OpsOptions(group_by="stack"))


def test_flops_and_achieved_rates(tmp_path: Path) -> None:
    """aten::addmm carries flops 4e9 and owns a 2 000 µs kernel: 4e9 / 2 000 µs = 2 TFLOP/s.
    aten::linear around it has no flops of its own: null. A 1 MB copy of 100 µs: 10 GB/s
    (1e6 B / 100 µs = 1e4 MB/s)."""
    copy = kernel("Memcpy HtoD", 3000, 100, corr=2, bytes=1_000_000)
    copy["cat"] = "gpu_memcpy"
    traces = traces_of(
        tmp_path,
        [
            op("aten::linear", 0, 100),
            op("aten::addmm", 10, 80, flops=4_000_000_000),
            runtime("cudaLaunchKernel", 20, 5, 1),
            kernel("gemm", 30, 2000, corr=1),
            op("aten::copy_", 200, 50),
            runtime("cudaMemcpyAsync", 210, 10, 2),
            copy,
        ],
    )
    frame = ops.compute(traces, OpsOptions(flops=True, kinds="op,memcpy", sort_by="name", descending=False))
    rates = {r[0]: r[1:] for r in frame.select("name", "flop_count", "tflop_per_s", "gb_per_s").rows()}
    assert rates["aten::addmm"] == (4e9, pytest.approx(2.0), None)
    assert rates["aten::linear"] == (None, None, None)
    assert rates["Memcpy HtoD"] == (None, None, pytest.approx(10.0))
    assert "flop_count" not in ops.compute(traces, OpsOptions()).columns


def test_shapes_need_the_trace_file(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, [op("aten::mm", 0, 10, **named({"Input Dims": [[2, 2]]}))])
    (tmp_path / "rank-0.json").unlink()
    with pytest.raises(ValueError, match="rank-0.json: cannot read it again"):
        ops.compute(traces, OpsOptions(group_by="shape"))


def test_cli_ops_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report --view ops` takes --kinds, --group-by, --flops and --top; a bad value is one line
    and exit 2; --flops is refused by a view without it."""
    traces_of(
        tmp_path, [op("aten::mm", 0, 10, **named({"Input Dims": [[2, 2]]})), runtime("cudaLaunchKernel", 2, 3, 1)]
    )
    argv = ["report", str(tmp_path), "--view", "ops", "--format", "json", "--no-cache"]
    assert main([*argv, "--group-by", "shape", "--flops", "--kinds", "op", "--top", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["input_dims"], r["count"], r["flop_count"]) for r in rows] == [
        ("aten::mm", "[[2, 2]]", 1, None)
    ]
    assert main([*argv, "--kinds", "bogus"]) == 2
    assert "--view ops: kinds must be" in capsys.readouterr().err
    assert main([*argv[:3], "kernels", "--flops"]) == 2


def test_call_tree_merges_calls_by_path(tmp_path: Path) -> None:
    """Two steps: ProfilerStep#1 [0, 100] ⊃ aten::linear [10, 40] ⊃ aten::addmm [12, 38] ⊃
    cudaLaunchKernel [14, 16] → gemm 10 µs; ProfilerStep#2 [100, 200] ⊃ aten::linear
    [110, 150] ⊃ aten::addmm [112, 148] ⊃ cudaLaunchKernel [114, 116] → gemm 20 µs, and
    aten::relu [160, 170] ⊃ cudaLaunchKernel [161, 163] → relu_k 5 µs. Merged by path:
      ProfilerStep* ×2: CPU 200, self 200 − 30 − 40 − 10 = 120, GPU 0 / 35
        aten::linear ×2: CPU 70, self 70 − 26 − 36 = 8, GPU 0 / 30
          aten::addmm ×2: CPU 62, self 62 − 4 = 58, GPU 30 / 30
            cudaLaunchKernel ×2 (4 µs) and the gemm leaf ×2 (GPU 30)
        aten::relu ×1: CPU 10, self 8, GPU 5 / 5 (+ its call and the relu_k leaf)."""
    traces = traces_of(
        tmp_path,
        [
            step(1, 0, 100),
            op("aten::linear", 10, 30),
            op("aten::addmm", 12, 26),
            runtime("cudaLaunchKernel", 14, 2, 1),
            kernel("gemm", 20, 10, corr=1),
            step(2, 100, 100),
            op("aten::linear", 110, 40),
            op("aten::addmm", 112, 36),
            runtime("cudaLaunchKernel", 114, 2, 2),
            kernel("gemm", 120, 20, corr=2),
            op("aten::relu", 160, 10),
            runtime("cudaLaunchKernel", 161, 2, 3),
            kernel("relu_k", 165, 5, corr=3),
        ],
    )
    every = Scope(steps=Steps("all"))
    nodes = op_tree.build(job_tree.tree(traces, OpsOptions(every)))
    by_name = {(r["name"], r["depth"]): r for r in nodes.iter_rows(named=True)}
    figures = ("count", "cpu_total_us", "cpu_self_us", "gpu_self_us", "gpu_total_us")

    def of(name: str, depth: int) -> tuple[Any, ...]:
        return tuple(by_name[(name, depth)][f] for f in figures)

    assert nodes.height == 8
    assert of("ProfilerStep*", 0) == (2, 200.0, 120.0, 0.0, 35.0)
    assert of("aten::linear", 1) == (2, 70.0, 8.0, 0.0, 30.0)
    assert of("aten::addmm", 2) == (2, 62.0, 58.0, 30.0, 30.0)
    assert of("cudaLaunchKernel", 3) == (2, 4.0, 4.0, 0.0, 0.0)
    assert of("gemm", 3) == (2, 0.0, 0.0, 30.0, 30.0)
    assert of("aten::relu", 1) == (1, 10.0, 8.0, 5.0, 5.0)
    addmm = by_name[("aten::addmm", 2)]
    assert by_name[("gemm", 3)]["parent_node"] == addmm["node"]
    assert op_tree.launcher_of(nodes, 0, "gemm", "kernel") == addmm["node"]
    assert op_tree.launcher_of(nodes, 0, "unknown", "kernel") is None
    # `report --view op-tree`: depth first, heaviest GPU total first at each level.
    listed = op_tree.compute(traces, op_tree.OpTreeOptions(every))
    assert listed["call_path"].to_list() == [
        "ProfilerStep*",
        "  aten::linear",
        "    aten::addmm",
        "      gemm",
        "      cudaLaunchKernel",
        "  aten::relu",
        "    relu_k",
        "    cudaLaunchKernel",
    ]


def memory_instant(ts: float, tid: int = 1) -> dict[str, Any]:
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "s": "t",
        "args": {"Bytes": 512},
    }


def test_memory_events_outside_every_event_are_a_row(tmp_path: Path) -> None:
    """aten::empty [0, 10] on thread 1. [memory] at 5 (inside), at 10 (its end: inside, ends
    count), at 5 on thread 2 (inside an event of another thread still counts: the profiler
    matches by time alone), and at 20 and 30 (outside everything): key_averages lists
    "[memory]" with 2 calls and no time."""
    events = [
        op("aten::empty", 0, 10),
        memory_instant(5),
        memory_instant(10),
        memory_instant(5, tid=2),
        memory_instant(20),
        memory_instant(30, tid=2),
    ]
    traces = traces_of(tmp_path, events)
    rows = table(traces, kinds="host")
    assert rows[("[memory]", "memory")] == (2, 0.0, 0.0, 0.0, 0.0)
    assert rows[("aten::empty", "op")] == (1, 10.0, 10.0, 0.0, 0.0)
    assert ("[memory]", "memory") not in table(traces, kinds="op")
