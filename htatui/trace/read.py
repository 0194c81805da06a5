"""Reading a trace's bytes safely: regular files, or a pipe given directly, in bounded memory.

Refuses what would hang or never end (a named FIFO without a writer, /dev/zero, sockets),
never trusts a gzip trailer's size beyond what the compressed bytes can hold, reads a UTF-8
byte-order mark, and names UTF-16/32 instead of failing on byte 0. Errors are one line.
"""

from __future__ import annotations

import os
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from htatui.trace.decode import TraceFormatError

# Deflate cannot expand more than ~1032:1, so a trailer claiming more than this is a lie.
_DEFLATE_MAX_RATIO = 1032
_CHUNK = 1 << 20
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
    # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever, before any check.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb", buffering=0) as handle:
        before = os.fstat(fd)
        problem = kind_problem(before, path)
        if problem:
            raise TraceFormatError(problem)
        regular = stat.S_ISREG(before.st_mode)
        if not regular:
            os.set_blocking(fd, True)
        raw = handle.readall() if regular else _read_stream(handle)
    if regular:
        after = os.stat(path)
        if FileIdentity.of(after) != FileIdentity.of(before):
            raise TraceFormatError("changed while it was being read; load it again when it is complete")
    data = _text_bytes(_gunzip(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return data, FileIdentity.of(before) if regular else None


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
    if head[:2] in _UTF16_BOMS or (len(head) == 4 and (head[1] == 0 and head[3] == 0 or head[0] == 0 and head[2] == 0)):
        raise TraceFormatError("is UTF-16 text; htatui reads UTF-8 JSON (convert it: iconv -f UTF-16 -t UTF-8)")
    return data


def _gunzip(data: bytes) -> bytearray:
    try:
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
    remaining = data
    while remaining:
        inflater = zlib.decompressobj(wbits=31)
        pending = remaining
        while True:
            piece = inflater.decompress(pending, _CHUNK)
            pending = inflater.unconsumed_tail
            end = filled + len(piece)
            if end > limit:
                raise TraceFormatError(f"gzip expands past {limit} bytes (HTATUI_MAX_TRACE_BYTES)")
            if end > len(out):
                out.extend(bytes(end - len(out)))
            out[filled:end] = piece
            filled = end
            if not pending and (inflater.eof or not piece):
                break
        if not inflater.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        remaining = inflater.unused_data.lstrip(b"\x00")
    del out[filled:]
    return out
