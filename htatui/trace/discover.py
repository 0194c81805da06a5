"""Which files are traces, and which rank each one is."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from htatui.sources import RemotePath, SourceError, SourcePath, list_folder, stat

TRACE_SUFFIXES = (".json", ".json.gz")
_RANK_IN_NAME = (re.compile(r"rank[-_]?(\d+)", re.IGNORECASE), re.compile(r"worker[-_]?(\d+)", re.IGNORECASE))


class DiscoveryError(Exception):
    """A path given by the user cannot be used at all; the message is one line."""


@dataclass(frozen=True)
class Discovered:
    files: list[SourcePath]
    skipped: list[SourcePath]


def is_trace_name(path: SourcePath) -> bool:
    return path.name.lower().endswith(TRACE_SUFFIXES)


def discover(paths: Sequence[SourcePath]) -> Discovered:
    """Trace files named by the user: each folder's trace files (not recursive) and each file."""
    files: list[SourcePath] = []
    skipped: list[SourcePath] = []
    for path in paths:
        if isinstance(path, RemotePath):
            remote_files, remote_skipped = _discover_remote(path)
            files.extend(remote_files)
            skipped.extend(remote_skipped)
            continue
        if not path.exists():
            raise DiscoveryError(f"{path}: no such file or folder")
        if path.is_dir():
            try:
                children = sorted(path.iterdir())
            except PermissionError:
                raise DiscoveryError(f"{path}: folder cannot be read (permission denied)") from None
            if not children:
                raise DiscoveryError(f"{path}: folder is empty")
            entries = [p for p in children if p.is_file()]
            if not entries:
                raise DiscoveryError(f"{path}: no trace files here, only subfolders; open one of them")
            found = [p for p in entries if is_trace_name(p)]
            skipped.extend(p for p in entries if not is_trace_name(p))
            if not found:
                raise DiscoveryError(f"{path}: no trace files (*.json, *.json.gz) in this folder")
            files.extend(found)
        else:
            files.append(path)
    unique = list(dict.fromkeys(p.resolve() if isinstance(p, Path) else p for p in files))
    return Discovered(files=unique, skipped=skipped)


def _discover_remote(path: RemotePath) -> tuple[list[RemotePath], list[RemotePath]]:
    """The same rules as for a local folder or file, over a URL (a prefix is a folder)."""
    try:
        target = stat(path)
        if not target.is_folder:
            return [target], []
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
        raise DiscoveryError(f"{path}: no trace files (*.json, *.json.gz) in this folder")
    try:
        # Some listings (HTTP index pages) carry no sizes or versions: ask each file.
        found = [e if e.size is not None and e.identity is not None else stat(e) for e in found]
    except SourceError as exc:
        raise DiscoveryError(str(exc)) from None
    return found, [e for e in objects if not is_trace_name(e)]


def job_folders(path: SourcePath) -> Sequence[SourcePath]:
    """A folder of trace files is one job; a folder of such folders is several (one level down)."""
    if isinstance(path, RemotePath):
        return _remote_job_folders(path)
    if not path.is_dir() or any(is_trace_name(p) for p in path.iterdir() if p.is_file()):
        return [path]
    subfolders = sorted(p for p in path.iterdir() if p.is_dir())
    jobs = [p for p in subfolders if any(is_trace_name(f) for f in p.iterdir() if f.is_file())]
    return jobs or [path]


def _remote_job_folders(path: RemotePath) -> Sequence[SourcePath]:
    """job_folders over a URL; a URL that cannot be listed is left for the loader to report."""
    try:
        target = stat(path)
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
            return int(match.group(1))
    return None
