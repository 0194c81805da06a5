"""A trace's `traceEvents` array cut into pieces at event boundaries, so it is decoded a piece at a time.

Decoding the whole array at once keeps every decoded event alive until the frame is built (about
2.5× the JSON); a piece of a few MB bounds that. A cut is found by a byte pattern (`}` `,` `{`),
which can also occur inside a string or a nested list; such a wrong cut always leaves its piece
invalid JSON (an open string or bracket), so a piece that fails to decode is grown to the next cut
and tried again, and a document whose layout is not understood here is left to the whole-file
decoder (`NotChunkable`). Together the pieces, the header before the array and the fields after it
are exactly the original bytes, so a document that decodes here decodes the same as a whole.
The bytes come through a `Window`: a buffer already read, or a file read as the pieces are cut,
so that neither the whole JSON nor all decoded events are alive at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from htatui.trace.decode import RawTraceDoc, TraceHeader

CHUNK_BYTES = 4 << 20
"""Bytes of JSON per piece: ~15-30k events, a few tens of MB of decoded objects at most."""

BOUNDARY = re.compile(rb"\}\s*,\s*\{")
"""Between two events: a candidate cut (it may also be inside a string or a nested list)."""
_OPEN_BOUNDARY = re.compile(rb"\}\s*(?:,\s*)?\Z")
"""A boundary that the next bytes may complete (at the window's end)."""
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_OPEN_EVENTS_KEY = re.compile(rb'"traceEvents"\s*(?::\s*)?\Z')
_NOT_SPACE = re.compile(rb"\S")
_LOOKAHEAD = 64 << 10
MAX_GROWTH = 16
"""A piece that still fails after this many extra cuts is not a cutting problem: decode whole."""
_MAX_HEADER_BYTES = 64 << 20
# With the events struct, a header holding a "traceEvents" that is not the array is refused, not skipped.
_HEADER_DECODER = msgspec.json.Decoder(RawTraceDoc)

T = TypeVar("T")
Buffer = bytes | bytearray | memoryview


class NotChunkable(Exception):
    """The buffer is not laid out as this module expects; decode it whole instead."""


@dataclass(frozen=True)
class EventsSpan:
    """Where the events array starts (just after its `[`), and the top-level fields before it."""

    start: int
    header: TraceHeader
    list_form: bool


class Window:
    """The bytes of a stream not yet consumed (`buf[at:]`), fed blocks at a time.

    Each fill joins the unconsumed bytes and the new blocks into a fresh buffer (one copy of
    each byte, consumed ones dropped), so only about a piece is held, whatever the stream's
    length. A buffer the window made keeps the byte before `at`, so a piece can be decoded in
    place with brackets written around it. `position` gives (bytes done, bytes total) for
    progress: the stream's own counts by default, or those of the file behind it.
    """

    def __init__(
        self, blocks: Iterable[bytes | bytearray], position: Callable[[], tuple[int, int]] | None = None
    ) -> None:
        self._blocks = iter(blocks)
        self.buf: bytes | bytearray = b""
        self.at = 0
        self.ended = False
        self.owned = False
        """Whether `buf` was made here (its bytes may be changed); a caller's buffer is not."""
        self._dropped = 0
        self._position = position

    @classmethod
    def whole(cls, raw: bytes | bytearray) -> Window:
        """A window over a buffer already read: nothing more comes (the buffer is not copied)."""
        window = cls(())
        window.buf = raw
        window.ended = True
        return window

    def fill(self, need: int = 0) -> bool:
        """Add blocks until `need` bytes are held past `at`, and at least as many as were held; False
        if none came.

        Each fill copies what is held, so while nothing is consumed (megabytes of whitespace, one
        huge event) the held bytes at least double each time: linear in the stream, not quadratic.
        """
        blocks: list[bytes | bytearray] = []
        held = self.rest()
        need = max(need, 2 * held)
        while not self.ended and (not blocks or held < need):
            block = next(self._blocks, None)
            if block is None:
                self.ended = True
            elif block:
                blocks.append(block)
                held += len(block)
        if not blocks:
            return False
        start = self.at - min(self.at, 1)
        with memoryview(self.buf) as view:
            self.buf = bytearray().join([view[start:], *blocks])
        self.owned = True
        self._dropped += start
        self.at -= start
        return True

    def rest(self) -> int:
        """Bytes held beyond `at`."""
        return len(self.buf) - self.at

    def position(self) -> tuple[int, int]:
        if self._position is not None:
            return self._position()
        done = self._dropped + self.at
        return done, self._dropped + len(self.buf) if self.ended else done

    def release(self) -> None:
        """Drop the buffer (after the last piece was taken)."""
        self._dropped += len(self.buf)
        self.buf = b""
        self.at = 0


def locate_events(raw: bytes | bytearray) -> EventsSpan:
    """The events array of a Chrome trace (object or bare list form) and the fields before it."""
    return locate_in(Window.whole(raw))


def locate_in(window: Window) -> EventsSpan:
    """`locate_events` on a window, reading as far as the array's `[` (the header stays held)."""
    searched = 0
    while (first := _NOT_SPACE.search(window.buf, searched)) is None:
        searched = len(window.buf)
        if not window.fill():
            raise NotChunkable("empty")
    if window.buf[first.start()] == ord("["):
        return EventsSpan(first.start() + 1, TraceHeader(), list_form=True)
    if window.buf[first.start()] != ord("{"):
        raise NotChunkable("not an object")
    key = _find_key(window, 0)
    while key != -1 and key < _MAX_HEADER_BYTES:
        match = _EVENTS_KEY.match(window.buf, key)
        if match is None and _OPEN_EVENTS_KEY.match(window.buf, key) and window.fill():
            continue  # the key's `: [` may be in the next block
        if match is not None:
            try:
                header = _HEADER_DECODER.decode(bytes(window.buf[:key]) + b'"traceEvents":[]}')
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                pass
            else:
                return EventsSpan(match.end(), header, list_form=False)
        key = _find_key(window, key + 1)
    raise NotChunkable("no top-level traceEvents array")


def _find_key(window: Window, start: int) -> int:
    """The next `"traceEvents"` at or after `start`, reading on while there is none (-1 at the end)."""
    while (key := window.buf.find(b'"traceEvents"', start)) == -1:
        start = max(start, len(window.buf) - len(b'"traceEvents"') + 1)
        if start >= _MAX_HEADER_BYTES or not window.fill():
            return -1
    return key


def decode_pieces(
    raw: bytes | bytearray,
    span: EventsSpan,
    decode: Callable[[Buffer], list[T]],
    decode_tail: Callable[[bytes], list[T]],
    *,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[list[T]]:
    """`decode_window` over a buffer already read."""
    window = Window.whole(raw)
    window.at = span.start
    return decode_window(window, span, decode, decode_tail, chunk_bytes=chunk_bytes, progress=progress)


def decode_window(
    window: Window,
    span: EventsSpan,
    decode: Callable[[Buffer], list[T]],
    decode_tail: Callable[[bytes], list[T]],
    *,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[list[T]]:
    """`decode` of each piece of the array in brackets, in file order; then `decode_tail` of the rest.

    The window starts at the array's first byte (`window.at`, just after its `[`), and is read as
    pieces are cut, so only about a piece is held at once. The rest (the last events, the array's
    `]` and the fields after it) is given as a whole document, `{"traceEvents":[` + rest (or `[`
    + rest for the list form), so the end of the array is found by the JSON decoder itself, not by
    searching for a bracket. `decode` raises msgspec.DecodeError for bytes that are not JSON (a
    wrong cut: the piece grows) and anything else for content it refuses (passed on). `progress`
    gets `window.position()`, (bytes done, total bytes), after each piece.
    """
    opening = opening_of(span)
    while True:
        cut = _next_cut(window, chunk_bytes)
        for _ in range(MAX_GROWTH):
            if cut is None:
                while window.fill():
                    pass
                with memoryview(window.buf) as view:
                    rest = b"".join((opening, view[window.at :]))
                window.release()
                try:
                    decoded = decode_tail(rest)
                except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                    raise NotChunkable(str(exc)) from None
                del rest
                if progress is not None:
                    progress(*window.position())
                yield decoded
                return
            stop, resume = cut
            try:
                decoded = _decode_cut(window, stop, decode)
                break
            except UnicodeDecodeError as exc:
                raise NotChunkable(str(exc)) from None
            except msgspec.DecodeError as exc:
                if "utf-8" in str(exc).lower():
                    raise NotChunkable(str(exc)) from None
                cut = _next_cut(window, resume + 1)
        else:
            raise NotChunkable("no valid cut found")
        window.at += resume
        if progress is not None:
            progress(*window.position())
        yield decoded


def _decode_cut(window: Window, stop: int, decode: Callable[[Buffer], list[T]]) -> list[T]:
    """`decode` of `[` + the window's bytes up to `stop` + `]`, in place when the window owns them."""
    buf, at = window.buf, window.at
    if not (window.owned and at and isinstance(buf, bytearray)):
        with memoryview(buf) as view:
            return decode(b"".join((b"[", view[at : at + stop], b"]")))
    # The byte before `at` is consumed (the `[`, `,` or space before this event); the byte at
    # `stop` (after the piece's last `}`) is put back, as a longer piece may still need it.
    end = at + stop
    saved = buf[end]
    buf[at - 1] = ord("[")
    buf[end] = ord("]")
    try:
        return decode(memoryview(buf)[at - 1 : end + 1])
    finally:
        buf[end] = saved


def _next_cut(window: Window, offset: int) -> tuple[int, int] | None:
    """(end of this piece, start of the next), counted from `window.at`: just after the first `}`
    at or past `offset` that a `,` and a `{` follow, and at that `{`; None if the stream has none.

    Reads blocks until one is found; a boundary cut by a block's end is searched again from its `}`.
    """
    start = offset
    while True:
        if start < window.rest():
            buf, at = window.buf, window.at
            match = BOUNDARY.search(buf, at + start)
            if match is not None:
                return match.start() + 1 - at, match.end() - 1 - at
            open_end = _OPEN_BOUNDARY.search(buf, at + start)
            start = open_end.start() - at if open_end is not None else window.rest()
        # A little past the search start, so that the boundary is usually in the first search.
        if not window.fill(max(offset, start) + min(_LOOKAHEAD, offset // 8)):
            return None


@dataclass(frozen=True)
class Piece:
    """A piece cut but not decoded (for decoding elsewhere): `[` + events + `]`, or the rest of the
    document after the array's last cut (`tail`: `{"traceEvents":[` + rest, or `[` + rest).

    `after` holds the bytes between this piece's last `}` and the next piece's `{` (a `,` and
    spaces), so that a piece found to end at a wrong cut can be joined to the next (`joined`).
    `position` is the window's (bytes done, bytes total) once the piece was cut, for progress.
    """

    data: Buffer
    """Bytes, or for a span's piece (ranges.py) a view of the buffer it was read into."""
    after: bytes
    tail: bool
    position: tuple[int, int]

    def joined(self, following: Piece, opening: bytes) -> Piece:
        """This piece grown to the end of `following` (the cut between them was a wrong one)."""
        body = (self.data[1:-1], self.after)
        if following.tail:
            data = b"".join((opening, *body, following.data[len(opening) :]))
        else:
            data = b"".join((b"[", *body, following.data[1:]))
        return Piece(data, following.after, following.tail, following.position)


def opening_of(span: EventsSpan) -> bytes:
    """What a tail piece starts with: the array's opening as a document of its own."""
    return b"[" if span.list_form else b'{"traceEvents":['


def cut_window(window: Window, span: EventsSpan, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Piece]:
    """The pieces `decode_window` would decode, cut at the same boundaries but not decoded, in order.

    A cut is only a candidate: whoever decodes the pieces takes them in order and joins a piece
    that fails as JSON to the next (`Piece.joined`), as `decode_window` grows it. The window is
    read as pieces are taken, so only the pieces not yet decoded are held.
    """
    opening = opening_of(span)
    while True:
        cut = _next_cut(window, chunk_bytes)
        if cut is None:
            while window.fill():
                pass
            with memoryview(window.buf) as view:
                rest = b"".join((opening, view[window.at :]))
            window.release()
            yield Piece(rest, b"", True, window.position())
            return
        stop, resume = cut
        with memoryview(window.buf) as view:
            data = b"".join((b"[", view[window.at : window.at + stop], b"]"))
            after = bytes(view[window.at + stop : window.at + resume])
        window.at += resume
        yield Piece(data, after, False, window.position())
