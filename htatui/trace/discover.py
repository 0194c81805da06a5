"""Which files are traces, and which rank each one is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

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
    """Trace files named by the user: each folder's trace files (not recursive) and each file."""
    files: list[Path] = []
    skipped: list[Path] = []
    for path in paths:
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
    unique = list(dict.fromkeys(p.resolve() for p in files))
    return Discovered(files=unique, skipped=skipped)


def job_folders(path: Path) -> list[Path]:
    """A folder of trace files is one job; a folder of such folders is several (one level down)."""
    if not path.is_dir() or any(is_trace_name(p) for p in path.iterdir() if p.is_file()):
        return [path]
    subfolders = sorted(p for p in path.iterdir() if p.is_dir())
    jobs = [p for p in subfolders if any(is_trace_name(f) for f in p.iterdir() if f.is_file())]
    return jobs or [path]


def rank_from_filename(path: Path) -> int | None:
    for pattern in _RANK_IN_NAME:
        match = pattern.search(path.name)
        if match:
            return int(match.group(1))
    return None
