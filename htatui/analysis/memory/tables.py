"""The GPU memory tables, from one recording's analysis: what `htatui memory`, `report --view
memory` and the Memory page show (every device's rows, a `device` column first)."""

from __future__ import annotations

import polars as pl

from htatui.analysis.memory import usage as memory
from htatui.analysis.memory.usage import MemoryAnalysis

SUMMARY_FIRST = ("device", "peak_bytes", "allocator_peak_bytes", "end_bytes", "allocator_end_bytes")


def summary_table(analysis: MemoryAnalysis) -> pl.DataFrame:
    """Per device: the peak and end (requested sizes and as the allocator rounds them), the reserved
    peak, what was live before recording, the blocks live at the peak, and the leak verdict."""
    growth = memory.growth(analysis)
    leaks = pl.DataFrame(
        {"device": list(growth.leaking), "leak_suspected": list(growth.leaking.values())},
        schema={"device": pl.Utf8(), "leak_suspected": pl.Boolean()},
    )
    joined = analysis.summary.join(memory.allocator_allocated(analysis), on="device", how="left").join(
        leaks, on="device", how="left"
    )
    return joined.select(*SUMMARY_FIRST, *(name for name in joined.columns if name not in SUMMARY_FIRST))


def sites_table(analysis: MemoryAnalysis, top: int | None) -> pl.DataFrame:
    """Per device, the bytes live at its peak by allocation site, largest first (`top` per device)."""
    frames = [
        analysis.sites_at_peak(device, top).select(pl.lit(device).alias("device"), pl.all())
        for device in analysis.summary["device"].to_list()
    ]
    empty = pl.DataFrame(schema={"device": pl.Utf8(), **memory.SITES_SCHEMA})
    return pl.concat(frames) if frames else empty


def oom_table(analysis: MemoryAnalysis) -> pl.DataFrame:
    """Each out-of-memory error: when, what was asked, what the device had free, what was live, and why."""
    found = memory.ooms(analysis)
    why = [memory.oom_reason(analysis, row) for row in found.iter_rows(named=True)]
    return found.with_columns(pl.Series("why", why, dtype=pl.Utf8))


def growth_table(analysis: MemoryAnalysis) -> pl.DataFrame:
    """Live bytes at the same point of each step (rising at every step: a probable leak)."""
    return memory.growth(analysis).points


def spans_table(analysis: MemoryAnalysis) -> pl.DataFrame:
    """The peak inside each ProfilerStep and top-level annotation, with the bytes on entry and exit."""
    return memory.span_peaks(analysis)


def allocator_table(analysis: MemoryAnalysis) -> pl.DataFrame:
    """Per device and stream, the allocator's segments when the snapshot was taken."""
    return memory.allocator_state(analysis.recording)


def series_table(analysis: MemoryAnalysis) -> pl.DataFrame:
    """Allocated and reserved bytes after each allocator event."""
    return analysis.series
