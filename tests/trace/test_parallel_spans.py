"""A plain file's pieces named as byte ranges (ranges.py) that each process reads for itself, and a
gzip file gunzipped in a thread ahead of the cutting (prefetch.py): the same events, the same
frame as one process, and one-line errors for a file changed while it is read or a cut-off gzip."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from decode_util import one_process, tricky_events
from kineto_util import kernel, runtime, step

from htatui.trace.chunks import locate_events, opening_of
from htatui.trace.decode import TraceFormatError
from htatui.trace.frame import finish_pieces
from htatui.trace.parallel import decode_columns_parallel
from htatui.trace.prefetch import prefetched
from htatui.trace.ranges import Span, read_span, spans_of
from htatui.trace.read import identity, open_trace
from htatui.trace.workers import start_piece_worker

WORKERS = 2


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    """The loader's own worker set-up (its initializer), so that what it promises is tested too."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        WORKERS - 1, mp_context=context, initializer=start_piece_worker, initargs=(os.getpid(),)
    ) as executor:
        yield executor


def plain_events(count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [step(1, 0, 10 * count)]
    for i in range(count):
        events += [runtime("cudaLaunchKernel", 10 * i, 2, corr=i), kernel(f"k{i}", 10 * i + 3, 4, corr=i)]
    return events


def written(path: Path, events: list[dict[str, Any]], separator: str, prefix: bytes = b"") -> Path:
    """A trace whose events are joined by `separator` (spaces around the comma), fields after the array."""
    body = separator.join(json.dumps(event) for event in events)
    path.write_bytes(prefix + f'{{"schemaVersion": 1, "traceEvents": [ {body} ], "more": [{{"a": 1}}]}}'.encode())
    return path


def spans_for(path: Path, piece_bytes: int, bom: int = 0) -> list[Span]:
    raw = path.read_bytes()[bom:]
    span = locate_events(raw)
    return spans_of(str(path), identity(path), span.start + bom, opening_of(span), piece_bytes)


@pytest.mark.parametrize("separator", [", ", " ,\n  ", ","])
def test_neighbouring_spans_meet_at_one_boundary(tmp_path: Path, separator: str) -> None:
    """For every span length from far shorter than an event to longer than the file, the pieces
    read hold every event once, in order: a span whose start falls inside a boundary (between the
    `}` and the `{`) or inside an event finds the same boundary its neighbour ends at."""
    events = plain_events(6)
    path = written(tmp_path / "t.json", events, separator)
    empty_seen = False
    for piece_bytes in [*range(3, 400, 7), 1 << 20]:
        decoded: list[Any] = []
        pieces = [read_span(span) for span in spans_for(path, piece_bytes)]
        empty_seen = empty_seen or None in pieces
        for piece in pieces:
            if piece is None:
                continue
            doc = json.loads(bytes(piece.data))
            decoded += doc["traceEvents"] if piece.tail else doc
        assert decoded == events, piece_bytes
        assert [piece.tail for piece in pieces if piece is not None][-1]
    assert empty_seen  # spans shorter than an event: some hold no event start


def test_tail_holds_the_fields_after_the_array(tmp_path: Path) -> None:
    path = written(tmp_path / "t.json", plain_events(3), ", ")
    *_, last = [piece for piece in map(read_span, spans_for(path, 64)) if piece is not None]
    data = bytes(last.data)
    assert last.tail and json.loads(data)["more"] == [{"a": 1}]
    assert data.startswith(b'{"traceEvents":[')


def assert_same_as_one_process(path: Path, piece_bytes: int, pool: ProcessPoolExecutor) -> pl.DataFrame:
    frame, meta, warnings, details = one_process(path, piece_bytes)
    parallel_warnings: list[str] = []
    with open_trace(path) as source:
        parallel, parallel_details, parallel_meta = decode_columns_parallel(
            source, parallel_warnings, WORKERS, chunk_bytes=piece_bytes, local_pieces=2, executor=pool
        )
    assert finish_pieces(parallel).equals(frame) and parallel_details.equals(details)
    assert parallel_meta == meta and parallel_warnings == warnings
    return frame


@pytest.mark.parametrize("piece_bytes", [50, 333, 4096])
def test_wrong_cuts_and_a_byte_order_mark(tmp_path: Path, piece_bytes: int, pool: ProcessPoolExecutor) -> None:
    """Boundaries inside strings grow a span into the next; a UTF-8 byte-order mark shifts every
    offset by 3 (spans are file offsets, the text starts after the mark)."""
    events = tricky_events()
    path = written(tmp_path / "bom.json", events, " ,\n ", prefix=b"\xef\xbb\xbf")
    frame = assert_same_as_one_process(path, piece_bytes, pool)
    assert frame.height == len(events) - 2  # two `ph: M` events become labels


def test_gzip_through_the_thread(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(written(tmp_path / "t.json", plain_events(300), ", ").read_bytes()))
    frame = assert_same_as_one_process(path, 2048, pool)
    assert frame.height == 601


def test_cut_off_gzip_is_one_line(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    packed = gzip.compress(written(tmp_path / "t.json", plain_events(300), ", ").read_bytes())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with open_trace(path) as source, pytest.raises(TraceFormatError, match="corrupt or truncated gzip"):
        decode_columns_parallel(source, [], WORKERS, chunk_bytes=1024, local_pieces=2, executor=pool)


def test_file_changed_while_read(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    """Written to after it was opened: the spans' readers (here and in the worker) refuse it."""
    path = written(tmp_path / "t.json", plain_events(300), ", ")
    with open_trace(path) as source:
        with path.open("ab") as more:
            more.write(b" ")
        with pytest.raises(TraceFormatError, match="changed while it was being read"):
            decode_columns_parallel(source, [], WORKERS, chunk_bytes=1024, local_pieces=2, executor=pool)
    (span, *_) = spans_for(path, 1024)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(TraceFormatError, match="changed while it was being read"):
        read_span(span)
    path.unlink()
    with pytest.raises(TraceFormatError, match="changed while it was being read"):
        read_span(span)


def test_workers_run_polars_on_one_thread(pool: ProcessPoolExecutor) -> None:
    assert pool.submit(pl.thread_pool_size).result() == 1


def test_prefetch_passes_errors_on_and_stops_its_thread() -> None:
    finished: list[str] = []

    def blocks(fail: bool) -> Iterator[bytes]:
        try:
            yield from (bytes([i]) for i in range(100))
            if fail:
                raise TraceFormatError("corrupt or truncated gzip (test)")
        finally:
            finished.append("done")

    assert b"".join(prefetched(blocks(False), 4)) == bytes(range(100))
    with pytest.raises(TraceFormatError, match="corrupt"):
        list(prefetched(blocks(True), 4))
    before = threading.active_count()
    early = prefetched(blocks(False), 4)
    assert next(early) == b"\x00"
    early.close()
    assert threading.active_count() == before and finished == ["done"] * 3


def test_progress_counts_file_offsets_to_the_size(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    path = written(tmp_path / "t.json", plain_events(300), ", ")
    seen: list[tuple[int, int]] = []
    with open_trace(path) as source:
        decode_columns_parallel(
            source, [], WORKERS, chunk_bytes=1024, local_pieces=2, executor=pool, progress=lambda *p: seen.append(p)
        )
    size = path.stat().st_size
    assert len(seen) > 20 and seen[-1] == (size, size) and all(total == size for _, total in seen)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_a_descriptor_path_reaches_the_workers(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    """`htatui info /dev/stdin < trace.json`: the path names this process's descriptor, which is
    another file (or none) in a worker; the workers are given one that opens this file there."""
    path = written(tmp_path / "t.json", plain_events(300), ", ")
    expected = one_process(path, 1024)[0]
    fd = os.open(path, os.O_RDONLY)
    try:
        with open_trace(Path(f"/dev/fd/{fd}")) as source:
            frame, _, _ = decode_columns_parallel(source, [], WORKERS, chunk_bytes=1024, local_pieces=2, executor=pool)
    finally:
        os.close(fd)
    assert finish_pieces(frame).equals(expected)
