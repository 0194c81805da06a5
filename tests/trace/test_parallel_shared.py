"""Every shared trace file decoded in small pieces on 2 processes gives the frame and detail table 1 process gives.

The parallel decoder engages only past `parallel.LOCAL_PIECES` pieces of `chunks.CHUNK_BYTES`
(32 MB of JSON), which no shared trace reaches; here each file is cut into ~24 pieces (4 KB at
least) and the worker is sent pieces after the first 2, so every file of more than a few events has
pieces decoded in the worker, out of order with this process's. All 32 files (294 MB of JSON): ~7 s.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import struct
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from decode_golden import SHARED_TRACES

from htatui.trace.columns import decode_columns
from htatui.trace.frame import finish_pieces
from htatui.trace.model import TraceMeta
from htatui.trace.parallel import decode_columns_parallel
from htatui.trace.read import open_trace

WORKERS = 2
"""This process and one worker."""
PIECES = 24
"""Pieces per file: enough that the worker gets most of them, few enough to keep each piece's cost small."""

Outcome = tuple[pl.DataFrame, pl.DataFrame, TraceMeta, list[str]] | tuple[str, str]


def shared_trace_files() -> list[Path]:
    """Every trace file under ../shared/traces (empty when it is absent: the test is then skipped)."""
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(path for path in SHARED_TRACES.rglob("*.json*") if path.is_file())


def json_bytes(path: Path) -> int:
    """The JSON's size: a gzip file's last 4 bytes (ISIZE; every shared file is one member under 4 GB)."""
    if path.name.endswith(".gz"):
        with path.open("rb") as file:
            file.seek(-4, os.SEEK_END)
            return int(struct.unpack("<I", file.read(4))[0])
    return path.stat().st_size


class CountingPool(ProcessPoolExecutor):
    """The worker pool, counting the pieces sent to it (so a file whose pieces all stayed here shows)."""

    submitted = 0

    def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(*args, **kwargs)


@pytest.fixture(scope="module")
def pool() -> Iterator[CountingPool]:
    context = multiprocessing.get_context("spawn")
    with CountingPool(max_workers=WORKERS - 1, mp_context=context, initializer=gc.disable) as executor:
        yield executor


def decoded(path: Path, chunk_bytes: int, pool: ProcessPoolExecutor | None) -> Outcome:
    """Frame, metadata and warnings, or the error's type and message (a file refused on both routes)."""
    warnings: list[str] = []
    try:
        with open_trace(path) as source:
            if pool is None:
                frame, details, meta = decode_columns(source, warnings, chunk_bytes=chunk_bytes)
            else:
                frame, details, meta = decode_columns_parallel(
                    source, warnings, WORKERS, chunk_bytes=chunk_bytes, local_pieces=2, executor=pool
                )
    except Exception as exc:  # noqa: BLE001 - both routes must refuse a file the same way
        return type(exc).__name__, str(exc)
    return finish_pieces(frame), details, meta, warnings


@pytest.mark.parametrize("path", shared_trace_files(), ids=lambda path: str(path.relative_to(SHARED_TRACES)))
def test_two_workers_give_the_one_process_frame(path: Path, shared_traces: Path, pool: CountingPool) -> None:
    chunk_bytes = max(4 << 10, json_bytes(path) // PIECES)
    one = decoded(path, chunk_bytes, None)
    submitted = pool.submitted
    two = decoded(path, chunk_bytes, pool)
    in_worker = pool.submitted - submitted
    if isinstance(one[0], str) or isinstance(two[0], str):
        assert two == one
        return
    frame, details, meta, warnings = one
    two_frame, two_details, two_meta, two_warnings = two
    assert isinstance(frame, pl.DataFrame) and isinstance(two_frame, pl.DataFrame)
    assert isinstance(details, pl.DataFrame) and isinstance(two_details, pl.DataFrame)
    assert two_frame.schema == frame.schema
    assert two_frame.equals(frame)
    assert two_details.schema == details.schema
    assert two_details.equals(details)
    assert two_meta == meta and two_warnings == warnings
    # Two pieces are decoded here, then the worker is sent two: a file of 4 pieces or more had some there.
    assert in_worker >= min(2, frame["ts"].n_chunks() - 2)
