"""JSON bytes → the event frame a piece at a time: typed decode, then whole-column conversions.

Each piece of `traceEvents` (see chunks.py) is decoded into `FlatEvent`s whose `args` are decoded
in the same pass into one struct holding every key htatui reads (host, device and metadata keys
together), and turned into columns with C-level `map`/`compress` passes — no per-event Python loop.
Only the piece's objects are alive at once; the columns of all pieces are concatenated at the end.

Per-category semantics are those of `frame.build_frame` (host keys on host rows, device keys on
device rows, a row whose args fail to decode gets none of them): a piece whose args do not fit
the combined struct is decoded again with raw args and each event's args by its category's
decoder, and a file this module cannot cut is decoded whole by the caller (`NotChunkable`).
"""

from __future__ import annotations

import gc
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import attrgetter
from typing import Any

import msgspec
import polars as pl
from msgspec.structs import astuple

from htatui.trace import chunks
from htatui.trace.chunks import Buffer, NotChunkable, Window, decode_window, locate_in
from htatui.trace.decode import (
    DEVICE_ARGS_DECODER,
    HOST_ARGS_DECODER,
    META_ARGS_DECODER,
    DeviceArgs,
    Event,
    Number,
    Scalar,
    TraceDoc,
)
from htatui.trace.frame import (
    _DEVICE_COLUMNS,
    _categories,
    _floats,
    _ints,
    _stream_ints,
    _texts,
    finish_pieces,
    finish_rows,
)
from htatui.trace.frame import _dims as frame_dims
from htatui.trace.kineto import CATEGORY_ALIASES, DEVICE_ARG_CATS, HOST_ARG_CATS
from htatui.trace.model import TraceMeta
from htatui.trace.read import TraceSource

__all__ = ["NotChunkable", "decode_columns", "decode_frame"]


class EventArgs(DeviceArgs, frozen=True, gc=False):
    """Every `args` key htatui reads, whatever the category (HostArgs ∪ DeviceArgs ∪ MetaArgs)."""

    # Tuples, not lists: hashable, so each distinct launch shape is turned into text once.
    grid: tuple[Number, ...] | Scalar = None  # type: ignore[assignment]
    block: tuple[Number, ...] | Scalar = None  # type: ignore[assignment]
    kernel: Scalar = None
    name: Scalar = None
    labels: Scalar = None


NO_EVENT_ARGS = EventArgs()


class FlatEvent(msgspec.Struct, gc=False):
    """One trace event with its args already decoded."""

    ph: str = ""
    cat: Scalar = None
    name: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Number | None = None
    dur: Number | None = None
    id: Scalar = None
    args: EventArgs = NO_EVENT_ARGS


class FlatTail(msgspec.Struct):
    """The last events and the top-level fields after the array (TraceDoc's, with typed events)."""

    traceEvents: list[FlatEvent] | None = None
    schemaVersion: Scalar = None
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    baseTimeNanoseconds: Scalar = None
    displayTimeUnit: Scalar = None
    traceName: Scalar = None


_FLAT_DECODER = msgspec.json.Decoder(list[FlatEvent])
_RAW_DECODER = msgspec.json.Decoder(list[Event])
_TAIL_DECODER = msgspec.json.Decoder(FlatTail)
_RAW_TAIL_DECODER = msgspec.json.Decoder(TraceDoc)


def _decode_piece(piece: Buffer) -> list[FlatEvent]:
    """The fast typed decode; on args that do not fit, each event's args by its own category."""
    try:
        return _FLAT_DECODER.decode(piece)
    except msgspec.ValidationError:
        pass
    try:
        events = _RAW_DECODER.decode(bytes(piece))  # raw args would otherwise pin the window's buffer
    except msgspec.ValidationError as exc:
        raise NotChunkable(str(exc)) from None  # an event-level oddity: the whole-file fallback
    return [_tolerant(event) for event in events]


def _decode_tail(piece: bytes, list_form: bool) -> tuple[list[FlatEvent], TraceDoc]:
    """The rest of the document from the last piece on: its events and the fields after the array."""
    if list_form:
        return _decode_piece(piece), TraceDoc()
    try:
        tail = _TAIL_DECODER.decode(piece)
        events = tail.traceEvents or []
    except msgspec.ValidationError:
        try:
            raw_tail = _RAW_TAIL_DECODER.decode(piece)
        except msgspec.ValidationError as exc:
            raise NotChunkable(str(exc)) from None
        events = [_tolerant(event) for event in raw_tail.traceEvents or []]
        raw_tail.traceEvents = None
        return events, raw_tail
    fields = {name: getattr(tail, name) for name in TraceDoc.__struct_fields__ if name != "traceEvents"}
    return events, TraceDoc(**fields)


def _tolerant(event: Event) -> FlatEvent:
    args = NO_EVENT_ARGS
    if event.args:
        decoder: msgspec.json.Decoder[Any] | None = None
        if event.ph == "M":
            decoder = META_ARGS_DECODER
        elif event.cat in HOST_ARG_CATS:
            decoder = HOST_ARGS_DECODER
        elif event.cat in DEVICE_ARG_CATS:
            decoder = DEVICE_ARGS_DECODER
        if decoder is not None:
            try:
                args = EventArgs(**msgspec.structs.asdict(decoder.decode(event.args)))
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass
    return FlatEvent(event.ph, event.cat, event.name, event.pid, event.tid, event.ts, event.dur, event.id, args)


@dataclass
class _Accumulated:
    """What the pieces add up to: frames, metadata labels, and values lost per column."""

    frames: list[pl.DataFrame] = field(default_factory=list)
    events_seen: int = 0
    fractional_ts: bool = False
    process_names: dict[str, str] = field(default_factory=dict)
    process_labels: dict[str, str] = field(default_factory=dict)
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)


def decode_frame(
    raw: bytes | bytearray | TraceSource,
    warnings: list[str],
    *,
    chunk_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, TraceMeta]:
    """The rank's event frame and metadata, as `build_frame`/`build_meta` give them for the whole doc."""
    columns, meta = decode_columns(raw, warnings, chunk_bytes=chunk_bytes, progress=progress)
    return finish_pieces(columns), meta


def decode_columns(
    raw: bytes | bytearray | TraceSource,
    warnings: list[str],
    *,
    chunk_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, TraceMeta]:
    """The events' columns before `finish_frame` (so the caller can free `raw` first), and the metadata.

    `raw` is the JSON bytes, or a regular file's source read block by block as pieces are cut
    (progress then counts the file's bytes). The frame is left in one chunk per piece: joining
    them would copy every column once more. Raises NotChunkable when the file must be decoded
    whole (odd layout, invalid UTF-8, event fields of unexpected types); nothing is half-done then.
    Warnings about dropped values are appended to `warnings`.
    """
    if isinstance(raw, TraceSource):
        source = raw
        window = Window(source.blocks(), lambda: (source.file_done, source.file_bytes))
    else:
        window = Window.whole(raw)
    del raw
    # The cyclic GC would re-scan every fresh object of a piece; decoded events hold no cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _decode_window(window, warnings, chunk_bytes or chunks.CHUNK_BYTES, progress)
    finally:
        if gc_was_enabled:
            gc.enable()


def _decode_window(
    window: Window, warnings: list[str], chunk_bytes: int, progress: Callable[[int, int], None] | None
) -> tuple[pl.DataFrame, TraceMeta]:
    span = locate_in(window)
    window.at = span.start
    acc = _Accumulated()
    after = TraceDoc()

    def decode_tail(piece: bytes) -> list[FlatEvent]:
        nonlocal after
        events, after = _decode_tail(piece, span.list_form)
        return events

    for events in decode_window(window, span, _decode_piece, decode_tail, chunk_bytes=chunk_bytes, progress=progress):
        _add_piece(acc, events)
        del events
    if not acc.frames:
        frame = _empty_piece()
    else:
        frame = pl.concat(acc.frames, how="vertical", rechunk=False)
    acc.frames.clear()
    # One warning per column, in the column order build_frame reports them.
    order = ["correlation", "external_id", *_DEVICE_COLUMNS]
    warnings.extend(_lost_message(col, acc.lost[col]) for col in order if acc.lost.get(col))
    meta = _meta(_merge(span.header, after), acc)
    return frame, meta


def _merge(before: TraceDoc, after: TraceDoc) -> TraceDoc:
    """The top-level fields from both sides of the array (a key given twice: the later wins)."""
    fields = {
        name: getattr(after, name) if getattr(after, name) is not None else getattr(before, name)
        for name in TraceDoc.__struct_fields__
        if name != "traceEvents"
    }
    return TraceDoc(**fields)


def _meta(doc: TraceDoc, acc: _Accumulated) -> TraceMeta:
    base = doc.baseTimeNanoseconds
    return TraceMeta(
        schema_version=doc.schemaVersion if isinstance(doc.schemaVersion, int) else None,
        device_properties=tuple(doc.deviceProperties or ()),
        distributed_info=doc.distributedInfo,
        base_time_ns=int(base) if isinstance(base, (int, float)) and not isinstance(base, bool) else None,
        display_time_unit=str(doc.displayTimeUnit) if doc.displayTimeUnit is not None else None,
        trace_name=str(doc.traceName) if doc.traceName is not None else None,
        process_names=acc.process_names,
        process_labels=acc.process_labels,
        thread_names=acc.thread_names,
        fractional_ts=acc.fractional_ts,
    )


def _lost_message(name: str, lost: int) -> str:
    return f"{lost} value(s) of '{name}' did not fit a 64-bit number and were dropped"


_HOST_KEYS = attrgetter("correlation", "external_id", "stream", "kernel")
_ARG_FIELDS = {name: i for i, name in enumerate(EventArgs.__struct_fields__)}


def _add_piece(acc: _Accumulated, events: list[FlatEvent]) -> None:
    offset = acc.events_seen
    acc.events_seen += len(events)
    if not events:
        return
    # One C-level pass makes a tuple per event, and zip turns them into columns.
    columns = _transpose(map(astuple, events), len(FlatEvent.__struct_fields__))
    ph = columns[0]
    if not acc.fractional_ts and float in set(map(type, columns[5])):
        acc.fractional_ts = True
    positions: Sequence[int] = range(offset, offset + len(events))
    if "M" in ph:
        _add_metadata(acc, list(compress(events, map("M".__eq__, ph))))
        keep = list(map("M".__ne__, ph))
        positions = list(compress(positions, keep))
        columns = [list(compress(column, keep)) for column in columns]
    del events
    if positions:
        acc.frames.append(finish_rows(_piece_frame(columns, positions, acc.lost)))


def _transpose(rows: Iterable[tuple[Any, ...]], width: int) -> list[Sequence[Any]]:
    """Rows of `width` values as `width` columns (empty ones when there are no rows)."""
    return list(zip(*rows, strict=True)) or [()] * width


def _add_metadata(acc: _Accumulated, events: list[FlatEvent]) -> None:
    """Process and thread labels from `ph: M` events (few: a Python loop is fine here)."""
    for event in events:
        payload = event.args
        pid = str(event.pid)
        if event.name == "process_name" and payload.name is not None:
            acc.process_names[pid] = str(payload.name)
        elif event.name == "process_labels" and payload.labels is not None:
            acc.process_labels[pid] = str(payload.labels)
        elif event.name == "thread_name" and payload.name is not None:
            acc.thread_names[(pid, str(event.tid))] = str(payload.name)


def _piece_frame(columns: list[Sequence[Any]], positions: Sequence[int], lost: dict[str, int]) -> pl.DataFrame:
    """A piece's columns (FlatEvent's fields, in order) as the frame `build_frame` makes of them."""
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
            "ts": _floats(ts),
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
    device = _device_columns(list(compress(args, is_device)), is_device, lost)
    return pl.concat([frame, device], how="horizontal")


def _labels(values: Sequence[Any]) -> pl.Series:
    """pid/tid as categorical text, exactly `str(value)` (None → "None") as build_frame writes them."""
    kinds = set(map(type, values))
    if kinds == {int}:
        return pl.Series(values, dtype=pl.Int64).cast(pl.Utf8).cast(pl.Categorical)
    if kinds <= {int, str, type(None)}:
        # Equal values have equal text here (no 1 vs 1.0 vs True, which hash alike): convert each once.
        text = {value: str(value) for value in dict.fromkeys(values)}
        return _categories(list(map(text.__getitem__, values)))
    return _categories(list(map(str, values)))


def _streams(values: Sequence[Any]) -> pl.Series:
    if set(map(type, values)) <= {int, type(None)}:
        return _ints(values)
    return _stream_ints(values)


def _lost_where(values: Sequence[Any], series: pl.Series, mask: pl.Series) -> int:
    """Non-null values that became null where `mask` holds (an integer wider than 64 bits...)."""
    if series.null_count() == values.count(None):
        return 0
    present = pl.Series(list(map(operator.is_not, values, repeat(None))), dtype=pl.Boolean)
    return int((present & series.is_null() & mask).sum())


def _device_columns(device_args: list[EventArgs], is_device: list[bool], lost: dict[str, int]) -> pl.DataFrame:
    """The device-only columns, converted over device rows and spread back to every row."""
    fields = _transpose(map(astuple, device_args), len(_ARG_FIELDS))
    frame = pl.DataFrame(
        {
            col: _device_column(col, _dims if convert is frame_dims else convert, fields[_ARG_FIELDS[name]], lost)
            for col, (name, convert) in _DEVICE_COLUMNS.items()
        }
    )
    mask = pl.Series(is_device, dtype=pl.Boolean)
    position = pl.when(mask).then(mask.cum_sum() - 1)
    return frame.select(pl.all().gather(pl.select(position).to_series()))


def _dims(values: Sequence[Any]) -> pl.Series:
    """grid/block as `frame._dims` writes them ('x,y,z'), from tuples (or lists, on the slow path)."""
    is_tuple = list(map(operator.is_, map(type, values), repeat(tuple)))
    if not any(is_tuple):
        return frame_dims(values)
    shapes: list[tuple[Any, ...]] = list(compress(values, is_tuple))
    if set(map(type, chain.from_iterable(shapes))) <= {int}:
        # Only integer shapes are keyed: (1, 1) and (1.0, 1) are equal keys but different texts.
        text = {shape: ",".join(map(str, shape)) for shape in set(shapes)}
        return _texts(list(map(text.get, values)))
    return _texts([",".join(map(str, x)) if type(x) is tuple else None for x in values])


def _device_column(
    col: str, convert: Callable[[Sequence[Any]], pl.Series], values: Sequence[Any], lost: dict[str, int]
) -> pl.Series:
    series = convert(values)
    if convert is not _texts and (n := series.null_count() - values.count(None)):
        lost[col] = lost.get(col, 0) + n
    return series


def _empty_piece() -> pl.DataFrame:
    """A frame with the piece columns and no rows (a trace whose events are all metadata)."""
    empty: list[Sequence[Any]] = [()] * len(FlatEvent.__struct_fields__)
    return finish_rows(_piece_frame(empty, [], {}))
