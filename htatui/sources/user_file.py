"""Settings files the user names (device peaks, communication rules, the keymap, themes): read
only when they are regular files under a size cap, so a FIFO cannot block and /dev/zero cannot
fill memory."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

USER_FILE_MAX_BYTES = 1 << 20
"""1 MiB: the shipped rules and peaks are under 8 KB; a larger settings file is a wrong path."""


class UserFileError(OSError):
    """A settings file refused before it is read; `strerror` says why in a few words."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(errno.EINVAL, problem, str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _kind_problem(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a settings file"
    if stat.S_ISFIFO(mode):
        return "is a named pipe (FIFO), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    return "is not a regular file"


def _size_problem(size: int, max_bytes: int) -> str | None:
    if size <= max_bytes:
        return None
    return f"is larger than {max_bytes:,} bytes, too large for a settings file"


def read_user_bytes(path: Path, max_bytes: int = USER_FILE_MAX_BYTES) -> bytes:
    """The bytes of `path`, refused (UserFileError) unless it is a regular file of at most `max_bytes`.

    The type is checked before opening and again on the open descriptor (opened without
    blocking), so a file swapped for a FIFO in between cannot stall the read either.
    """
    problem = _kind_problem(os.stat(path).st_mode)
    if problem:
        raise UserFileError(path, problem)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        problem = _kind_problem(info.st_mode) or _size_problem(info.st_size, max_bytes)
        if problem:
            raise UserFileError(path, problem)
        chunks: list[bytes] = []
        got = 0
        while got <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    finally:
        os.close(fd)
    problem = _size_problem(got, max_bytes)  # a file that grew after fstat
    if problem:
        raise UserFileError(path, problem)
    return b"".join(chunks)


def read_user_text(path: Path, max_bytes: int = USER_FILE_MAX_BYTES) -> str:
    """`read_user_bytes` decoded as UTF-8 (UnicodeDecodeError as `Path.read_text` raises it)."""
    return read_user_bytes(path, max_bytes).decode("utf-8")
