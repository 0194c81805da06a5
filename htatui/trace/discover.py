"""Which files are traces, and which rank each one is."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from htatui.trace.read import is_pipe_argument, kind_problem

TRACE_SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = (re.compile(r"rank[-_]?(\d+)", re.IGNORECASE), re.compile(r"worker[-_]?(\d+)", re.IGNORECASE))


class DiscoveryError(Exception):
    """A path given by the user cannot be used at all; the message is one line."""


@dataclass(frozen=True)
class Discovered:
    files: list[Path]
    skipped: list[Path]


def is_trace_name(path: Path) -> bool:
    return path.name.lower().endswith(TRACE_SUFFIXES)


def discover(paths: list[Path]) -> Discovered:
    """Trace files named by the user: each folder's trace files (not recursive) and each file.

    Only regular files are read: a FIFO or device named directly is refused here (opening a
    FIFO would wait forever), except a pipe the shell passes as /dev/fd/N, read as a stream.
    """
    files: list[Path] = []
    skipped: list[Path] = []
    for path in paths:
        try:
            found, skipped_here = _discover_one(path)
        except PermissionError:
            raise DiscoveryError(f"{path}: cannot be read (permission denied)") from None
        except OSError as exc:
            raise DiscoveryError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        files.extend(found)
        skipped.extend(skipped_here)
    unique = list(dict.fromkeys(p if is_pipe_argument(p) else p.resolve() for p in files))
    return Discovered(files=unique, skipped=skipped)


def _discover_one(path: Path) -> tuple[list[Path], list[Path]]:
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise DiscoveryError(f"{path}: broken symbolic link") from None
        raise DiscoveryError(f"{path}: no such file or folder") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DiscoveryError(f"{path}: symbolic link loop") from None
        raise
    if not stat.S_ISDIR(info.st_mode):
        problem = kind_problem(info, path)
        if problem:
            raise DiscoveryError(f"{path}: {problem}")
        return [path], []
    if not os.access(path, os.R_OK | os.X_OK):
        raise DiscoveryError(f"{path}: folder cannot be read (permission denied)")
    children = sorted(path.iterdir())
    if not children:
        raise DiscoveryError(f"{path}: folder is empty")
    entries = [p for p in children if p.is_file()]
    if not entries:
        if any(p.is_dir() for p in children):
            raise DiscoveryError(f"{path}: no trace files here, only subfolders; open one of them")
        raise DiscoveryError(
            f"{path}: no regular files here, only pipes, devices or broken/looping links ({children[0].name}, …)"
        )
    found = [p for p in entries if is_trace_name(p)]
    if not found:
        raise DiscoveryError(f"{path}: no trace files (*.json, *.json.gz) in this folder")
    return found, [p for p in entries if not is_trace_name(p)]


def job_folders(path: Path) -> list[Path]:
    """A folder of trace files is one job; a folder of such folders is several (one level down)."""
    try:
        if not path.is_dir() or any(is_trace_name(p) for p in path.iterdir() if p.is_file()):
            return [path]
    except OSError:
        return [path]  # discover() names the problem
    subfolders = sorted(p for p in path.iterdir() if p.is_dir())
    readable = [p for p in subfolders if os.access(p, os.R_OK | os.X_OK)]
    jobs = [p for p in readable if any(is_trace_name(f) for f in p.iterdir() if f.is_file())]
    return jobs or [path]


def rank_from_filename(path: Path) -> int | None:
    for pattern in _RANK_IN_NAME:
        match = pattern.search(path.name)
        if match:
            rank = int(match.group(1))
            return rank if rank < 2**31 else None
    return None
