"""`htatui diff --hta-compat` against HTA 0.6.1's TraceDiff.compare_traces, run in this test."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.diff.compare import DiffOptions, compare, hta_counts_change
from htatui.trace import TraceSet

hta_trace_diff = pytest.importorskip(
    "hta.trace_diff", reason="HTA is not installed (pip install 'traceinsight==0.6.1' 'pandas<3')"
)

PAIRS = {
    "trace_compare": ("trace_compare/base", "trace_compare/test"),
    "trace_diff": ("trace_diff/control", "trace_diff/test"),
}
BY_DEVICE = {"all": "ALL", "kernel": "GPU", "op": "CPU"}

_LABELED: dict[str, Any] = {}


@pytest.fixture(scope="module")
def labeled(shared_traces: Path) -> Callable[[str], Any]:
    """HTA's LabeledTrace of a shared folder, parsed once per module."""
    logging.getLogger("hta").setLevel(logging.ERROR)

    def get(folder: str) -> Any:
        if folder not in _LABELED:
            label = "Control" if folder.endswith(("base", "control")) else "Test"
            _LABELED[folder] = hta_trace_diff.LabeledTrace(label, trace_dir=str(shared_traces / folder))
        return _LABELED[folder]

    return get


def hta_frame(control: Any, test: Any, steps: str | int, by: str, short: bool) -> pl.DataFrame:
    kwargs: dict[str, Any] = {}
    if steps == "all":
        kwargs = {"control_iteration": control.iterations(), "test_iteration": test.iterations()}
    elif isinstance(steps, int):
        kwargs = {"control_iteration": steps, "test_iteration": steps}
    device = getattr(hta_trace_diff.DeviceType, BY_DEVICE[by])
    result = hta_trace_diff.TraceDiff.compare_traces(control, test, device_type=device, use_short_name=short, **kwargs)
    frame = pl.from_pandas(result.reset_index())
    return frame.rename({frame.columns[0]: "name"}).select(
        "name",
        base_count=pl.col("Control_counts").cast(pl.Float64),
        base_total_us=pl.col("Control_total_duration").cast(pl.Float64),
        test_count=pl.col("Test_counts").cast(pl.Float64),
        test_total_us=pl.col("Test_total_duration").cast(pl.Float64),
        hta_change=pl.col("counts_change_categories"),
    )


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("steps", ["common", "all", 1010])
@pytest.mark.parametrize("by", ["all", "kernel", "op"])
@pytest.mark.parametrize("short", [False, True], ids=["full", "short"])
def test_counts_and_totals_match_hta(
    pair: str,
    steps: str | int,
    by: str,
    short: bool,
    labeled: Callable[[str], Any],
    load_shared: Callable[[str], TraceSet],
) -> None:
    base_folder, test_folder = PAIRS[pair]
    expected = hta_frame(labeled(base_folder), labeled(test_folder), steps, by, short)
    options = DiffOptions(scope=Scope(steps=Steps.parse(str(steps)), hta_compat=True), by=by, short_names=short)  # type: ignore[arg-type]
    ours = compare(load_shared(base_folder), load_shared(test_folder), options).frame
    assert ours.height == expected.height
    ours = ours.with_columns(hta_change=hta_counts_change(ours))
    columns = ["name", "base_count", "base_total_us", "test_count", "test_total_us", "hta_change"]
    assert ours.select(columns).sort("name").to_dicts() == expected.select(columns).sort("name").to_dicts()


def test_reference_numbers_trace_compare(load_shared: Callable[[str], TraceSet]) -> None:
    """§F.1: rank 1, iteration 1010, short names."""
    base, test = load_shared("trace_compare/base"), load_shared("trace_compare/test")
    options = DiffOptions(scope=Scope(steps=Steps.parse("1010"), hta_compat=True), rank=1, short_names=True)
    cpu = compare(base, test, dataclasses.replace(options, by="op")).frame
    gpu = compare(base, test, dataclasses.replace(options, by="kernel")).frame
    assert hta_counts_change(cpu).value_counts().sort("counts_change").rows() == [
        ("+", 3),
        ("-", 1),
        ("=", 5),
    ]
    assert hta_counts_change(gpu).to_list() == ["-"]
    frame = compare(base, test, options).frame
    added = frame.filter((pl.col("base_count") == 0) & (pl.col("test_count") > 0))["name"].sort().to_list()
    deleted = frame.filter((pl.col("base_count") > 0) & (pl.col("test_count") == 0))["name"].sort().to_list()
    unchanged = frame.filter((pl.col("test_count") > 0) & (pl.col("delta_count") == 0))["name"].sort().to_list()
    assert added == ["AddmmBackward0", "All2All_Pooled_Req", "CatBackward0"]
    assert "nccl:all_reduce" in deleted
    assert unchanged == [
        "ProfilerStep#1010",
        "aten::as_strided",
        "aten::empty",
        "cudaEventQuery",
        "cudaLaunchKernel",
    ]
    base_cpu = {n: (c, t) for n, c, t in cpu.select("name", "base_count", "base_total_us").iter_rows() if c > 0}
    assert base_cpu == {
        "ProfilerStep#1010": (1.0, 122149.0),
        "nccl:all_reduce": (1.0, 67.0),
        "cudaEventQuery": (1.0, 4.0),
        "cudaLaunchKernel": (1.0, 4.0),
        "aten::empty": (1.0, 0.0),
        "aten::as_strided": (1.0, 0.0),
    }
