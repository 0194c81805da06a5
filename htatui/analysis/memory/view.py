"""The GPU memory view of a loaded job (`report --view memory`, the Memory page, `htatui memory DIR`).

Its tables are those of the chosen ranks' `[memory]` events in the scope's steps
(`memory.job.job_analysis`), every device's rows together, each with the sentence why it is
empty; `--device` keeps one device's rows, `--top` the largest sites of each device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.columns import ColumnSpec, TableColumns
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.memory import tables
from htatui.analysis.memory import usage as memory
from htatui.analysis.memory.job import NO_MEMORY_EVENTS, job_analysis
from htatui.analysis.memory.usage import MemoryAnalysis
from htatui.trace.model import TraceSet


@dataclass(frozen=True)
class MemoryOptions(CommonOptions):
    """How many sites per device, and which device."""

    top_k: int | None = knob(
        10, flag="--top", help="memory: sites listed per device (all: every site)", kind="int", label="top-k", minimum=1
    )
    device: str | None = knob(
        None, flag="--device", help="memory: only this device's rows (cuda:0; over ranks: rank 1 cuda:0)", kind="text"
    )


_EMPTY: dict[str, dict[str, pl.DataType]] = {
    "summary": {
        "device": pl.Utf8(),
        "peak_bytes": pl.Int64(),
        "allocator_peak_bytes": pl.Int64(),
        "end_bytes": pl.Int64(),
        "allocator_end_bytes": pl.Int64(),
        **{k: v for k, v in memory.SUMMARY_SCHEMA.items() if k not in ("device", "peak_bytes", "end_bytes")},
        "leak_suspected": pl.Boolean(),
    },
    "sites": {"device": pl.Utf8(), **memory.SITES_SCHEMA},
    "oom": {**memory.OOM_SCHEMA, "why": pl.Utf8()},
    "growth": memory.GROWTH_SCHEMA,
    "spans": memory.SPAN_PEAK_SCHEMA,
    "series": memory.SERIES_SCHEMA,
}


_MEANINGS: dict[str, str] = {
    "device": "the device (rank R cuda:N over several ranks)",
    "peak_bytes": "the most bytes allocated at once",
    "allocator_peak_bytes": "the peak as torch.cuda.max_memory_allocated counts it (blocks rounded up to 512 B)",
    "end_bytes": "bytes still allocated at the end",
    "allocator_end_bytes": "the end as torch.cuda.memory_allocated counts it",
    "peak_time_us": "when the peak was reached",
    "peak_seq": "the event number of the peak",
    "reserved_peak_bytes": "the most bytes the caching allocator held from the device",
    "start_bytes": "bytes allocated at the start",
    "live_blocks_at_peak": "blocks allocated at the peak",
    "events": "[memory] events read",
    "leak_suspected": "live bytes at the same point of each step rise at every step",
    "site": "where the bytes were allocated (the op or annotation around the allocation)",
    "bytes": "bytes allocated there at the peak",
    "count": "blocks allocated there at the peak",
    "share_pct": "bytes as a share of the peak",
    "seq": "the [memory] event's number",
    "time_us": "when it happened",
    "requested_bytes": "bytes the failed allocation asked for",
    "device_free_bytes": "bytes the device had free then",
    "live_bytes": "bytes allocated then",
    "reserved_bytes": "bytes the caching allocator held then",
    "top_site": "the site holding the most live bytes",
    "why": "why the allocation failed, in words",
    "point": "the point of each step compared (its start)",
    "growth_bytes": "live_bytes minus the previous step's",
    "kind": "step or top-level annotation",
    "name": "the step's or annotation's name",
    "start_us": "when it starts",
    "dur_us": "how long it lasts",
    "allocated_bytes": "bytes allocated after the event",
}
_KEYS = {
    "summary": "peak_bytes",
    "sites": "bytes",
    "growth": "live_bytes",
    "spans": "peak_bytes",
    "oom": "requested_bytes",
}
_IDS = {"device", "site", "name", "point"}


def _spec(name: str) -> TableColumns:
    """The columns of one of the view's tables (`_EMPTY`'s schema), with what each means."""
    return TableColumns(
        *(
            ColumnSpec(
                column,
                dtype,
                _MEANINGS[column],
                "id" if column in _IDS else "key" if column == _KEYS.get(name) else "normal",
                sentence=column == "why",
            )
            for column, dtype in _EMPTY[name].items()
        )
    )


SPECS: dict[str, TableColumns] = {name: _spec(name) for name in _EMPTY}
"""Each table's column declarations, by the `_EMPTY` name."""


def _table(
    traces: TraceSet, options: MemoryOptions, name: str, make: Callable[[MemoryAnalysis], pl.DataFrame], empty: str
) -> NotedTable:
    analysis = job_analysis(traces, options)
    if analysis is None:
        return NotedTable(pl.DataFrame(schema=_EMPTY[name]), NO_MEMORY_EVENTS)
    frame = make(analysis)
    if options.device is not None:
        devices = analysis.summary["device"].to_list()
        if options.device not in devices:
            raise ValueError(f"no device {options.device!r} (the chosen ranks have {', '.join(devices)})")
        frame = frame.filter(pl.col("device") == options.device)
    return NotedTable(frame, None if frame.height else empty)


def summary(traces: TraceSet, options: MemoryOptions) -> NotedTable:
    """Per device: peak and end (requested, and as the allocator rounds them), reserved peak, leak verdict."""
    return _table(traces, options, "summary", tables.summary_table, NO_MEMORY_EVENTS)


def sites(traces: TraceSet, options: MemoryOptions) -> NotedTable:
    """Per device, the bytes live at its peak by allocation site (traces: the top-level annotation)."""
    return _table(
        traces, options, "sites", lambda analysis: tables.sites_table(analysis, options.top_k), "nothing live at a peak"
    )


def growth(traces: TraceSet, options: MemoryOptions) -> NotedTable:
    """Live bytes at the start of each step; rising at every step is a probable leak."""
    return _table(traces, options, "growth", tables.growth_table, "fewer than two steps or annotations to compare")


def spans(traces: TraceSet, options: MemoryOptions) -> NotedTable:
    """The peak inside each ProfilerStep and top-level annotation, with the bytes on entry and exit."""
    return _table(traces, options, "spans", tables.spans_table, "no ProfilerStep or top-level annotation")


def ooms(traces: TraceSet, options: MemoryOptions) -> NotedTable:
    """Each out-of-memory error: what was asked, what the device had free, what was live, and why."""
    return _table(traces, options, "oom", tables.oom_table, "no out-of-memory error recorded")


def series(traces: TraceSet, options: MemoryOptions) -> NotedTable:
    """Allocated and reserved bytes after each allocator event."""
    return _table(traces, options, "series", tables.series_table, NO_MEMORY_EVENTS)
