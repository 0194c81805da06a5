"""The raw memory timeline against HTA 0.6.1's MemoryAnalysis on ../shared/traces/memory_timeline
(skipped when absent): the one memory number HTA computes."""

from __future__ import annotations

from pathlib import Path

import pytest

from htatui.analysis.memory import usage as memory
from htatui.trace.memory_inputs import read_memory

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not found (clone with ../shared beside the checkout)")
    return path


def test_raw_memory_timeline_matches_hta() -> None:
    """HTA's MemoryAnalysis._process_raw_events on ../shared/traces/memory_timeline: same samples."""
    hta_memory = pytest.importorskip("hta.memory_analysis")
    path = _need(SHARED / "traces" / "memory_timeline" / "memory_timeline.raw.gz")
    times_ns, sizes = hta_memory.MemoryAnalysis(str(path))._process_raw_events()
    recording = read_memory(path)
    assert recording.kind == "raw_timeline"
    assert recording.events["time_us"].to_list() == [t / 1000.0 for t in times_ns]
    assert recording.events["allocated_bytes"].to_list() == [sum(row) for row in sizes]
    result = memory.analyse(recording)
    row = result.summary.row(0, named=True)
    totals = [sum(r) for r in sizes]
    assert row["peak_bytes"] == max(totals)
    peak_at = totals.index(max(totals))
    by_category = dict(zip(hta_memory._CATEGORY_TO_INDEX, sizes[peak_at], strict=True))
    sites = dict(result.sites_at_peak(row["device"]).select("site", "bytes").rows())
    assert sites["activation"] == by_category["Activation"]
    assert sites["parameter"] == by_category["Parameter"]
