"""Operator arguments the event frame does not keep: input shapes and FLOP counts.

`record_shapes=True` puts each op's `Input Dims` in its args and `with_flops=True` its
estimated `flops`. Only the ops table asks for them (grouping by shape, achieved TFLOP/s), so
they are read from the rank's file on demand, keyed by the event's file position (`index`,
as in the event frame), instead of widening every loaded (and cached) frame.
"""

from __future__ import annotations

import msgspec
import polars as pl

from htatui.errors import HtatuiError
from htatui.sources import SourcePath
from htatui.trace.decode import OPERATOR_ARGS_DECODER, RawEvent, TraceFormatError
from htatui.trace.events import read_raw_events
from htatui.trace.fetch import read_source_bytes
from htatui.trace.kineto import spellings
from htatui.trace.plausible import count, dims_ok
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
    "dropped": pl.Utf8(),
}
"""OP_ARGS_SCHEMA plus the call's `Input Dims`, `Input type`, `Input Strides` and `Concrete
Inputs` as JSON text (null when absent), for the performance model (`htatui/analysis/perf`), and
`dropped`: the fields whose values failed `plausible` ("flops", "Input Dims", comma-separated;
null when none), which are then null here."""

OP_CATS = spellings("cpu_op", "user_annotation")
"""The categories whose events carry shapes and flops."""

CALL_ARGS_READ = "op_args"
"""What `reread.REREAD` keeps the call arguments under (the comm inputs' read keeps them too)."""


def host_ops(events: list[RawEvent], first: int) -> list[tuple[int, RawEvent]]:
    """(file position, event) of the events of OP_CATS with args, in a piece whose first event
    is the file's `first`: what the call-argument and comm-input readers look at."""
    return [
        (position, event) for position, event in enumerate(events, start=first) if event.cat in OP_CATS and event.args
    ]


class OpArgsError(HtatuiError, ValueError):
    """The file cannot be read again for its op arguments; the message names it (a ValueError:
    the CLI and the TUI report it like any input a view refuses)."""


def read_op_args(path: SourcePath) -> pl.DataFrame:
    """`OP_ARGS_SCHEMA` rows for the ops of the trace file at `path` (kept per file version)."""
    return read_call_args(path).select(list(OP_ARGS_SCHEMA))


def read_call_args(path: SourcePath) -> pl.DataFrame:
    """`CALL_ARGS_SCHEMA` rows for the ops of the trace file at `path` (kept per file version by
    `reread.REREAD`; one read serves both readers)."""
    try:
        return REREAD.read(path, CALL_ARGS_READ, _read_call_args)
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
        self.dropped: list[str | None] = []

    def add(self, events: list[RawEvent]) -> None:
        self.add_ops(host_ops(events, self.events_seen))
        self.events_seen += len(events)

    def add_ops(self, ops: list[tuple[int, RawEvent]]) -> None:
        """The host ops of a piece with args (`host_ops`)."""
        for position, event in ops:
            try:
                args = OPERATOR_ARGS_DECODER.decode(event.args)
            except (msgspec.DecodeError, UnicodeDecodeError):
                if b'"flops"' in bytes(event.args) or b'"Input Dims"' in bytes(event.args):
                    self._unreadable(position)  # e.g. flops of 1e400: counted, never used
                continue  # otherwise malformed args of one event: it simply has no shapes
            if args.input_dims is None and args.flops is None:
                continue
            self.index.append(position)
            self.dims.append(None if args.input_dims is None else str(args.input_dims))
            flops = None if args.flops is None else count(args.flops)
            dims_fine = args.input_dims is None or dims_ok(args.input_dims)
            bad = [
                *(["flops"] if args.flops is not None and flops is None else []),
                *([] if dims_fine else ["Input Dims"]),
            ]
            self.flops.append(flops)
            self.dropped.append(",".join(bad) or None)
            given = (args.input_dims if dims_fine else None, args.input_type, args.input_strides, args.concrete_inputs)
            for key, value in zip(_JSON_COLUMNS, given, strict=True):
                self.json[key].append(None if value is None else msgspec.json.encode(value).decode())

    def _unreadable(self, position: int) -> None:
        self.index.append(position)
        self.dims.append(None)
        self.flops.append(None)
        for values in self.json.values():
            values.append(None)
        self.dropped.append("args")

    def frame(self) -> pl.DataFrame:
        columns = {
            "index": self.index,
            "input_dims": self.dims,
            "flops": self.flops,
            **self.json,
            "dropped": self.dropped,
        }
        return pl.DataFrame(columns, schema=CALL_ARGS_SCHEMA)


_JSON_COLUMNS = ("dims_json", "types_json", "strides_json", "concrete_json")
