"""CUPTI range-profiler counters: the args of `cuda_profiler_range` events, read on demand.

A trace recorded with the profiler's CUPTI range profiler (`experimental_config` with
`profiler_metrics`, per-kernel mode) holds one `cuda_profiler_range` event per counted kernel
whose args are the counter values, keyed by the metric's name
(`smsp__sass_thread_inst_executed_op_ffma_pred_on.sum` …). The metric names are whatever the user
asked for, so the event frame (fixed columns) cannot keep them: only the CUPTI view needs them and
reads them from the rank's file, keyed by the event's file position (`index`), as op_args.py does
for shapes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec
import polars as pl

from htatui.errors import HtatuiError
from htatui.sources import SourcePath
from htatui.trace.decode import RawEvent, TraceFormatError
from htatui.trace.events import read_raw_events
from htatui.trace.fetch import read_source_bytes
from htatui.trace.plausible import count
from htatui.trace.reread import REREAD

PROFILER_RANGE_CAT = "cuda_profiler_range"
"""The category of a counted kernel's event."""

_ARGS_DECODER = msgspec.json.Decoder(dict[str, Any])


@dataclass(frozen=True)
class Counters:
    """A file's counters (`frame`: `index` plus one column per counter) and, per counter name, how
    many values were dropped as no GPU can produce them (`plausible.count`)."""

    frame: pl.DataFrame
    dropped: dict[str, int] = field(default_factory=dict)


class CounterArgsError(HtatuiError, ValueError):
    """The file cannot be read again for its counters; the message names it (a ValueError: the CLI
    and the TUI report it like any input a view refuses)."""


def read_counter_args(path: SourcePath) -> Counters:
    """`index` plus one column per counter name, in the order first seen, for every
    `cuda_profiler_range` event of the trace at `path` (kept per file version by `reread.REREAD`).

    A counter whose values are all integers is Int64 (the counts stay exact), else Float64; an
    event that lacks a counter has null there. A value that is not a plausible count (negative,
    not finite, beyond 1e18, text, null, a list) is null too, and counted in `dropped`.
    """
    try:
        return REREAD.read(path, "counter_args", _read_counter_args)
    except OSError as exc:
        raise CounterArgsError(f"{path}: cannot read it again for CUPTI counters ({exc.strerror})") from None


def _read_counter_args(path: SourcePath) -> Counters:
    try:
        rows, _ = read_raw_events(read_source_bytes(path), CounterRows, [])
    except (OSError, TraceFormatError) as exc:
        raise CounterArgsError(f"{path}: cannot read it again for CUPTI counters ({exc})") from None
    return Counters(rows.frame(), dict(rows.dropped))


class CounterRows:
    """The counter values of a trace's profiler ranges, a piece at a time (a `read_raw_events` sink)."""

    def __init__(self) -> None:
        self.events_seen = 0
        self.index: list[int] = []
        self.values: list[dict[str, int | float]] = []
        self.dropped: Counter[str] = Counter()

    def add(self, events: list[RawEvent]) -> None:
        for position, event in enumerate(events, start=self.events_seen):
            if event.cat != PROFILER_RANGE_CAT or event.ph != "X":
                continue
            counters: dict[str, int | float] = {}
            if event.args:
                try:
                    args = _ARGS_DECODER.decode(event.args)
                except (msgspec.DecodeError, UnicodeDecodeError):
                    args = {}  # malformed args of one event: it has no counters
                for name, value in args.items():
                    if name == "index":
                        continue
                    if count(value) is None:
                        self.dropped[name] += 1
                    else:
                        counters[name] = value
            self.index.append(position)
            self.values.append(counters)
        self.events_seen += len(events)

    def frame(self) -> pl.DataFrame:
        names = list(dict.fromkeys(name for counters in self.values for name in counters))
        columns: dict[str, pl.Series] = {"index": pl.Series("index", self.index, dtype=pl.Int64)}
        for name in names:
            values = [counters.get(name) for counters in self.values]
            whole = all(value is None or isinstance(value, int) for value in values)
            # Counts beyond 64 bits cannot be Int64: Float64 then, like any fractional metric.
            fits = whole and all(value is None or -(2**63) <= value < 2**63 for value in values)
            columns[name] = pl.Series(name, values, dtype=pl.Int64 if fits else pl.Float64, strict=False)
        return pl.DataFrame(list(columns.values()))
