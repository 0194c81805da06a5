"""Bytes → events a piece at a time: the one path from a trace's bytes to what is made of its events.

The loader's frame (columns.py), the op arguments (op_args.py) and the `[memory]` recording
(memory_events.py) each hand `read_events` (or `read_raw_events`, args left raw) a sink:
`traceEvents` is cut into pieces (chunks.py), each piece is decoded (decode.py) and added to the
sink, so neither the whole JSON nor all decoded events are alive at once. A document that cannot
be cut or typed piece by piece (odd layout, invalid UTF-8, NaN, event fields of the wrong type) is
decoded whole and added as one piece to a fresh sink: what the pieces before the failure added is
dropped, so nothing is half-done.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from htatui.trace import chunks
from htatui.trace.chunks import Buffer, NotChunkable, Piece, Window, decode_window, locate_in
from htatui.trace.decode import (
    DOC_DECODER,
    EVENTS_DECODER,
    RAW_DOC_DECODER,
    RAW_EVENTS_DECODER,
    Event,
    RawEvent,
    TraceFormatError,
    TraceHeader,
    decode_document,
    typed,
)
from htatui.trace.read import TraceSource
from htatui.trace.timings import spent

E = TypeVar("E", Event, RawEvent)
EventT = TypeVar("EventT")


class PieceSink(Protocol[EventT]):
    """What a reader makes of the events: given each piece's events in file order."""

    def add(self, events: list[EventT], /) -> None: ...


SinkT = TypeVar("SinkT", bound=PieceSink[Event])
RawSinkT = TypeVar("RawSinkT", bound=PieceSink[RawEvent])
AnySinkT = TypeVar("AnySinkT", bound=PieceSink[Any])

TraceInput = bytes | bytearray | TraceSource
"""The JSON bytes, or an opened file: a regular file is read block by block as pieces are cut."""


def read_events(
    source: TraceInput,
    new_sink: Callable[[], SinkT],
    warnings: list[str],
    *,
    chunk_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[SinkT, TraceHeader]:
    """Every event, args typed, added to a sink a piece at a time; the sink and the top-level fields.

    `progress` gets (bytes done, bytes in all) after each piece: the file's bytes (compressed ones
    for gzip) for a regular file. Warnings about the document are appended to `warnings`; a file
    that is no Chrome trace raises TraceFormatError.
    """
    return _read(source, new_sink, _TYPED, warnings, chunk_bytes, progress)


def read_raw_events(
    source: TraceInput, new_sink: Callable[[], RawSinkT], warnings: list[str]
) -> tuple[RawSinkT, TraceHeader]:
    """`read_events` with each event's args left raw, for a reader of keys the frame does not keep."""
    return _read(source, new_sink, _RAW, warnings, None, None)


@dataclass(frozen=True)
class _Decoding(Generic[E]):
    """How pieces, the tail and the events of a whole document become events of one kind."""

    piece: Callable[[Buffer], list[E]]
    tail: Callable[[bytes, bool], tuple[list[E], TraceHeader]]
    whole: Callable[[list[RawEvent]], list[E]]


def _read(
    source: TraceInput,
    new_sink: Callable[[], AnySinkT],
    decoding: _Decoding[E],
    warnings: list[str],
    chunk_bytes: int | None,
    progress: Callable[[int, int], None] | None,
) -> tuple[AnySinkT, TraceHeader]:
    if isinstance(source, TraceSource):
        # A pipe cannot be read twice: its bytes are read now, for the pieces or the whole document.
        raw = None if source.regular else source.whole()
    else:
        raw = source
    # The cyclic GC would re-scan every fresh object of a piece; decoded events hold no cycles.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            return _read_pieces(source, raw, new_sink(), decoding, chunk_bytes, progress)
        except NotChunkable:
            pass  # leaving the handler drops the first sink and what it held
        if raw is None:
            assert isinstance(source, TraceSource)
            raw = source.whole()
        return _read_whole(raw, new_sink(), decoding, warnings)
    finally:
        if gc_was_enabled:
            gc.enable()


def _read_pieces(
    source: TraceInput,
    raw: bytes | bytearray | None,
    sink: AnySinkT,
    decoding: _Decoding[E],
    chunk_bytes: int | None,
    progress: Callable[[int, int], None] | None,
) -> tuple[AnySinkT, TraceHeader]:
    if raw is None:
        assert isinstance(source, TraceSource)
        file = source
        window = Window(file.blocks(), lambda: (file.file_done, file.file_bytes))
    else:
        window = Window.whole(raw)
    span = locate_in(window)
    window.at = span.start
    after = TraceHeader()

    def decode_tail(rest: bytes) -> list[E]:
        nonlocal after
        events, after = decoding.tail(rest, span.list_form)
        return events

    pieces = decode_window(
        window, span, decoding.piece, decode_tail, chunk_bytes=chunk_bytes or chunks.CHUNK_BYTES, progress=progress
    )
    for events in pieces:
        sink.add(events)
        del events
    return sink, merge_headers(span.header, after)


def read_whole_events(
    raw: bytes | bytearray, new_sink: Callable[[], SinkT], warnings: list[str]
) -> tuple[SinkT, TraceHeader]:
    """`read_events` of a document that cannot be cut: decoded whole, added as one piece."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _read_whole(raw, new_sink(), _TYPED, warnings)
    finally:
        if gc_was_enabled:
            gc.enable()


def decode_typed_piece(piece: Piece, list_form: bool) -> tuple[list[Event], TraceHeader | None]:
    """A piece cut by `chunks.cut_window`, typed as `read_events` types it; for the tail piece also
    the fields after the array. msgspec.DecodeError: not JSON (a wrong cut, or a broken file);
    NotChunkable or UnicodeDecodeError: the document must be decoded whole."""
    if piece.tail:
        return _typed_tail(piece.data if isinstance(piece.data, bytes) else bytes(piece.data), list_form)
    return _typed_piece(piece.data), None


def _read_whole(
    raw: bytes | bytearray, sink: AnySinkT, decoding: _Decoding[E], warnings: list[str]
) -> tuple[AnySinkT, TraceHeader]:
    """The whole document as one piece."""
    with spent("decode"):
        doc, doc_warnings = decode_document(raw)
        warnings.extend(doc_warnings)
        if doc.traceEvents is None:
            raise TraceFormatError("not a Chrome trace (no traceEvents)")
        events = decoding.whole(doc.traceEvents)
    doc.traceEvents = None
    sink.add(events)
    return sink, doc


def merge_headers(before: TraceHeader, after: TraceHeader) -> TraceHeader:
    """The top-level fields from both sides of the array (a key given twice: the later wins)."""
    fields = {
        name: getattr(after, name) if getattr(after, name) is not None else getattr(before, name)
        for name in TraceHeader.__struct_fields__
    }
    return TraceHeader(**fields)


def _typed_piece(piece: Buffer) -> list[Event]:
    """The one-pass typed decode; where some event's args do not fit, each event's args by its kind."""
    with spent("decode"):
        try:
            return EVENTS_DECODER.decode(piece)
        except msgspec.ValidationError:
            pass
        return list(map(typed, _raw_piece(piece)))


def _raw_piece(piece: Buffer) -> list[RawEvent]:
    try:
        # A copy: raw args would otherwise point into the window's buffer, which is written over.
        return RAW_EVENTS_DECODER.decode(bytes(piece))
    except msgspec.ValidationError as exc:
        raise NotChunkable(str(exc)) from None  # an event-level oddity: the whole-document decode


def _typed_tail(rest: bytes, list_form: bool) -> tuple[list[Event], TraceHeader]:
    """The last events and the fields after the array, from `{"traceEvents":[` + the rest."""
    if list_form:
        return _typed_piece(rest), TraceHeader()
    with spent("decode"):
        try:
            doc = DOC_DECODER.decode(rest)
        except msgspec.ValidationError:
            raw_events, header = _raw_tail(rest, list_form)
            return list(map(typed, raw_events)), header
    events = doc.traceEvents or []
    doc.traceEvents = None
    return events, doc


def _raw_tail(rest: bytes, list_form: bool) -> tuple[list[RawEvent], TraceHeader]:
    if list_form:
        return _raw_piece(rest), TraceHeader()
    try:
        doc = RAW_DOC_DECODER.decode(rest)
    except msgspec.ValidationError as exc:
        raise NotChunkable(str(exc)) from None
    events = doc.traceEvents or []
    doc.traceEvents = None
    return events, doc


_TYPED = _Decoding[Event](_typed_piece, _typed_tail, lambda events: list(map(typed, events)))
_RAW = _Decoding[RawEvent](_raw_piece, _raw_tail, lambda events: events)
