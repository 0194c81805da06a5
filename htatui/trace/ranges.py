"""A plain trace file's events array named as byte ranges, each read by whichever process decodes it.

Sending a worker the bytes of a piece costs this process a read, a copy and a pickle of every
byte; a `Span` is a few numbers, and the worker reads the range itself. Its piece runs from the
first event boundary (`}` `,` `{`, as chunks.py cuts) at or after `start` to the first at or
after `stop`; both depend only on the file's bytes, so neighbouring spans meet at the same
boundary and together hold every event once. A span whose end finds no boundary before the
file's end is the tail: the last events and the fields after the array, decoded as a document.
A boundary may be a wrong cut (inside a string or a nested list), which leaves the piece before
it invalid JSON: the caller grows that span to the next one's `stop` (`Span.grown`) and decodes
it again. The file's identity is checked around every read, so a file changed while it is read
is refused, as a whole read refuses it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from htatui.trace.chunks import BOUNDARY, Piece
from htatui.trace.decode import TraceFormatError
from htatui.trace.read import FileIdentity

_FIRST_READ_EXTRA = 64 << 10
"""Bytes read past `stop` at first, so that the closing boundary is usually in the first read."""
CHANGED = "changed while it was being read; load it again when it is complete"


@dataclass(frozen=True)
class Span:
    """A piece of `path`'s events array named by file offsets (see the module's note)."""

    path: str
    identity: FileIdentity
    start: int
    """The array's first byte (`first`), else where the search for the opening boundary begins."""
    stop: int
    """Where the search for the closing boundary begins; at the file's size the span is the tail."""
    first: bool
    opening: bytes
    """What the tail is decoded after (chunks.opening_of)."""

    def grown(self, following: Span) -> Span:
        """This span ending where `following` ends (the boundary between them was a wrong cut)."""
        return replace(self, stop=following.stop)


def spans_of(path: str, identity: FileIdentity, events_start: int, opening: bytes, piece_bytes: int) -> list[Span]:
    """The file's array as spans of about `piece_bytes`, the first starting at the array's first byte."""
    size = identity.size
    starts = range(events_start, max(size, events_start + 1), piece_bytes)
    return [
        Span(path, identity, start, min(start + piece_bytes, size), start == events_start, opening) for start in starts
    ]


def read_span(span: Span, fd: int | None = None) -> Piece | None:
    """The span's piece, read from `fd` (else the file opened by its path); None when no event
    starts in it (past the array's last boundary, or inside an event longer than the span).

    TraceFormatError when the file is not the one the spans were made of.
    """
    if fd is not None:
        return _read_checked(span, fd)
    try:
        # O_NONBLOCK: a path replaced by a FIFO must not block the open; the identity check refuses it.
        own = os.open(span.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise TraceFormatError(CHANGED) from None
    try:
        return _read_checked(span, own)
    finally:
        os.close(own)


def _read_checked(span: Span, fd: int) -> Piece | None:
    _check(span, fd)
    # From the byte before `start`, which a piece's `[` is written over (chunks._decode_cut).
    piece = _read_piece(span, _FileBytes(fd, span.start - 1, span.identity.size))
    _check(span, fd)
    return piece


def _check(span: Span, fd: int) -> None:
    if FileIdentity.of(os.fstat(fd)) != span.identity:
        raise TraceFormatError(CHANGED)


def _read_piece(span: Span, held: _FileBytes) -> Piece | None:
    held.read_to(span.stop + _FIRST_READ_EXTRA)
    if span.first:
        begin = span.start
    else:
        opening = held.boundary(span.start)
        if opening is None:
            return None
        begin = opening[1] - 1  # the next event's `{`
    # From `stop`, not `begin`: an opening boundary past `stop` is the next span's too (then empty).
    closing = held.boundary(span.stop)
    size = span.identity.size
    if closing is None:
        held.read_to(size)
        return Piece(held.after(span.opening, begin), b"", True, (size, size))
    end = closing[0] + 1  # just after the last event's `}`
    if end <= begin:
        return None
    return Piece(held.bracketed(begin, end), b"", False, (end, size))


class _FileBytes:
    """Bytes of a file from `base` on, read as far as asked into one buffer (no copy per read)."""

    def __init__(self, fd: int, base: int, size: int) -> None:
        self.fd = fd
        self.base = base
        self.size = size
        self.buf = bytearray()
        self.held = 0
        """Bytes of `buf` read so far."""

    def read_to(self, offset: int) -> bool:
        """Read on to `offset` (at most the file's size); False if nothing more was there."""
        end = min(offset, self.size) - self.base
        if end <= self.held:
            return False
        if end > len(self.buf):
            grown = bytearray(end)
            grown[: self.held] = memoryview(self.buf)[: self.held]
            self.buf = grown
        with memoryview(self.buf) as view:
            while self.held < end:
                count = os.preadv(self.fd, [view[self.held : end]], self.base + self.held)
                if not count:
                    raise TraceFormatError(CHANGED)  # shorter than its size: truncated meanwhile
                self.held += count
        return True

    def boundary(self, offset: int) -> tuple[int, int] | None:
        """(file offset of the `}`, of just past the `{`) of the first boundary starting at or after
        `offset`, reading on as needed; None if there is none before the file's end.

        A boundary cut by the end of the bytes held cannot hide a later one (what follows its `}`
        is spaces and a comma), so the first match found is the first in the file.
        """
        while True:
            match = BOUNDARY.search(self.buf, offset - self.base, self.held)
            if match is not None:
                return self.base + match.start(), self.base + match.end()
            if not self.read_to(self.base + 2 * self.held + _FIRST_READ_EXTRA):
                return None

    def bracketed(self, begin: int, end: int) -> memoryview:
        """`[` + the file's bytes from `begin` to `end` + `]`, written over the byte before `begin`
        and the byte at `end` (both held: a boundary's bytes, not an event's)."""
        first, last = begin - self.base, end - self.base
        self.buf[first - 1] = ord("[")
        self.buf[last] = ord("]")
        return memoryview(self.buf)[first - 1 : last + 1]

    def after(self, opening: bytes, begin: int) -> bytes:
        """`opening` + every byte held from `begin` on, in one copy."""
        with memoryview(self.buf) as view:
            return b"".join((opening, view[begin - self.base : self.held]))
