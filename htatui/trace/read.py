"""Reading a trace's bytes safely: regular files, or a pipe given directly, in bounded memory.

Refuses what would hang or never end (a named FIFO without a writer, /dev/zero, sockets),
never trusts a gzip trailer's size beyond what the compressed bytes can hold, reads a UTF-8
byte-order mark, and names UTF-16/32 instead of failing on byte 0. Errors are one line.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from htatui.trace.decode import TraceFormatError
from htatui.trace.timings import spent

# Deflate cannot expand more than ~1032:1, so a trailer claiming more than this is a lie.
_DEFLATE_MAX_RATIO = 1032
_CHUNK = 1 << 20
_GUNZIP_STEP = 256 << 10
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")


def max_stream_bytes() -> int:
    """The most a pipe (or a gzip stream) may expand to; HTATUI_MAX_TRACE_BYTES overrides 32 GiB."""
    try:
        return int(os.environ.get("HTATUI_MAX_TRACE_BYTES", ""))
    except ValueError:
        return 32 << 30


@dataclass(frozen=True)
class FileIdentity:
    """What says a file is unchanged: size, mtime, ctime, inode and device."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    device: int

    @classmethod
    def of(cls, info: os.stat_result) -> FileIdentity:
        return cls(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)

    def token(self) -> str:
        return f"{self.size}|{self.mtime_ns}|{self.ctime_ns}|{self.inode}|{self.device}"


def is_pipe_argument(path: Path) -> bool:
    """A pipe handed over by the shell (`<(zcat x.gz)` → /dev/fd/63), read as a bounded stream."""
    text = str(path)
    return text.startswith(("/dev/fd/", "/proc/self/fd/", "/dev/stdin")) or (
        text.startswith("/proc/") and "/fd/" in text
    )


def kind_problem(info: os.stat_result, path: Path) -> str | None:
    """Why `path` is not something htatui reads, or None for a regular file or a shell pipe."""
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a trace file"
    if stat.S_ISFIFO(mode):
        if is_pipe_argument(path):
            return None
        return "is a named pipe (FIFO), not a regular file; pipe it in as <(cat FILE) or save it first"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    return "is not a regular file"


def identity(path: Path) -> FileIdentity:
    return FileIdentity.of(os.stat(path))


def read_trace_bytes(path: Path) -> tuple[bytes | bytearray, FileIdentity | None]:
    """The file's JSON bytes (gunzipped when gzip by magic) and the identity taken before reading.

    The identity is None for a pipe (nothing to cache it under). A regular file whose identity
    changed while it was read is refused: its bytes may mix two versions.
    """
    with open_trace(path) as source:
        return source.whole(), source.identity


def open_trace(path: Path) -> TraceSource:
    """`path` opened for reading, refused now if it is not a regular file or a shell pipe."""
    return TraceSource(path)


class TraceSource:
    """An opened trace whose JSON bytes are read whole (`whole`) or in bounded blocks (`blocks`).

    Blocks are at most 1 MB of file reads, or 256 KB steps of gunzip output, so a trace of any
    size passes through a few MB of buffer; the checks are those of a whole read (gzip expansion
    bound, byte-order marks, identity unchanged at the end). `file_done` counts the bytes of the
    file (compressed bytes for gzip) behind the blocks given so far, of `file_bytes`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever, before any check.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        self._handle = os.fdopen(fd, "rb", buffering=0)
        try:
            self._before = os.fstat(fd)
            problem = kind_problem(self._before, path)
            if problem:
                raise TraceFormatError(problem)
            self.regular = stat.S_ISREG(self._before.st_mode)
            if not self.regular:
                os.set_blocking(fd, True)
        except BaseException:
            self._handle.close()
            raise
        self.file_bytes = self._before.st_size if self.regular else 0
        self.file_done = 0
        self._read_total = 0

    @property
    def identity(self) -> FileIdentity | None:
        """The identity taken before reading; None for a pipe (never cached)."""
        return FileIdentity.of(self._before) if self.regular else None

    def fileno(self) -> int:
        return self._handle.fileno()

    def plain_start(self) -> int | None:
        """For a regular file that is not gzip: how many bytes its UTF-8 byte-order mark takes (0 or 3),
        so that offsets in its text are file offsets once this is added; None otherwise."""
        if not self.regular:
            return None
        head = os.pread(self.fileno(), 3, 0)
        if head[:2] == b"\x1f\x8b":
            return None
        return len(_UTF8_BOM) if head == _UTF8_BOM else 0

    def check_unchanged(self) -> None:
        """TraceFormatError if the file's identity is no longer the one taken when it was opened."""
        self._check_unchanged()

    def __enter__(self) -> TraceSource:
        return self

    def __exit__(self, *_: object) -> None:
        self._handle.close()

    def whole(self) -> bytes | bytearray:
        """Every JSON byte at once (a regular file is read again from its start)."""
        if self.regular:
            os.lseek(self._handle.fileno(), 0, os.SEEK_SET)
            raw = self._handle.readall()
            self._check_unchanged()
        else:
            raw = _read_stream(self._handle)
        return _text_bytes(_gunzip(raw) if raw[:2] == b"\x1f\x8b" else raw)

    def blocks(self) -> Iterator[bytes]:
        """The JSON bytes in order, in bounded blocks (regular files only: a pipe is read whole)."""
        first = self._read()
        raw_blocks = self._gunzip_blocks(first) if first[:2] == b"\x1f\x8b" else self._plain_blocks(first)
        return _text_blocks(raw_blocks)

    def _read(self) -> bytes:
        block = self._handle.read(_CHUNK) or b""
        self._read_total += len(block)
        return block

    def _check_unchanged(self) -> None:
        if FileIdentity.of(os.stat(self.path)) != FileIdentity.of(self._before):
            raise TraceFormatError("changed while it was being read; load it again when it is complete")

    def _plain_blocks(self, block: bytes) -> Iterator[bytes]:
        while block:
            self.file_done = self._read_total
            yield block
            block = self._read()
        self._check_unchanged()

    def _gunzip_blocks(self, pending: bytes) -> Iterator[bytes]:
        """Every gzip member in turn, `_GUNZIP_STEP` bytes of output at a time, never past the limit."""
        limit = max_stream_bytes()
        produced = 0
        inflater = zlib.decompressobj(wbits=31)
        while True:
            try:
                with spent("gunzip"):
                    piece = inflater.decompress(pending, _GUNZIP_STEP)
            except zlib.error as exc:
                raise TraceFormatError(f"corrupt or truncated gzip ({exc})") from None
            pending = inflater.unconsumed_tail
            produced += len(piece)
            if produced > limit:
                raise TraceFormatError(f"gzip expands past {limit} bytes (HTATUI_MAX_TRACE_BYTES)")
            if inflater.eof:
                pending = inflater.unused_data.lstrip(b"\x00")
                while not pending:  # zero padding after a member, then either the end or a member
                    more = self._read()
                    if not more:
                        break
                    pending = more.lstrip(b"\x00")
                if pending:
                    inflater = zlib.decompressobj(wbits=31)
            elif not pending and not piece:
                pending = self._read()
                if not pending:
                    message = "compressed file ended before the end-of-stream marker was reached"
                    raise TraceFormatError(f"corrupt or truncated gzip ({message})")
            self.file_done = self._read_total - len(pending)
            if piece:
                yield piece
            if inflater.eof and not pending:
                break
        self.file_done = self._read_total
        self._check_unchanged()


def _text_blocks(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """The blocks with a UTF-8 byte-order mark dropped; UTF-16/32 named (as `_text_bytes`)."""
    head = b""
    for block in blocks:
        head += block
        if len(head) >= 4:
            break
    if head:
        head = bytes(_text_bytes(head))
        if head:
            yield head
    yield from blocks


def _read_stream(handle: BinaryIO) -> bytes:
    """A pipe's bytes, refused past max_stream_bytes() instead of growing without end."""
    limit = max_stream_bytes()
    chunks: list[bytes] = []
    total = 0
    while True:
        piece = handle.read(_CHUNK)
        if not piece:
            break
        total += len(piece)
        if total > limit:
            raise TraceFormatError(f"stream is larger than {limit} bytes (HTATUI_MAX_TRACE_BYTES)")
        chunks.append(piece)
    return b"".join(chunks)


def _text_bytes(data: bytes | bytearray) -> bytes | bytearray:
    """Drop a UTF-8 byte-order mark; name UTF-16/32 instead of failing on their zero bytes."""
    head = bytes(data[:4])
    if head.startswith(_UTF8_BOM):
        if isinstance(data, bytearray):
            del data[:3]
            return data
        return data[3:]
    if head in _UTF32_BOMS:
        raise TraceFormatError("is UTF-32 text; htatui reads UTF-8 JSON (convert it: iconv -f UTF-32 -t UTF-8)")
    if len(head) == 4 and head == b"\0\0\0\0":
        # Zeros are no text at all (a zero-filled file, or a gzip bomb of zeros), not UTF-16.
        raise TraceFormatError("starts with zero bytes, not JSON text")
    if head[:2] in _UTF16_BOMS or (len(head) == 4 and (head[1] == 0 and head[3] == 0 or head[0] == 0 and head[2] == 0)):
        raise TraceFormatError("is UTF-16 text; htatui reads UTF-8 JSON (convert it: iconv -f UTF-16 -t UTF-8)")
    return data


def _gunzip(data: bytes) -> bytearray:
    try:
        with spent("gunzip"):
            return gunzip_bounded(data, max_stream_bytes())
    except (EOFError, OSError, zlib.error) as exc:
        raise TraceFormatError(f"corrupt or truncated gzip ({exc})") from None


def gunzip_bounded(data: bytes, limit: int) -> bytearray:
    """Gunzip every member into one buffer, in chunks, never past `limit` bytes of output.

    The buffer is presized from the trailer's ISIZE (saving a copy on real files), but only up
    to what the compressed size can expand to, so a forged trailer cannot allocate gigabytes.
    """
    claimed = int.from_bytes(data[-4:], "little") if len(data) >= 18 else 0
    out = bytearray(min(claimed, len(data) * _DEFLATE_MAX_RATIO + _CHUNK, limit))
    filled = 0
    remaining: bytes | memoryview = data
    while remaining:
        inflater = zlib.decompressobj(wbits=31)
        # The input goes in a chunk at a time: zlib copies what a call leaves unconsumed into a new
        # bytes, so handing it the whole file made each call copy the rest of it (quadratic: 9 s a
        # read of a 56 MB gzip).
        source = memoryview(remaining)
        taken = 0
        pending: bytes | memoryview = b""
        while True:
            if not pending:
                pending = source[taken : taken + _CHUNK]
                taken += len(pending)
            piece = inflater.decompress(pending, _CHUNK)
            pending = inflater.unconsumed_tail
            end = filled + len(piece)
            if end > limit:
                raise TraceFormatError(f"gzip expands past {limit} bytes (HTATUI_MAX_TRACE_BYTES)")
            if end > len(out):
                out.extend(bytes(end - len(out)))
            out[filled:end] = piece
            filled = end
            # At a member's end zlib may leave stale input in unconsumed_tail: unused_data has the rest.
            if inflater.eof or (not pending and not piece and taken >= len(source)):
                break
        if not inflater.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        remaining = (inflater.unused_data + bytes(source[taken:])).lstrip(b"\x00")
    del out[filled:]
    return out
