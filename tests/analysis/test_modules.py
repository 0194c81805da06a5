"""The module view (issue 37, item 4): time per nn.Module instance and type, and the module tree."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, runtime, step, traces_of

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import modules
from htatui.analysis.views.modules import ModulesOptions

RESNET = "h100_resnet_memory_profile"


def module(name: str, ts: float, dur: float, *, tid: int = 1) -> dict[str, Any]:
    return cpu_op(f"nn.Module: {name}", ts, dur, tid=tid, cat="python_function")


def small_model() -> list[dict[str, Any]]:
    """One step [0, 1000): Net_0 [0, 100) holds Block_0 twice, [10, 40) and [60, 80); launches
    at 20 (a 30 µs kernel), 50 (10 µs, in Net_0 only) and 70 (5 µs); a launch at 200 outside every
    module (the backward on the main thread here) launches 7 µs."""
    return [
        step(1, 0, 1000),
        module("Net_0", 0, 100),
        module("Block_0", 10, 30),
        module("Block_0", 60, 20),
        runtime("cudaLaunchKernel", 20, 5, 1),
        kernel("gemm", 300, 30, corr=1),
        runtime("cudaLaunchKernel", 50, 5, 2),
        kernel("add", 330, 10, corr=2),
        runtime("cudaLaunchKernel", 70, 5, 3),
        kernel("relu", 340, 5, corr=3),
        runtime("cudaLaunchKernel", 200, 5, 4),
        kernel("backward_gemm", 350, 7, corr=4),
    ]


def test_instances_types_and_tree_by_hand(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, small_model())
    options = ModulesOptions()
    table = modules.compute(traces, options).frame
    rows = {row["module"]: row for row in table.to_dicts()}
    # Block_0: two calls, 30 + 20 µs host, kernels 30 + 5 launched inside it.
    assert rows["Block_0"] == {
        "rank": 0,
        "module": "Block_0",
        "type": "Block",
        "parent": "Net_0",
        "depth": 1,
        "calls": 2,
        "host_total_us": 50.0,
        "host_self_us": 50.0,
        "gpu_self_us": 35.0,
        "gpu_total_us": 35.0,
        "kernels": 2,
    }
    # Net_0: 100 µs, 50 of them in Block_0; the 10 µs add is its own; 45 in all. The 7 µs kernel
    # launched outside every module is nobody's.
    assert rows["Net_0"] | {"parent": None} == {
        "rank": 0,
        "module": "Net_0",
        "type": "Net",
        "parent": None,
        "depth": 0,
        "calls": 1,
        "host_total_us": 100.0,
        "host_self_us": 50.0,
        "gpu_self_us": 10.0,
        "gpu_total_us": 45.0,
        "kernels": 3,
    }
    assert table["module"].to_list() == ["Net_0", "Block_0"]  # by GPU total
    types = modules.types(traces, options).frame
    assert types.select("type", "instances", "calls", "gpu_total_us").rows() == [
        ("Net", 1, 1, 45.0),
        ("Block", 1, 2, 35.0),
    ]
    tree = modules.tree(traces, options).frame
    assert tree.select("call_path", "kind", "count", "gpu_self_us", "gpu_total_us").rows() == [
        ("Net_0", "module", 1, 10.0, 45.0),
        ("  Block_0", "module", 2, 35.0, 35.0),
        ("    gemm", "kernel", 1, 30.0, 30.0),
        ("    relu", "kernel", 1, 5.0, 5.0),
        ("  add", "kernel", 1, 10.0, 10.0),
    ]


def test_a_trace_without_modules_says_how_to_record_them(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, 1), kernel("k", 20, 5, corr=1)])
    for table in (modules.compute, modules.types, modules.tree):
        result = table(traces, ModulesOptions())
        assert result.frame.height == 0 and result.message == modules.NO_MODULES


def _kernels_inside_each_module(path: Path) -> dict[str, tuple[float, int]]:
    """Per module instance, the device time and count of the work launched inside its calls,
    from the raw JSON: a launch (runtime call) on the module's thread starting in its span."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    device: dict[int, list[float]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            correlation = e.get("args", {}).get("correlation")
            if correlation is not None:
                device[correlation].append(float(e["dur"]))
    launches = [
        (e["tid"], float(e["ts"]), e["args"]["correlation"])
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    ]
    found: dict[str, tuple[float, int]] = {}
    for e in events:
        if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: "):
            start, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            inside = [d for tid, ts, c in launches if tid == e["tid"] and start <= ts <= end for d in device.get(c, [])]
            total, count = found.get(e["name"][11:], (0.0, 0))
            found[e["name"][11:]] = (total + sum(inside), count + len(inside))
    return found


def test_resnet_gpu_totals_are_the_kernels_launched_inside(load_shared: Any, shared_traces: Path) -> None:
    traces = load_shared(RESNET)
    every = ModulesOptions(scope=Scope(steps=Steps("all")))
    table = modules.compute(traces, every).frame
    (path,) = (shared_traces / RESNET).iterdir()
    derived = _kernels_inside_each_module(path)
    assert table.height == len(derived) == 68  # ResNet-18: 68 module instances
    for row in table.iter_rows(named=True):
        total, count = derived[row["module"]]
        assert row["gpu_total_us"] == pytest.approx(total, rel=1e-9, abs=1e-6), row["module"]
        assert row["kernels"] == count, row["module"]
    # Two forwards (steps 2 and 3), each launching 187 device rows inside ResNet_0.
    top = table.filter(pl.col("module") == "ResNet_0").row(0, named=True)
    assert (top["calls"], top["kernels"]) == (2, 374)


def test_resnet_children_never_exceed_parents(load_shared: Any) -> None:
    traces = load_shared(RESNET)
    tree = modules.tree(traces, ModulesOptions()).frame
    totals = dict(zip(tree["node"].to_list(), tree["gpu_total_us"].to_list(), strict=True))
    hosts = dict(zip(tree["node"].to_list(), tree["host_total_us"].to_list(), strict=True))
    for row in tree.filter(pl.col("parent_node").is_not_null() & (pl.col("kind") == "module")).iter_rows(named=True):
        assert row["gpu_total_us"] <= totals[row["parent_node"]] + 1e-9, row["call_path"]
        assert row["host_total_us"] <= hosts[row["parent_node"]] + 1e-9, row["call_path"]
    # A node's total is its own work and its children's.
    children = tree.group_by("parent_node").agg(pl.col("gpu_total_us").sum())
    sums = dict(zip(children["parent_node"].to_list(), children["gpu_total_us"].to_list(), strict=True))
    for row in tree.filter(pl.col("kind") == "module").iter_rows(named=True):
        leaves_and_children = sums.get(row["node"], 0.0)
        assert row["gpu_total_us"] == pytest.approx(leaves_and_children, rel=1e-9, abs=1e-6), row["call_path"]
