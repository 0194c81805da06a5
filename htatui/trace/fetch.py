"""Remote trace files brought to a private temp folder so the local parser reads them as files.

Downloads run on a few threads (they wait on the network, not the CPU) and report bytes; the
folder is removed when the load ends, so nothing stays behind but the parsed cache entries.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from htatui.errors import Cancelled
from htatui.sources import DownloadCancelled, RemotePath, SourceError, SourcePath, download
from htatui.trace.model import LoadProblem
from htatui.trace.read import read_trace_bytes

DOWNLOAD_THREADS = 4


@dataclass(frozen=True)
class DownloadProgress:
    """Bytes received so far over all remote files of a load, and the file that just grew."""

    done_bytes: int
    total_bytes: int
    path: RemotePath


DownloadCallback = Callable[[DownloadProgress], None]


class FetchCancelled(Cancelled):
    """The load was cancelled while downloading."""


@dataclass(frozen=True)
class Fetched:
    """Files ready to parse: (local file, the remote file it came from or None) and the failures."""

    files: list[tuple[Path, RemotePath | None]]
    problems: list[LoadProblem]


@contextmanager
def fetched(
    files: list[SourcePath],
    progress: DownloadCallback | None = None,
    cancel: threading.Event | None = None,
) -> Iterator[Fetched]:
    """Local files as they are; remote ones downloaded into a temp folder that is removed on exit."""
    remote = [f for f in files if isinstance(f, RemotePath)]
    if not remote:
        yield Fetched([(f, None) for f in files if isinstance(f, Path)], [])
        return
    folder = Path(tempfile.mkdtemp(prefix="htatui-download-"))
    try:
        local_of, problems = _download_all(remote, folder, progress, cancel)
        ready: list[tuple[Path, RemotePath | None]] = [
            (f, None) if isinstance(f, Path) else (local_of[f], f) for f in files if not _failed(f, problems)
        ]
        yield Fetched(ready, problems)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _failed(path: SourcePath, problems: list[LoadProblem]) -> bool:
    return any(p.path == path for p in problems)


def _download_all(
    remote: list[RemotePath],
    folder: Path,
    progress: DownloadCallback | None,
    cancel: threading.Event | None,
) -> tuple[dict[RemotePath, Path], list[LoadProblem]]:
    total = sum(f.size or 0 for f in remote)
    received: dict[RemotePath, int] = {}
    lock = threading.Lock()

    def fetch_one(index: int, path: RemotePath) -> Path | LoadProblem:
        # One subfolder per file keeps the original name (gzip is told by magic, not name).
        target = folder / str(index) / path.name
        target.parent.mkdir()

        def hook(value: int) -> None:
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled
            with lock:
                received[path] = value
                done = sum(received.values())
            if progress is not None:
                progress(DownloadProgress(done_bytes=done, total_bytes=total, path=path))

        try:
            download(path, target, hook)
        except SourceError as exc:
            return LoadProblem(path, str(exc).removeprefix(f"{path}: "))
        return target

    try:
        with ThreadPoolExecutor(max_workers=min(DOWNLOAD_THREADS, len(remote))) as pool:
            outcomes = list(pool.map(fetch_one, range(len(remote)), remote))
    except DownloadCancelled:
        raise FetchCancelled from None
    if cancel is not None and cancel.is_set():
        raise FetchCancelled
    local_of = {path: out for path, out in zip(remote, outcomes, strict=True) if isinstance(out, Path)}
    problems = [out for out in outcomes if isinstance(out, LoadProblem)]
    return local_of, problems


def read_source_bytes(path: SourcePath) -> bytes | bytearray:
    """A trace file's JSON bytes wherever it lives (gunzipped by magic), e.g. to export it again.

    Raises what `read_trace_bytes` raises; a remote failure is an OSError whose text is the reason.
    """
    if isinstance(path, Path):
        return read_trace_bytes(path)[0]
    with tempfile.TemporaryDirectory(prefix="htatui-download-") as folder:
        target = Path(folder) / path.name
        try:
            download(path, target)
        except SourceError as exc:
            raise OSError(str(exc).removeprefix(f"{path}: ")) from None
        return read_trace_bytes(target)[0]
