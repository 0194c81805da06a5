"""`report --view ops` against PyTorch's own `prof.key_averages()` of the same run.

The oracles (../shared/oracles/<name>/key_averages.json) are what the profiler computed on the
H100 runs whose traces are ../shared/traces/<name>: every row it lists (operators, user
annotations, runtime and driver calls, and the device rows: kernels, copies, memsets, GPU
annotations) must be ours too, with the same count and times within 1 µs or 0.1 %.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.model import job_tree
from htatui.analysis.model.op_events import DEVICE_KINDS
from htatui.analysis.views import op_tree, ops
from htatui.trace import TraceSet

EVERY_STEP = Scope(steps=Steps("all"))
"""key_averages counts every event of the run: the scope that keeps the whole trace."""

ORACLES = ("h100_resnet_eager", "h100_resnet_memory_profile", "h100_gpt_compile")
ROWS = {"h100_resnet_eager": 178, "h100_resnet_memory_profile": 178, "h100_gpt_compile": 197}
"""key_averages' row count per run (the compile run: 37 inductor Triton launcher rows, each also a kernel row)."""
FIELDS = (
    ("count", "count"),
    ("self_cpu_us", "cpu_self_us"),
    ("cpu_total_us", "cpu_total_us"),
    ("self_device_us", "gpu_self_us"),
    ("device_total_us", "gpu_total_us"),
)


def oracle(shared_traces: Path, name: str) -> list[dict[str, Any]]:
    path = shared_traces.parent / "oracles" / name / "key_averages.json"
    if not path.is_file():
        pytest.skip(f"oracle not found at {path}")
    rows: list[dict[str, Any]] = json.loads(path.read_text())
    return rows


def close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= max(1.0, 0.001 * abs(theirs))


def is_device_row(row: dict[str, Any], ours: pl.DataFrame) -> bool:
    """key_averages keys a row on (name, device type): a name listed twice (a CPU annotation and
    its GPU span) is told apart by CPU time, which device rows never have."""
    device_names = set(ours.filter(pl.col("kind").is_in(DEVICE_KINDS))["name"].to_list())
    return row["name"] in device_names and row["self_cpu_us"] == 0 and row["cpu_total_us"] == 0


@pytest.mark.parametrize("name", ORACLES)
def test_ops_equal_key_averages(name: str, shared_traces: Path, load_shared: Callable[[str], TraceSet]) -> None:
    expected = oracle(shared_traces, name)
    ours = ops.compute(load_shared(name), ops.OpsOptions(EVERY_STEP, kinds="all"))
    matched: set[tuple[str, str]] = set()
    mismatches: list[str] = []
    for row in expected:
        device = is_device_row(row, ours)
        kinds = DEVICE_KINDS if device else tuple(k for k in ours["kind"].unique() if k not in DEVICE_KINDS)
        found = ours.filter((pl.col("name") == row["name"]) & pl.col("kind").is_in(kinds))
        if found.height != 1:
            mismatches.append(f"{row['name']}: {found.height} rows of ours")
            continue
        mine = found.row(0, named=True)
        matched.add((mine["name"], mine["kind"]))
        for theirs_field, our_field in FIELDS:
            if not close(float(mine[our_field]), float(row[theirs_field])):
                mismatches.append(
                    f"{row['name']} {our_field}: ours {mine[our_field]}, key_averages {row[theirs_field]}"
                )
    extra = [key for key in zip(ours["name"], ours["kind"], strict=True) if key not in matched]
    assert mismatches == [] and extra == []
    assert len(expected) == ours.height == ROWS[name]


@pytest.mark.parametrize("name", ORACLES)
def test_ops_host_rows_are_the_cpu_rows_of_key_averages(
    name: str, shared_traces: Path, load_shared: Callable[[str], TraceSet]
) -> None:
    """The default (host) table has exactly key_averages' rows with CPU time, and every kind."""
    expected = {r["name"] for r in oracle(shared_traces, name) if r["cpu_total_us"] > 0}
    ours = ops.compute(load_shared(name), ops.OpsOptions(EVERY_STEP))
    assert set(ours["name"].to_list()) >= expected
    launchers = {"kernel-launcher"} if name == "h100_gpt_compile" else set()
    assert set(ours["kind"].unique().to_list()) == {"op", "annotation", "runtime", "driver"} | launchers
    zero_cpu = ours.filter(pl.col("cpu_total_us") == 0)["name"].to_list()
    assert set(ours["name"].to_list()) - expected == set(zero_cpu)


def test_group_by_shape_adds_up_to_the_name_rows(load_shared: Callable[[str], TraceSet]) -> None:
    """On a record_shapes trace, the shape rows of each (name, kind) sum to its name row."""
    traces = load_shared("h100_resnet_eager")
    by_name = ops.compute(traces, ops.OpsOptions(sort_by="name"))
    by_shape = ops.compute(traces, ops.OpsOptions(group_by="shape", sort_by="name"))
    summed = (
        by_shape.group_by("rank", "name", "kind")
        .agg(pl.col("count", "cpu_total_us", "cpu_self_us", "gpu_self_us", "gpu_total_us").sum())
        .sort("name", "kind")
    )
    expected = by_name.sort("name", "kind")
    assert summed.select("name", "kind", "count").rows() == expected.select("name", "kind", "count").rows()
    for column in ("cpu_total_us", "cpu_self_us", "gpu_self_us", "gpu_total_us"):
        assert summed[column].to_list() == pytest.approx(expected[column].to_list())
    # aten::convolution is called with several input shapes (ResNet's stages).
    assert by_shape.filter(pl.col("name") == "aten::convolution").height > 1


def test_call_tree_nodes_add_up_to_the_table(load_shared: Callable[[str], TraceSet]) -> None:
    """Every node of a name summed = that name's row (hence key_averages' row) on a real trace."""
    traces = load_shared("h100_resnet_eager")
    nodes = op_tree.build(job_tree.tree(traces, ops.OpsOptions()))
    figures = ["count", "cpu_total_us", "cpu_self_us", "gpu_self_us", "gpu_total_us"]
    summed = nodes.group_by("rank", "name", "kind").agg(pl.col(figures).sum()).sort("name", "kind")
    table = ops.compute(traces, ops.OpsOptions(kinds="op,annotation,runtime,driver,kernel,memcpy,memset"))
    table = table.sort("name", "kind")
    assert summed.select("name", "kind", "count").rows() == table.select("name", "kind", "count").rows()
    for column in figures[1:]:
        assert summed[column].to_list() == pytest.approx(table[column].to_list())
