"""Which files are traces, and which rank each one is."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from htatui.errors import HtatuiError
from htatui.sources import RemotePath, SourceError, SourcePath, list_folder
from htatui.sources import stat as remote_stat
from htatui.trace.formats import ForeignFormat, foreign_format
from htatui.trace.read import is_pipe_argument, kind_problem

TRACE_SUFFIXES = (".json", ".json.gz")
CAPTURE_FOLDER = "capture_traces"
"""A job folder's subfolder of graph-capture traces (TraceLens's layout)."""
_RANK_IN_NAME = (re.compile(r"rank[-_]?(\d+)", re.IGNORECASE), re.compile(r"worker[-_]?(\d+)", re.IGNORECASE))


class DiscoveryError(HtatuiError):
    """A path given by the user cannot be used at all; the message is one line."""


@dataclass(frozen=True)
class Discovered:
    files: list[SourcePath]
    skipped: list[SourcePath]
    unreadable: list[tuple[SourcePath, str]] = field(default_factory=list)
    """Files a listing named that cannot be looked at, with why: skipped as a bad local file is."""
    notes: list[str] = field(default_factory=list)
    captures: tuple[SourcePath, ...] = ()
    """Graph-capture traces beside the ranks: a folder's files named `*capture*` (unless it holds
    only those) and the trace files of its `capture_traces/` subfolder."""


def is_capture_name(path: SourcePath) -> bool:
    """A trace file named as a graph capture (`graph_capture_rank_0…`, `capture_trace_rank_0…`)."""
    return "capture" in path.name.lower()


def is_trace_name(path: SourcePath) -> bool:
    return path.name.lower().endswith(TRACE_SUFFIXES)


def discover(paths: Sequence[SourcePath]) -> Discovered:
    """Trace files named by the user: each folder's trace files (not recursive) and each file.

    Only regular files are read: a FIFO or device named directly is refused here (opening a
    FIFO would wait forever), except a pipe the shell passes as /dev/fd/N, read as a stream.
    URLs follow the same rules (a prefix is a folder).
    """
    files: list[SourcePath] = []
    skipped: list[SourcePath] = []
    unreadable: list[tuple[SourcePath, str]] = []
    captures: list[SourcePath] = []
    for path in paths:
        if isinstance(path, RemotePath):
            remote = _discover_remote(path)
            remote_ranks, remote_captures = _split_captures(list(remote.files))
            files.extend(remote_ranks)
            captures.extend(remote_captures)
            skipped.extend(remote.skipped)
            unreadable.extend(remote.unreadable)
            continue
        try:
            listed, skipped_here = _discover_one(path)
            found: list[SourcePath] = list(listed)
            if path.is_dir():
                found, captured = _split_captures(found)
                captures.extend([*captured, *_capture_folder(path)])
        except PermissionError:
            raise DiscoveryError(f"{path}: cannot be read (permission denied)") from None
        except OSError as exc:
            raise DiscoveryError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        files.extend(found)
        skipped.extend(skipped_here)
    unique = list(dict.fromkeys(p.resolve() if isinstance(p, Path) and not is_pipe_argument(p) else p for p in files))
    notes = [
        f"{p.redirected_from}: redirected to another host; read and cached as {p}"
        for p in unique
        if isinstance(p, RemotePath) and p.redirected_from
    ]
    return Discovered(
        files=unique, skipped=skipped, unreadable=unreadable, notes=notes, captures=tuple(dict.fromkeys(captures))
    )


def _split_captures(found: list[SourcePath]) -> tuple[list[SourcePath], list[SourcePath]]:
    """A folder's trace files as (rank files, capture files); a folder of captures alone is ranks."""
    captures = [p for p in found if is_capture_name(p)]
    if len(captures) == len(found):
        return found, []
    return [p for p in found if not is_capture_name(p)], captures


def _capture_folder(folder: Path) -> list[Path]:
    """The trace files of `folder/capture_traces/`, when there is one."""
    sub = folder / CAPTURE_FOLDER
    if not sub.is_dir():
        return []
    return sorted(p.resolve() for p in sub.iterdir() if p.is_file() and is_trace_name(p))


def _discover_remote(path: RemotePath) -> Discovered:
    """The same rules as for a local folder or file, over a URL (a prefix is a folder)."""
    try:
        target = remote_stat(path)
        if not target.is_folder:
            return Discovered(files=[target], skipped=[])
        entries = list_folder(target)
    except SourceError as exc:
        raise DiscoveryError(str(exc)) from None
    if not entries:
        raise DiscoveryError(f"{path}: folder is empty")
    objects = [e for e in entries if not e.is_folder]
    if not objects:
        raise DiscoveryError(f"{path}: no trace files here, only subfolders; open one of them")
    found = [e for e in objects if is_trace_name(e)]
    if not found:
        raise DiscoveryError(_no_traces(path, objects))
    # Some listings (HTTP index pages) carry no sizes or versions: ask each file; one that fails
    # is skipped with its reason, as a bad file in a local folder is.
    looked_at: list[SourcePath] = []
    unreadable: list[tuple[SourcePath, str]] = []
    for entry in found:
        try:
            looked_at.append(entry if entry.size is not None and entry.identity is not None else remote_stat(entry))
        except SourceError as exc:
            unreadable.append((entry, str(exc).removeprefix(f"{entry}: ")))
    if not looked_at:
        lines = [f"{p}: {why}" for p, why in unreadable]
        raise DiscoveryError(lines[0] if len(lines) == 1 else "no trace could be loaded: " + "; ".join(lines))
    return Discovered(files=looked_at, skipped=[e for e in objects if not is_trace_name(e)], unreadable=unreadable)


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
        foreign = None if is_pipe_argument(path) else foreign_format(path)
        if foreign is not None:
            raise DiscoveryError(foreign.message(path))
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
        raise DiscoveryError(_no_traces(path, entries))
    return found, [p for p in entries if not is_trace_name(p)]


def _no_traces(folder: SourcePath, files: Sequence[SourcePath]) -> str:
    """Why a folder holds no trace: the formats of the files it does hold, when htatui knows them."""
    named: list[tuple[SourcePath, ForeignFormat]] = []
    for file in files:
        found = foreign_format(file)
        if found is not None:
            named.append((file, found))
    if named and all(found.snapshot for _file, found in named):
        listed = ", ".join(file.name for file, _found in named[:3])
        return f"{folder}: no trace here, only a CUDA memory snapshot ({listed}); open it with `htatui memory {folder}`"
    if named:
        file, found = next((pair for pair in named if not pair[1].snapshot), named[0])
        more = f" (and {len(named) - 1} more)" if len(named) > 1 else ""
        return f"{folder}: no Kineto trace here; {file.name}{more} is {found.reason(file)}"
    return f"{folder}: no trace files (*.json, *.json.gz) in this folder"


def skipped_note(path: SourcePath) -> str:
    """The note for a file beside traces that is not one: its format when htatui knows it."""
    found = foreign_format(path)
    return found.skipped(path) if found is not None else f"{path}: skipped (not a trace file name)"


def job_folders(path: SourcePath) -> Sequence[SourcePath]:
    """A folder of trace files is one job; a folder of such folders is several (one level down)."""
    if isinstance(path, RemotePath):
        return _remote_job_folders(path)
    try:
        if not path.is_dir() or any(is_trace_name(p) for p in path.iterdir() if p.is_file()):
            return [path]
    except OSError:
        return [path]  # discover() names the problem
    subfolders = sorted(p for p in path.iterdir() if p.is_dir())
    readable = [p for p in subfolders if os.access(p, os.R_OK | os.X_OK)]
    jobs = [p for p in readable if any(is_trace_name(f) for f in p.iterdir() if f.is_file())]
    return jobs or [path]


def _remote_job_folders(path: RemotePath) -> Sequence[SourcePath]:
    """job_folders over a URL; a URL that cannot be listed is left for the loader to report."""
    try:
        target = remote_stat(path)
        if not target.is_folder:
            return [path]
        entries = list_folder(target)
        if any(is_trace_name(e) for e in entries if not e.is_folder):
            return [path]
        subfolders = [e for e in entries if e.is_folder]
        jobs = [sub for sub in subfolders if any(is_trace_name(f) for f in list_folder(sub) if not f.is_folder)]
    except SourceError:
        return [path]
    return jobs or [path]


def rank_from_filename(path: SourcePath) -> int | None:
    for pattern in _RANK_IN_NAME:
        match = pattern.search(path.name)
        if match:
            rank = int(match.group(1))
            return rank if rank < 2**31 else None
    return None
