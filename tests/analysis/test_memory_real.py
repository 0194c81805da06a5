"""Memory analysis on the real H100 recordings against ../shared/oracles (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from htatui.analysis.memory import usage as memory
from htatui.trace.memory_inputs import BEFORE_RECORDING_SITE, read_memory

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SNAPSHOT = SHARED / "memory" / "h100_mlp_memory_snapshot" / "snapshot.pickle"
RESNET = SHARED / "traces" / "h100_resnet_memory_profile"
TIMELINE = SHARED / "oracles" / "h100_resnet_memory_profile" / "memory_timeline.json"

# ../shared/oracles/h100_mlp_memory_snapshot.md
ORACLE_TRACE_PEAK = 3223519448
ORACLE_PREEXISTING = 68157440
ORACLE_PEAK_TIME_US = 1795367344928974
ORACLE_TRACE_END = 2417426568


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not found (clone with ../shared beside the checkout)")
    return path


def test_mlp_snapshot_matches_the_oracle() -> None:
    result = memory.analyse(read_memory(_need(SNAPSHOT)))
    row = result.summary.row(0, named=True)
    assert row["device"] == "cuda:0"
    assert row["events"] == 372
    # The viewer's convention: the 3 blocks from before the recording are live throughout.
    assert row["peak_bytes"] == ORACLE_TRACE_PEAK + ORACLE_PREEXISTING == 3291676888
    assert row["peak_time_us"] == ORACLE_PEAK_TIME_US
    assert row["live_blocks_at_peak"] == 58 + 3
    assert row["start_bytes"] == ORACLE_PREEXISTING
    assert row["end_bytes"] == ORACLE_TRACE_END + ORACLE_PREEXISTING
    sites = result.sites_at_peak("cuda:0")
    assert sites["bytes"].sum() == row["peak_bytes"]
    before = sites.filter(pl.col("site") == BEFORE_RECORDING_SITE).row(0, named=True)
    assert (before["bytes"], before["count"]) == (ORACLE_PREEXISTING, 3)
    state = memory.allocator_state(result.recording).row(0, named=True)
    assert (state["segments"], state["reserved_bytes"], state["allocated_bytes"]) == (55, 4135583744, 2485587456)
    assert row["reserved_peak_bytes"] == 4135583744


def test_mlp_snapshot_is_flagged_as_leaking() -> None:
    growth = memory.growth(memory.analyse(read_memory(_need(SNAPSHOT))))
    assert growth.leaking == {"cuda:0": True}
    values = growth.points["live_bytes"].to_list()
    assert len(values) == 4 and values == sorted(values)
    assert growth.growing_sites["cuda:0"].height > 0


def test_resnet_trace_peak_is_where_the_profilers_timeline_peaks() -> None:
    times, sizes = json.loads(_need(TIMELINE).read_text())
    totals = [sum(row) for row in sizes]
    oracle_peak_time = times[totals.index(max(totals))]
    result = memory.analyse(read_memory(_need(RESNET)))
    gpu = result.summary.filter(pl.col("device") == "cuda:0").row(0, named=True)
    # Same instant (the export truncates to whole µs); the trace's total also counts untracked blocks.
    assert abs(gpu["peak_time_us"] - oracle_peak_time) < 1.0
    assert gpu["peak_bytes"] >= max(totals)
    spans = memory.span_peaks(result).filter(pl.col("device") == "cuda:0")
    forward = spans.filter(pl.col("name") == "forward")
    assert forward["peak_bytes"].max() == gpu["peak_bytes"]


def test_resnet_memory_timeline_file() -> None:
    times, sizes = json.loads(_need(TIMELINE).read_text())
    totals = [sum(row) for row in sizes]
    result = memory.analyse(read_memory(TIMELINE))
    row = result.summary.row(0, named=True)
    assert row["peak_bytes"] == max(totals) == 952262080
    assert row["peak_time_us"] == times[totals.index(max(totals))]
    assert row["end_bytes"] == totals[-1]
    sites = result.sites_at_peak(row["device"])
    assert sites["site"][0] == "activation"
    assert sites["bytes"].sum() == max(totals)
