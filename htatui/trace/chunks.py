"""A trace's `traceEvents` array cut into pieces at event boundaries, so it is decoded a piece at a time.

Decoding the whole array at once keeps every decoded event alive until the frame is built (about
2.5× the JSON); a piece of a few MB bounds that. A cut is found by a byte pattern (`}` `,` `{`),
which can also occur inside a string or a nested list; such a wrong cut always leaves its piece
invalid JSON (an open string or bracket), so a piece that fails to decode is grown to the next cut
and tried again, and a document whose layout is not understood here is left to the whole-file
decoder (`NotChunkable`). Together the pieces, the header before the array and the fields after it
are exactly the original bytes, so a document that decodes here decodes the same as a whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from htatui.trace.decode import TraceDoc

CHUNK_BYTES = 8 << 20
"""Bytes of JSON per piece: ~25-60k events, a few tens of MB of decoded objects at most."""

_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_NOT_SPACE = re.compile(rb"\S")
_MAX_GROWTH = 16
"""A piece that still fails after this many extra cuts is not a cutting problem: decode whole."""
_MAX_HEADER_BYTES = 64 << 20
_HEADER_DECODER = msgspec.json.Decoder(TraceDoc)

T = TypeVar("T")


class NotChunkable(Exception):
    """The buffer is not laid out as this module expects; decode it whole instead."""


@dataclass(frozen=True)
class EventsSpan:
    """Where the events array starts (just after its `[`), and the top-level fields before it."""

    start: int
    header: TraceDoc
    list_form: bool


def locate_events(raw: bytes | bytearray) -> EventsSpan:
    """The events array of a Chrome trace (object or bare list form) and the fields before it."""
    first = _NOT_SPACE.search(raw)
    if first is None:
        raise NotChunkable("empty")
    if raw[first.start()] == ord("["):
        return EventsSpan(first.start() + 1, TraceDoc(), list_form=True)
    if raw[first.start()] != ord("{"):
        raise NotChunkable("not an object")
    key = raw.find(b'"traceEvents"')
    while key != -1 and key < _MAX_HEADER_BYTES:
        match = _EVENTS_KEY.match(raw, key)
        if match is not None:
            try:
                header = _HEADER_DECODER.decode(bytes(raw[:key]) + b'"traceEvents":[]}')
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                pass
            else:
                return EventsSpan(match.end(), header, list_form=False)
        key = raw.find(b'"traceEvents"', key + 1)
    raise NotChunkable("no top-level traceEvents array")


def decode_pieces(
    raw: bytes | bytearray,
    span: EventsSpan,
    decode: Callable[[bytes], list[T]],
    decode_tail: Callable[[bytes], list[T]],
    *,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[list[T]]:
    """`decode` of each piece of the array in brackets, in file order; then `decode_tail` of the rest.

    The rest (the last events, the array's `]` and the fields after it) is given as a whole
    document, `{"traceEvents":[` + rest (or `[` + rest for the list form), so the end of the
    array is found by the JSON decoder itself, not by searching for a bracket. `decode` raises
    msgspec.DecodeError for bytes that are not JSON (a wrong cut: the piece grows) and anything
    else for content it refuses (passed on). `progress` gets (bytes done, total bytes).
    """
    view = memoryview(raw)
    total = len(raw)
    opening = b"[" if span.list_form else b'{"traceEvents":['
    position = span.start
    while True:
        stop, resume = _next_cut(raw, position + chunk_bytes, total)
        for _ in range(_MAX_GROWTH):
            if stop >= total:
                try:
                    decoded = decode_tail(b"".join((opening, view[position:])))
                except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                    raise NotChunkable(str(exc)) from None
                if progress is not None:
                    progress(total, total)
                yield decoded
                return
            try:
                decoded = decode(b"".join((b"[", view[position:stop], b"]")))
                break
            except UnicodeDecodeError as exc:
                raise NotChunkable(str(exc)) from None
            except msgspec.DecodeError as exc:
                if "utf-8" in str(exc).lower():
                    raise NotChunkable(str(exc)) from None
                stop, resume = _next_cut(raw, resume + 1, total)
        else:
            raise NotChunkable("no valid cut found")
        position = resume
        if progress is not None:
            progress(position, total)
        yield decoded


def _next_cut(raw: bytes | bytearray, at: int, end: int) -> tuple[int, int]:
    """(end of this piece, start of the next): just after a `}` and at the next `{`; `end` if none."""
    if at >= end:
        return end, end
    match = _BOUNDARY.search(raw, at, end)
    if match is None:
        return end, end
    return match.start() + 1, match.end() - 1
