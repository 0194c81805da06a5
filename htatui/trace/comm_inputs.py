"""The input shapes and types of the collectives' host ops, read on demand.

Older NCCL traces (before PyTorch wrote `Collective name` and message sizes on the kernels) and
gloo jobs (no kernels) say how much a collective moved only through its host ops' `Input Dims`
and `Input type` (`record_param_comms`, `nccl:all_reduce`, `gloo:broadcast`, `c10d::allreduce_`
…, recorded with `record_shapes=True`). The event frame keeps no shapes, so the collectives table
reads them from the rank's file, for those ops only, keyed by the event's file position (`index`).
Which ops are collectives is the communication rules' answer (analysis/core/comm_rules.py): the
caller names them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
import polars as pl

from htatui.errors import HtatuiError
from htatui.sources import SourcePath
from htatui.trace.decode import RawEvent, TraceFormatError
from htatui.trace.events import read_raw_events
from htatui.trace.fetch import read_source_bytes
from htatui.trace.op_args import CALL_ARGS_READ, OpArgRows, host_ops
from htatui.trace.reread import REREAD, file_version

RECORD_PARAM_COMMS = "record_param_comms"
"""PyTorch's own record of a collective's parameters, nested in the collective's op."""

COMM_INPUT_SCHEMA: dict[str, pl.DataType] = {
    "index": pl.Int64(),
    "input_dims": pl.List(pl.List(pl.Int64())),
    "input_types": pl.List(pl.Utf8()),
}
"""One row per collective host op with shapes: its inputs' dims and type names as recorded
(`[[6144], []]`, `["float", "Scalar"]`); an input whose dims are not a list of integers has null."""


class _ShapeArgs(msgspec.Struct, frozen=True):
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    input_types: Any = msgspec.field(default=None, name="Input type")


_DECODER = msgspec.json.Decoder(_ShapeArgs)


class CommInputsError(HtatuiError, ValueError):
    """The file cannot be read again for its collectives' shapes; the message names it."""


def read_comm_inputs(path: SourcePath, names: Iterable[str]) -> pl.DataFrame:
    """`COMM_INPUT_SCHEMA` rows for the host ops of the trace at `path` named `names` (the
    collectives, and `record_param_comms` always), kept per file version and names by `reread.REREAD`."""
    wanted = frozenset((*names, RECORD_PARAM_COMMS))
    try:
        return REREAD.read(path, ("comm_inputs", wanted), lambda p: _read_comm_inputs(p, wanted))
    except OSError as exc:
        raise CommInputsError(f"{path}: cannot read it again for collective shapes ({exc.strerror})") from None


def _read_comm_inputs(path: SourcePath, wanted: frozenset[str]) -> pl.DataFrame:
    # The ops' call arguments come from the same pass unless kept: one read of the file serves
    # the Ranks page's bytes and the Ops page's shapes (the Diagnosis reads both).
    version = file_version(path)
    with_calls = not REREAD.holds(version, CALL_ARGS_READ)
    try:
        rows, _ = read_raw_events(read_source_bytes(path), lambda: _CommAndCallRows(wanted, with_calls), [])
    except (OSError, TraceFormatError) as exc:
        raise CommInputsError(f"{path}: cannot read it again for collective shapes ({exc})") from None
    if rows.calls is not None:
        REREAD.keep(version, CALL_ARGS_READ, rows.calls.frame())
    return rows.comm.frame()


def _dims(value: object) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return value
    return None


class CommInputRows:
    """The shapes of a trace's collective host ops, a piece at a time."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.index: list[int] = []
        self.dims: list[list[list[int] | None]] = []
        self.types: list[list[str | None]] = []

    def add_ops(self, ops: list[tuple[int, RawEvent]]) -> None:
        """The host ops of a piece with args (`op_args.host_ops`)."""
        for position, event in ops:
            if not isinstance(event.name, str) or event.name not in self.names:
                continue
            try:
                args = _DECODER.decode(event.args)
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                continue  # malformed args of one event: it simply has no shapes
            if not isinstance(args.input_dims, list) or not isinstance(args.input_types, list):
                continue
            self.index.append(position)
            self.dims.append([_dims(d) for d in args.input_dims])
            self.types.append([t if isinstance(t, str) else None for t in args.input_types])

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            {"index": self.index, "input_dims": self.dims, "input_types": self.types}, schema=COMM_INPUT_SCHEMA
        )


class _CommAndCallRows:
    """The comm inputs and, unless kept already, the ops' call arguments, in one pass over the
    host ops (a `read_raw_events` sink)."""

    def __init__(self, names: frozenset[str], with_calls: bool) -> None:
        self.comm = CommInputRows(names)
        self.calls = OpArgRows() if with_calls else None
        self.events_seen = 0

    def add(self, events: list[RawEvent]) -> None:
        ops = host_ops(events, self.events_seen)
        self.comm.add_ops(ops)
        if self.calls is not None:
            self.calls.add_ops(ops)
        self.events_seen += len(events)
