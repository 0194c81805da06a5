"""Events → the event frame's columns, a piece at a time: whole-column conversions, no per-event loop.

`read_events` (events.py) hands each piece's typed events to a `FrameColumns`, which turns them into
columns with C-level `map`/`compress` passes: host keys on host rows, device keys on device rows
(HOST_ARG_CATS, DEVICE_ARG_CATS), `ph: M` events into the metadata labels. Only the piece's objects
are alive at once; the columns of all pieces are concatenated at the end.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import attrgetter
from typing import Any

import polars as pl
from msgspec.structs import astuple

from htatui.trace.decode import HOST_KEYS, Event, EventArgs, TraceHeader, count_malformed
from htatui.trace.events import TraceInput, read_events
from htatui.trace.frame import finish_details, finish_pieces, finish_rows, placeholder_rank
from htatui.trace.kineto import CATEGORY_ALIASES, DEVICE_ARG_CATS, HOST_ARG_CATS
from htatui.trace.model import DETAIL_COLUMNS, DETAIL_SCHEMA, TraceMeta, empty_details, with_details
from htatui.trace.timings import spent
from htatui.trace.validate import MAX_ABS_TIMESTAMP_US

__all__ = ["FrameColumns", "PieceColumns", "decode_columns", "decode_frame", "piece_columns"]


def decode_frame(
    raw: TraceInput,
    warnings: list[str],
    *,
    chunk_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, TraceMeta]:
    """The rank's whole decoded record, its event frame (EVENT_SCHEMA) with the detail table's
    columns joined on (null where a row has none), and its metadata: what tests and benchmarks
    compare (the loader keeps the two tables apart)."""
    columns, details, meta = decode_columns(raw, warnings, chunk_bytes=chunk_bytes, progress=progress)
    return with_details(finish_pieces(columns), details), meta


def decode_columns(
    raw: TraceInput,
    warnings: list[str],
    *,
    chunk_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, TraceMeta]:
    """The events' columns before `finish_pieces` (so the caller can free `raw` first), the detail
    table (DETAIL_SCHEMA), and the metadata.

    `raw` is the JSON bytes, or an opened file read block by block as pieces are cut (progress then
    counts the file's bytes). The frame is left in one chunk per piece: joining them would copy
    every column once more. Warnings about the document and about dropped values are appended to
    `warnings`; a file that is no Chrome trace raises TraceFormatError.
    """
    columns, header = read_events(raw, FrameColumns, warnings, chunk_bytes=chunk_bytes, progress=progress)
    del raw
    with spent("framing"):
        frame = columns.frame()
    columns.add_warnings(warnings)
    return frame, columns.details(), columns.meta(header)


def _ints(values: Sequence[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Int64, strict=False)


def _floats(values: Sequence[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Float64, strict=False)


def _timestamps(values: Sequence[Any]) -> pl.Series:
    """`ts` as floats, where a written integer just beyond the loader's limit (10**17 + 1, whose float is
    1e17 exactly) is moved to the next float, so that the limit is kept on the number as written."""
    series = _floats(values)
    top, bottom = series.max(), series.min()
    if not (isinstance(top, float) and isinstance(bottom, float) and max(top, -bottom) >= MAX_ABS_TIMESTAMP_US):
        return series  # nothing at the limit (two aggregations: cheaper than an expression a piece)
    at_limit = series.abs() == MAX_ABS_TIMESTAMP_US
    beyond = [at for at in at_limit.arg_true().to_list() if abs(values[at]) > _LIMIT_AS_WRITTEN]
    past = [math.copysign(math.nextafter(MAX_ABS_TIMESTAMP_US, math.inf), values[at]) for at in beyond]
    return series.scatter(beyond, past) if beyond else series


_LIMIT_AS_WRITTEN = int(MAX_ABS_TIMESTAMP_US)


def _texts(values: Sequence[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Utf8, strict=False)


def _categories(values: Sequence[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Categorical, strict=False)


def _dims(values: Sequence[Any]) -> pl.Series:
    """grid/block launch shapes as 'x,y,z' text (anything but a list of numbers: null)."""
    is_tuple = list(map(operator.is_, map(type, values), repeat(tuple)))
    shapes: list[tuple[Any, ...]] = list(compress(values, is_tuple))
    if set(map(type, chain.from_iterable(shapes))) <= {int}:
        # Only integer shapes are keyed: (1, 1) and (1.0, 1) are equal keys but different texts.
        text = {shape: ",".join(map(str, shape)) for shape in set(shapes)}
        return _texts(list(map(text.get, values)))
    return _texts([",".join(map(str, x)) if type(x) is tuple else None for x in values])


_DEVICE_COLUMNS: dict[str, tuple[str, Callable[[Sequence[Any]], pl.Series]]] = {
    "device": ("device", _ints),
    "bytes": ("nbytes", _ints),
    "memory_bw_gbps": ("memory_bw", _floats),
    "collective_name": ("collective_name", _texts),
    "in_msg_nelems": ("in_msg_nelems", _ints),
    "out_msg_nelems": ("out_msg_nelems", _ints),
    "in_msg_size": ("in_msg_size", _ints),
    "out_msg_size": ("out_msg_size", _ints),
    "group_size": ("group_size", _ints),
    "pg_name": ("pg_name", _texts),
    "msg_dtype": ("msg_dtype", _texts),
    "grid": ("grid", _dims),
    "block": ("block", _dims),
    "occupancy_pct": ("occupancy", _floats),
    "blocks_per_sm": ("blocks_per_sm", _floats),
    "warps_per_sm": ("warps_per_sm", _floats),
    "registers_per_thread": ("registers", _ints),
    "shared_memory": ("shared_memory", _ints),
    "wait_on_stream": ("wait_on_stream", _ints),
}
"""Each device-only column: the EventArgs key it is made of, and its conversion. Those of
DETAIL_SCHEMA go to the detail table, the others to the event frame."""

_HOST_KEYS = attrgetter(*HOST_KEYS)
_ARG_FIELDS = {name: i for i, name in enumerate(EventArgs.__struct_fields__)}
_EVENT_WIDTH = len(Event.__struct_fields__)


@dataclass
class PieceColumns:
    """One piece's share of a FrameColumns: its frame, metadata labels and lost values.

    Made by `piece_columns`, in this process or in a worker (parallel.py), and added in file order
    by `FrameColumns.add_piece`. `index` counts from `offset`; a worker, which cannot know how many
    events came before its piece, counts from 0 and the frame's index is shifted when added.
    """

    frame: pl.DataFrame | None
    details: pl.DataFrame | None
    events: int
    offset: int
    fractional_ts: bool
    process_names: dict[str, str] = field(default_factory=dict)
    process_labels: dict[str, str] = field(default_factory=dict)
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    """Events left out for want of what every event needs (`_MALFORMED`)."""


def piece_columns(events: list[Event], offset: int, *, check_fractional: bool = True) -> PieceColumns:
    """A piece's events (in file order) as frame columns, their `index` counted on from `offset`."""
    with spent("framing"):
        return _piece_columns(events, offset, check_fractional)


def _piece_columns(events: list[Event], offset: int, check_fractional: bool) -> PieceColumns:
    piece = PieceColumns(None, None, len(events), offset, False)
    if not events:
        return piece
    # One C-level pass makes a tuple per event, and zip turns them into columns.
    columns = _transpose(map(astuple, events), _EVENT_WIDTH)
    ph = columns[0]
    piece.fractional_ts = check_fractional and float in set(map(type, columns[5]))
    positions: Sequence[int] = range(offset, offset + len(events))
    if "M" in ph:
        _add_metadata(piece, list(compress(events, map("M".__eq__, ph))))
        keep = list(map("M".__ne__, ph))
        positions = list(compress(positions, keep))
        columns = [list(compress(column, keep)) for column in columns]
    del events
    if positions:
        frame, details = _piece_frame(columns, positions, piece.lost)
        frame, details, piece.malformed = _without_malformed(frame, details)
        piece.frame = finish_rows(frame) if frame.height else None
        piece.details = finish_details(details)
    return piece


_MALFORMED = pl.col("ts").is_null() | (pl.col("ph") == "") | ((pl.col("ph") == "X") & pl.col("dur").is_null())
"""An event without a `ph`, without a `ts` (or one no 64-bit float holds: 401 digits), or a complete
event without a `dur`: nothing can place it in time (metadata events, which need neither, are not rows)."""


def _without_malformed(frame: pl.DataFrame, details: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """The piece's rows but the malformed ones (and their details), and how many those were."""
    malformed = frame.select(_MALFORMED).to_series()
    count = int(malformed.sum())
    if not count:
        return frame, details, 0
    frame = frame.filter(~malformed)
    return frame, details.join(frame.select("index"), on="index", how="semi", maintain_order="left"), count


def _add_metadata(piece: PieceColumns, events: list[Event]) -> None:
    """Process and thread labels from `ph: M` events (few: a Python loop is fine here)."""
    for event in events:
        payload = event.args
        pid = str(event.pid)
        if event.name == "process_name" and payload.name is not None:
            piece.process_names[pid] = str(payload.name)
        elif event.name == "process_labels" and payload.labels is not None:
            piece.process_labels[pid] = str(payload.labels)
        elif event.name == "thread_name" and payload.name is not None:
            piece.thread_names[(pid, str(event.tid))] = str(payload.name)


class FrameColumns:
    """A trace's events as frame columns (one frame per piece), its metadata labels, and lost values."""

    def __init__(self) -> None:
        self.frames: list[pl.DataFrame] = []
        self.detail_frames: list[pl.DataFrame] = []
        self.events_seen = 0
        self.fractional_ts = False
        self.process_names: dict[str, str] = {}
        self.process_labels: dict[str, str] = {}
        self.thread_names: dict[tuple[str, str], str] = {}
        self.lost: dict[str, int] = {}
        """Values per column that did not fit it (an integer wider than 64 bits, text for a number)."""
        self.malformed = 0

    def add(self, events: list[Event]) -> None:
        """One piece's events, in file order (their `index` counts on from the last piece's)."""
        self.add_piece(piece_columns(events, self.events_seen, check_fractional=not self.fractional_ts))

    def add_piece(self, piece: PieceColumns) -> None:
        """The next piece in file order, made here or by a worker (whose index is shifted on)."""
        with spent("framing"):
            self._add_piece(piece)

    def _add_piece(self, piece: PieceColumns) -> None:
        shift = self.events_seen - piece.offset
        self.events_seen += piece.events
        self.fractional_ts = self.fractional_ts or piece.fractional_ts
        # Later labels win, as one pass over the file's events would have it.
        self.process_names.update(piece.process_names)
        self.process_labels.update(piece.process_labels)
        self.thread_names.update(piece.thread_names)
        for col, count in piece.lost.items():
            self.lost[col] = self.lost.get(col, 0) + count
        self.malformed += piece.malformed
        if piece.frame is not None:
            frame = piece.frame
            if shift:
                frame = frame.with_columns(pl.col("index") + shift)
            self.frames.append(frame)
        if piece.details is not None and piece.details.height:
            details = piece.details
            if shift:
                details = details.with_columns(pl.col("index") + shift)
            self.detail_frames.append(details)

    def details(self) -> pl.DataFrame:
        """The pieces' detail tables as one (the pieces are let go)."""
        if not self.detail_frames:
            return empty_details()
        details = pl.concat(self.detail_frames, how="vertical")
        self.detail_frames.clear()
        return details

    def frame(self) -> pl.DataFrame:
        """The pieces' frames as one, a chunk per piece (the pieces are let go)."""
        if not self.frames:
            return finish_rows(_piece_frame([()] * _EVENT_WIDTH, [], {})[0])
        frame = pl.concat(_cut_alike(self.frames), how="vertical", rechunk=False)
        self.frames.clear()
        return frame

    def add_warnings(self, warnings: list[str]) -> None:
        """The malformed events counted into the document's count of them, then one warning per column
        that lost values, in the frame's column order."""
        count_malformed(warnings, self.malformed)
        order = ["correlation", "external_id", *_DEVICE_COLUMNS]
        warnings.extend(
            f"{self.lost[col]} value(s) of '{col}' did not fit a 64-bit number and were dropped"
            for col in order
            if self.lost.get(col)
        )

    def meta(self, header: TraceHeader) -> TraceMeta:
        """The metadata record: the document's top-level fields and the labels of its `ph: M` events."""
        return TraceMeta(
            schema_version=header.schemaVersion if isinstance(header.schemaVersion, int) else None,
            device_properties=tuple(header.deviceProperties or ()),
            distributed_info=header.distributedInfo,
            base_time_ns=header.base_time_ns,
            display_time_unit=str(header.displayTimeUnit) if header.displayTimeUnit is not None else None,
            trace_name=str(header.traceName) if header.traceName is not None else None,
            process_names=self.process_names,
            process_labels=self.process_labels,
            thread_names=self.thread_names,
            fractional_ts=self.fractional_ts,
        )


def _cut_alike(frames: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """The pieces' frames with each column either constant in every piece (the rank; a column null
    throughout) or held in full in every piece, so that joined, every column is cut alike.

    A column constant in some pieces (all null: `flow_id` where a piece has no flow) and held in
    full in others (or sent by a worker, parallel.py) joins into fewer chunks than the others, and
    the next expression over the frame would copy every column to realign them.
    """
    nulls = pl.concat([frame.null_count() for frame in frames]).sum().row(0, named=True)
    height = sum(frame.height for frame in frames)
    schema = frames[0].schema
    constant = [pl.lit(None, dtype=schema[name]).alias(name) for name, count in nulls.items() if count == height]
    return [
        pl.DataFrame([frame.get_column(name) for name in frame.columns]).with_columns(*constant, placeholder_rank())
        for frame in frames
    ]


def _transpose(rows: Iterable[tuple[Any, ...]], width: int) -> list[Sequence[Any]]:
    """Rows of `width` values as `width` columns (empty ones when there are no rows).

    The rows are laid end to end in one list and each column is a strided slice of it: both are C
    loops over references, twice as fast as `zip(*rows)` (which makes an iterator per row).
    """
    values = list(chain.from_iterable(rows))
    return [values[at::width] for at in range(width)]


def _piece_frame(
    columns: list[Sequence[Any]], positions: Sequence[int], lost: dict[str, int]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A piece's columns (Event's fields, in order) as frame columns and detail rows; values that
    did not fit added to `lost`."""
    phs, cats, names, pids, tids, ts, dur, ids, args = columns
    is_host = list(map(HOST_ARG_CATS.__contains__, cats))
    is_device = list(map(DEVICE_ARG_CATS.__contains__, cats))
    with_args = pl.Series(is_host, dtype=pl.Boolean) | pl.Series(is_device, dtype=pl.Boolean)
    correlation, external_id, stream, kernel = _transpose(map(_HOST_KEYS, args), 4)
    converted = {"correlation": _ints(correlation), "external_id": _ints(external_id)}
    for col, values in (("correlation", correlation), ("external_id", external_id)):
        lost[col] = lost.get(col, 0) + _lost_where(values, converted[col], with_args)
    frame = pl.DataFrame(
        {
            "index": pl.Series(positions, dtype=pl.Int64),
            "ph": _categories(phs),
            "cat": _categories(list(map(CATEGORY_ALIASES.get, cats, cats))),
            "name": _categories(names),
            "pid": _labels(pids),
            "tid": _labels(tids),
            "ts": _timestamps(ts),
            "dur": _floats(dur),
            "flow_id": _ints(ids),
            "stream": _streams(stream),
            "launched_kernel": _texts(kernel),
            "correlation": converted["correlation"],
            "external_id": converted["external_id"],
        }
    ).with_columns(
        pl.when(with_args).then(pl.col("stream", "correlation", "external_id")),
        launched_kernel=pl.when(pl.Series(is_host, dtype=pl.Boolean)).then(pl.col("launched_kernel")),
    )
    device, details = _device_columns(list(compress(args, is_device)), is_device, positions, lost)
    return pl.concat([frame, device], how="horizontal"), details


def _labels(values: Sequence[Any]) -> pl.Series:
    """pid/tid as categorical text, exactly `str(value)` (None → "None")."""
    kinds = set(map(type, values))
    if kinds == {int}:
        try:
            return pl.Series(values, dtype=pl.Int64).cast(pl.Utf8).cast(pl.Categorical)
        except OverflowError:
            pass  # an integer wider than 64 bits: its text, as below
    if kinds <= {int, str, type(None)}:
        # Equal values have equal text here (no 1 vs 1.0 vs True, which hash alike): convert each once.
        text = {value: str(value) for value in dict.fromkeys(values)}
        return _categories(list(map(text.__getitem__, values)))
    return _categories(list(map(str, values)))


def _streams(values: Sequence[Any]) -> pl.Series:
    """Stream numbers; AMD runtime events carry hex strings ("0x0"): HTA treats them as no stream, and so do we."""
    if set(map(type, values)) <= {int, type(None)}:
        return _ints(values)
    return _ints([v if type(v) is int else None for v in values])


def _lost_where(values: Sequence[Any], series: pl.Series, mask: pl.Series) -> int:
    """Non-null values that became null where `mask` holds (an integer wider than 64 bits...)."""
    if series.null_count() == values.count(None):
        return 0
    present = pl.Series(list(map(operator.is_not, values, repeat(None))), dtype=pl.Boolean)
    return int((present & series.is_null() & mask).sum())


def _device_columns(
    device_args: list[EventArgs], is_device: list[bool], positions: Sequence[int], lost: dict[str, int]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The device-only columns, converted over device rows: the event frame's spread back to
    every row, the detail table's kept on the device rows that have any (keyed by `index`)."""
    fields = _transpose(map(astuple, device_args), len(_ARG_FIELDS))
    converted = {
        col: _device_column(col, convert, fields[_ARG_FIELDS[name]], lost)
        for col, (name, convert) in _DEVICE_COLUMNS.items()
    }
    frame = pl.DataFrame([series.alias(col) for col, series in converted.items() if col not in DETAIL_SCHEMA])
    mask = pl.Series(is_device, dtype=pl.Boolean)
    position = pl.when(mask).then(mask.cum_sum() - 1)
    details = pl.DataFrame(
        [pl.Series("index", list(compress(positions, is_device)), dtype=pl.Int64)]
        + [converted[col].alias(col) for col in DETAIL_COLUMNS]
    ).filter(_WITH_ANY_DETAIL)
    return frame.select(pl.all().gather(pl.select(position).to_series())), details


_WITH_ANY_DETAIL = pl.any_horizontal(pl.col(DETAIL_COLUMNS).is_not_null())


def _device_column(
    col: str, convert: Callable[[Sequence[Any]], pl.Series], values: Sequence[Any], lost: dict[str, int]
) -> pl.Series:
    series = convert(values)
    if convert is not _texts and (n := series.null_count() - values.count(None)):
        lost[col] = lost.get(col, 0) + n
    return series
