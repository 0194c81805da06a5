"""Operator arguments the event frame does not keep: input shapes and FLOP counts.

`record_shapes=True` puts each op's `Input Dims` in its args and `with_flops=True` its
estimated `flops`. Only the ops table asks for them (grouping by shape, achieved TFLOP/s), so
they are read from the rank's file on demand, keyed by the event's file position (`index`,
as in the event frame), instead of widening every loaded (and cached) frame.
"""

from __future__ import annotations

import msgspec
import polars as pl

from htatui.sources import SourcePath
from htatui.trace.decode import OPERATOR_ARGS_DECODER, RawEvent, TraceFormatError
from htatui.trace.events import read_raw_events
from htatui.trace.fetch import read_source_bytes
from htatui.trace.kineto import spellings
from htatui.trace.reread import REREAD

OP_ARGS_SCHEMA: dict[str, pl.DataType] = {
    "index": pl.Int64(),
    "input_dims": pl.Utf8(),
    "flops": pl.Float64(),
}
"""One row per host event with shapes or flops: `input_dims` as key_averages prints input
shapes (Python's `str` of the list of lists, "[[64, 100], []]"); `flops` the profiler's
estimate for the call (null when the trace has none)."""

CALL_ARGS_SCHEMA: dict[str, pl.DataType] = OP_ARGS_SCHEMA | {
    "dims_json": pl.Utf8(),
    "types_json": pl.Utf8(),
    "strides_json": pl.Utf8(),
    "concrete_json": pl.Utf8(),
}
"""OP_ARGS_SCHEMA plus the call's `Input Dims`, `Input type`, `Input Strides` and `Concrete
Inputs` as JSON text (null when absent), for the performance model (`htatui/analysis/perf`)."""

OP_CATS = spellings("cpu_op", "user_annotation")
"""The categories whose events carry shapes and flops."""


class OpArgsError(ValueError):
    """The file cannot be read again for its op arguments; the message names it (a ValueError:
    the CLI and the TUI report it like any input a view refuses)."""


def read_op_args(path: SourcePath) -> pl.DataFrame:
    """`OP_ARGS_SCHEMA` rows for the ops of the trace file at `path` (kept per file version)."""
    return read_call_args(path).select(list(OP_ARGS_SCHEMA))


def read_call_args(path: SourcePath) -> pl.DataFrame:
    """`CALL_ARGS_SCHEMA` rows for the ops of the trace file at `path` (kept per file version by
    `reread.REREAD`; one read serves both readers)."""
    try:
        return REREAD.read(path, "op_args", _read_call_args)
    except OSError as exc:
        raise OpArgsError(f"{path}: cannot read it again for input shapes/flops ({exc.strerror})") from None


def _read_call_args(path: SourcePath) -> pl.DataFrame:
    try:
        rows, _ = read_raw_events(read_source_bytes(path), OpArgRows, [])
    except (OSError, TraceFormatError) as exc:
        raise OpArgsError(f"{path}: cannot read it again for input shapes/flops ({exc})") from None
    return rows.frame()


class OpArgRows:
    """The shapes and flops of a trace's ops, gathered a piece at a time (a `read_raw_events` sink)."""

    def __init__(self) -> None:
        self.events_seen = 0
        self.index: list[int] = []
        self.dims: list[str | None] = []
        self.flops: list[float | None] = []
        self.json: dict[str, list[str | None]] = {key: [] for key in _JSON_COLUMNS}

    def add(self, events: list[RawEvent]) -> None:
        for position, event in enumerate(events, start=self.events_seen):
            if event.cat not in OP_CATS or not event.args:
                continue
            try:
                args = OPERATOR_ARGS_DECODER.decode(event.args)
            except (msgspec.DecodeError, UnicodeDecodeError):
                continue  # malformed args of one event: it simply has no shapes
            if args.input_dims is None and args.flops is None:
                continue
            self.index.append(position)
            self.dims.append(None if args.input_dims is None else str(args.input_dims))
            count = args.flops
            self.flops.append(float(count) if isinstance(count, int | float) and not isinstance(count, bool) else None)
            for key, value in zip(
                _JSON_COLUMNS, (args.input_dims, args.input_type, args.input_strides, args.concrete_inputs), strict=True
            ):
                self.json[key].append(None if value is None else msgspec.json.encode(value).decode())
        self.events_seen += len(events)

    def frame(self) -> pl.DataFrame:
        columns = {"index": self.index, "input_dims": self.dims, "flops": self.flops, **self.json}
        return pl.DataFrame(columns, schema=CALL_ARGS_SCHEMA)


_JSON_COLUMNS = ("dims_json", "types_json", "strides_json", "concrete_json")
