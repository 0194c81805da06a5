"""One big trace file decoded on several cores: its pieces (chunks.py) decoded by worker processes.

A plain file is named to the workers as byte ranges (ranges.py) that each reads itself; a gzip
file is gunzipped here, in a thread ahead of the cutting (prefetch.py), and its pieces' bytes are
sent. This process decodes pieces too while the workers are busy; each worker turns a piece into
its frame columns (`columns.piece_columns`), which come back as lz4-compressed Arrow IPC bytes
and are added in file order. A cut is only confirmed by decoding: the pieces are taken
in order, and one that is not JSON is joined to the next and decoded again, so the result is the
frame one process makes (tests/trace/test_parallel_decode.py). A document that cannot be cut is decoded
whole here, as in one process. Files of a few pieces never start a worker; bigger ones start
them at once, handing them pieces past the first `LOCAL_PIECES`, which this process decodes
while the workers start (each imports polars: ~0.4 s).
"""

from __future__ import annotations

import dataclasses
import gc
import io
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Literal

import msgspec
import polars as pl

from htatui.trace import chunks, ranges
from htatui.trace.chunks import NotChunkable, Piece, Window, cut_window, locate_in, opening_of
from htatui.trace.columns import FrameColumns, PieceColumns, decode_columns, piece_columns
from htatui.trace.decode import TraceFormatError, TraceHeader
from htatui.trace.events import decode_typed_piece, merge_headers, read_whole_events
from htatui.trace.frame import placeholder_rank
from htatui.trace.model import TraceMeta
from htatui.trace.prefetch import prefetched
from htatui.trace.ranges import Span
from htatui.trace.read import TraceSource
from htatui.trace.timings import add_current, recording, spent
from htatui.trace.workers import start_piece_worker, stop_pool, termination_deferred

LOCAL_PIECES = 8
"""A file of no more pieces starts no worker (not worth the start-up); in a bigger one, the pieces
decoded here before any goes to a worker (gzip), or that this process keeps while they start (plain)."""
STARTING_AHEAD = 16
"""Pieces this process may decode ahead of the oldest one while no worker has answered yet."""
GUNZIP_AHEAD = 64
"""Blocks of gunzip output (256 KB each) made ahead of the cutting."""


@dataclass(frozen=True)
class Decoded:
    """What became of one piece: its columns, a wrong cut, a document to decode whole, or an error."""

    outcome: Literal["columns", "wrong cut", "whole", "error", "empty"]
    columns: PieceColumns | None = None
    after: TraceHeader | None = None
    """For the tail piece: the document's fields after the events array."""
    error: Exception | None = None
    frame_ipc: bytes | None = None
    """From a worker: the columns' frame as lz4 Arrow IPC (`columns.frame` is then None)."""
    details_ipc: bytes | None = None
    """From a worker: the columns' detail rows as lz4 Arrow IPC (`columns.details` is then None)."""
    tail: bool = False
    """For a span (ranges.py): whether its piece was the tail."""
    position: tuple[int, int] = (0, 0)
    """For a span: (bytes of the file done once it is added, the file's size), for progress."""
    phase_s: dict[str, float] = dataclasses.field(default_factory=dict)
    """Seconds per phase (timings.py) of decoding the piece, wherever it was decoded."""

    def received(self) -> Decoded:
        """The frame read back from its IPC bytes, in this process; the piece's seconds per phase added to
        the current recording."""
        add_current(self.phase_s)
        if self.frame_ipc is None or self.columns is None:
            return dataclasses.replace(self, phase_s={})
        with spent("framing"):
            return self._read_back()

    def _read_back(self) -> Decoded:
        assert self.frame_ipc is not None and self.columns is not None
        # IPC writes the constant `rank` out in full; made constant again, it is one chunk for the whole
        # frame as in one process. Were it cut unlike the other columns, the next expression over the
        # frame would copy every column to realign them (the loader's peak grew by 1.3x the JSON).
        frame = pl.read_ipc(io.BytesIO(self.frame_ipc)).with_columns(placeholder_rank())
        details = None if self.details_ipc is None else pl.read_ipc(io.BytesIO(self.details_ipc))
        columns = dataclasses.replace(self.columns, frame=frame, details=details)
        return dataclasses.replace(self, columns=columns, frame_ipc=None, details_ipc=None, phase_s={})


def decode_piece(piece: Piece, list_form: bool) -> Decoded:
    """One piece's columns, index counted from 0 (in a worker, or here), with its seconds per phase
    (for `Decoded.received` to add where it arrives); never raises."""
    with recording() as timings:
        decoded = _decode_piece(piece, list_form)
    return dataclasses.replace(decoded, phase_s=timings.seconds)


def _decode_piece(piece: Piece, list_form: bool) -> Decoded:
    try:
        events, after = decode_typed_piece(piece, list_form)
    except (NotChunkable, UnicodeDecodeError):
        return Decoded("whole")
    except msgspec.DecodeError as exc:
        return Decoded("whole" if "utf-8" in str(exc).lower() else "wrong cut")
    except Exception as exc:  # noqa: BLE001 - raised here only once the piece is known to start at an event
        return Decoded("error", error=exc)
    return Decoded("columns", piece_columns(events, 0), after)


def decode_span(span: Span, list_form: bool, fd: int | None = None) -> Decoded:
    """`decode_piece` of a span's piece, read from `fd` or (in a worker) from the file; never raises."""
    try:
        piece = ranges.read_span(span, fd)
    except (TraceFormatError, OSError) as exc:
        error = exc if isinstance(exc, TraceFormatError) else TraceFormatError(ranges.CHANGED)
        return Decoded("error", error=error)
    if piece is None:
        return Decoded("empty")
    decoded = decode_piece(piece, list_form)
    return dataclasses.replace(decoded, tail=piece.tail, position=piece.position)


def decode_span_to_send(span: Span, list_form: bool) -> Decoded:
    """`decode_span` in a worker, sent as `decode_piece_to_send` sends."""
    return _to_send(decode_span(span, list_form))


def decode_piece_to_send(piece: Piece, list_form: bool) -> Decoded:
    """`decode_piece` in a worker."""
    return _to_send(decode_piece(piece, list_form))


def _to_send(decoded: Decoded) -> Decoded:
    """The frame as lz4 Arrow IPC, which is ~6x smaller than the frame (its mostly null device
    columns compress away) and cheaper to write than a pickle; writing it is framing time."""
    with recording() as timings, spent("framing"):
        sent = _as_ipc(decoded)
    timings.add(decoded.phase_s)
    return dataclasses.replace(sent, phase_s=timings.seconds)


def _as_ipc(decoded: Decoded) -> Decoded:
    if decoded.columns is None or decoded.columns.frame is None:
        return decoded
    buffer = io.BytesIO()
    decoded.columns.frame.write_ipc(buffer, compression="lz4")
    details_ipc = None
    if decoded.columns.details is not None:
        details_buffer = io.BytesIO()
        decoded.columns.details.write_ipc(details_buffer, compression="lz4")
        details_ipc = details_buffer.getvalue()
    columns = dataclasses.replace(decoded.columns, frame=None, details=None)
    return dataclasses.replace(decoded, columns=columns, frame_ipc=buffer.getvalue(), details_ipc=details_ipc)


def decode_columns_parallel(
    source: TraceSource,
    warnings: list[str],
    workers: int,
    *,
    chunk_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    local_pieces: int = LOCAL_PIECES,
    executor: ProcessPoolExecutor | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, TraceMeta]:
    """`columns.decode_columns` of a regular file on `workers` processes (this one included).

    `executor` (for tests) is used instead of starting workers, and left running.
    """
    if workers <= 1 or not source.regular:
        return decode_columns(source, warnings, chunk_bytes=chunk_bytes, progress=progress)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # decoded events hold no cycles (events.py)
    try:
        piece_bytes = chunk_bytes or chunks.CHUNK_BYTES
        with _Workers(workers - 1, executor) as pool:
            try:
                bom = source.plain_start()
                if bom is None:
                    columns, header = _read_in_order(source, pool, piece_bytes, progress, local_pieces)
                else:
                    columns, header = _read_spans(source, bom, pool, piece_bytes, progress, local_pieces)
            except NotChunkable:
                columns, header = read_whole_events(source.whole(), FrameColumns, warnings)
    finally:
        if gc_was_enabled:
            gc.enable()
    with spent("framing"):
        frame = columns.frame()
    columns.add_warnings(warnings)
    return frame, columns.details(), columns.meta(header)


class _Workers:
    """The worker processes, started when first asked for (spawn: this process may run polars threads)."""

    def __init__(self, count: int, executor: ProcessPoolExecutor | None) -> None:
        self.count = count
        self._given = executor
        self._pool = executor

    def pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                max_workers=self.count, mp_context=context, initializer=start_piece_worker, initargs=(os.getpid(),)
            )
        return self._pool

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if self._pool is None or self._pool is self._given:
            return
        if kind is None:
            # Not waited for: a worker's exit (~0.1 s) overlaps the frame's finishing here.
            self._pool.shutdown(wait=False)
            return
        # Failed or cancelled: queued pieces are dropped and busy workers ended now.
        stop_pool(self._pool)


def _read_in_order(
    source: TraceSource,
    workers: _Workers,
    chunk_bytes: int,
    progress: Callable[[int, int], None] | None,
    local_pieces: int,
) -> tuple[FrameColumns, TraceHeader]:
    """Cut pieces ahead, decode them in the workers and here, and add them to a sink in file order."""
    # Gunzipped in a thread (zlib lets go of the GIL), so that it overlaps the decoding here.
    blocks = prefetched(source.blocks(), GUNZIP_AHEAD)
    try:
        return _read_blocks_in_order(source, blocks, workers, chunk_bytes, progress, local_pieces)
    finally:
        blocks.close()  # the thread ends before the file may be read again whole


def _read_blocks_in_order(
    source: TraceSource,
    blocks: Iterator[bytes],
    workers: _Workers,
    chunk_bytes: int,
    progress: Callable[[int, int], None] | None,
    local_pieces: int,
) -> tuple[FrameColumns, TraceHeader]:
    window = Window(blocks, lambda: (source.file_done, source.file_bytes))
    span = locate_in(window)
    window.at = span.start
    opening = chunks.opening_of(span)
    cuts: Iterator[Piece] = cut_window(window, span, chunk_bytes=chunk_bytes)
    sink = FrameColumns()
    after = TraceHeader()
    # Pieces cut and not yet added, oldest first, each with its decoding (done, or in a worker).
    ahead: deque[tuple[Piece, Future[Decoded], bool]] = deque()
    in_workers = 0
    workers_started = False
    ended = False
    cut_count = 0

    def cut() -> Piece | None:
        nonlocal ended, cut_count
        piece = None if ended else next(cuts, None)
        ended = piece is None
        cut_count += piece is not None
        return piece

    def here(piece: Piece) -> Future[Decoded]:
        future: Future[Decoded] = Future()
        future.set_result(decode_piece(piece, span.list_form))
        return future

    def submit(piece: Piece) -> Future[Decoded]:
        try:
            with termination_deferred():  # a submit may spawn a worker
                return workers.pool().submit(decode_piece_to_send, piece, span.list_form)
        except (BrokenProcessPool, OSError, RuntimeError):
            workers.count = 0  # workers could not start: the rest is decoded here
            return here(piece)

    def result(piece: Piece, future: Future[Decoded]) -> Decoded:
        try:
            return future.result().received()
        except Exception:  # noqa: BLE001 - a worker died (killed, out of memory): decode the piece here
            workers.count = 0
            return decode_piece(piece, span.list_form).received()

    while True:
        # Keep every worker busy with two pieces, once the file has proved big enough for them.
        while not ended and cut_count >= local_pieces and in_workers < 2 * workers.count:
            piece = cut()
            if piece is not None:
                ahead.append((piece, submit(piece), True))
                in_workers += 1
        waiting = bool(ahead) and not ahead[0][1].done()
        # While the workers start (~0.5 s: each imports polars) this process decodes further ahead.
        extra = 4 if workers_started else STARTING_AHEAD
        if not ahead or (waiting and not ended and len(ahead) < 2 * workers.count + extra):
            # Nothing to add yet: decode the next piece here rather than wait for a worker.
            piece = cut()
            if piece is not None:
                ahead.append((piece, here(piece), False))
            elif not ahead:
                break
            continue
        piece, future, pooled = ahead.popleft()
        in_workers -= pooled
        workers_started = workers_started or pooled
        decoded = result(piece, future)
        for _ in range(chunks.MAX_GROWTH):
            if decoded.outcome != "wrong cut" or piece.tail:
                break
            # The cut after this piece was inside a string or a nested list: grow it by the next piece.
            following = cut() if not ahead else None
            if ahead:
                following, later, pooled = ahead.popleft()
                later.cancel()
                in_workers -= pooled
            if following is None:
                raise NotChunkable("no valid cut found")
            piece = piece.joined(following, opening)
            decoded = decode_piece(piece, span.list_form).received()
        if decoded.outcome == "error" and decoded.error is not None:
            raise decoded.error
        if decoded.outcome != "columns" or decoded.columns is None:
            raise NotChunkable(decoded.outcome)
        sink.add_piece(decoded.columns)
        if decoded.after is not None:
            after = decoded.after
        if progress is not None:
            progress(*piece.position)
        if piece.tail:
            break
    return sink, merge_headers(span.header, after)


def _read_spans(
    source: TraceSource,
    bom: int,
    workers: _Workers,
    piece_bytes: int,
    progress: Callable[[int, int], None] | None,
    local_pieces: int,
) -> tuple[FrameColumns, TraceHeader]:
    """`_read_in_order` of a plain file named as spans: the workers read their pieces themselves.

    This process takes the lowest span nobody has taken whenever the oldest one is not decoded
    yet; the workers are kept two spans busy each, from span `local_pieces` on, so that they
    start at once on pieces this process will not reach while they start.
    """
    span = locate_in(Window(source.blocks()))
    identity = source.identity
    if identity is None:
        raise NotChunkable("not a regular file")
    spans = ranges.spans_of(_path_for_workers(source), identity, span.start + bom, opening_of(span), piece_bytes)
    count = len(spans)
    fd = source.fileno()
    taken = [False] * count
    decodings: dict[int, Future[Decoded]] = {}
    in_workers: set[int] = set()
    next_here = 0
    next_pooled = local_pieces if count > local_pieces else count

    def free_from(at: int) -> int:
        while at < count and taken[at]:
            at += 1
        return at

    def here(at: int) -> Future[Decoded]:
        future: Future[Decoded] = Future()
        future.set_result(decode_span(spans[at], span.list_form, fd))
        return future

    def submit(at: int) -> Future[Decoded]:
        try:
            with termination_deferred():  # a submit may spawn a worker
                future = workers.pool().submit(decode_span_to_send, spans[at], span.list_form)
        except (BrokenProcessPool, OSError, RuntimeError):
            workers.count = 0  # workers could not start: the rest is decoded here
            return here(at)
        in_workers.add(at)
        return future

    def result(at: int) -> Decoded:
        in_workers.discard(at)
        try:
            return decodings.pop(at).result().received()
        except Exception:  # noqa: BLE001 - a worker died (killed, out of memory): decode the span here
            workers.count = 0
            return decode_span(spans[at], span.list_form, fd).received()

    sink = FrameColumns()
    head = 0
    while head < count:
        in_workers.difference_update([at for at in in_workers if decodings[at].done()])
        while len(in_workers) < 2 * workers.count and (next_pooled := free_from(next_pooled)) < count:
            taken[next_pooled] = True
            decodings[next_pooled] = submit(next_pooled)
        oldest = decodings.get(head)
        if oldest is None or not oldest.done():
            next_here = free_from(next_here)
            if next_here < count:
                taken[next_here] = True
                decodings[next_here] = here(next_here)
                continue
        decoded = result(head)
        joined, grown = spans[head], 1
        for _ in range(chunks.MAX_GROWTH):
            if decoded.outcome != "wrong cut" or decoded.tail:
                break
            # The boundary closing this span was inside a string or a nested list: grow it by the next.
            if head + grown >= count:
                raise NotChunkable("no valid cut found")
            later = decodings.pop(head + grown, None)
            if later is not None:
                later.cancel()
            in_workers.discard(head + grown)
            taken[head + grown] = True
            joined = joined.grown(spans[head + grown])
            grown += 1
            decoded = decode_span(joined, span.list_form, fd).received()
        head += grown
        if decoded.outcome == "empty":
            continue  # no event starts in this span: its neighbours hold them
        if decoded.outcome == "error" and decoded.error is not None:
            raise decoded.error
        if decoded.outcome != "columns" or decoded.columns is None:
            raise NotChunkable(decoded.outcome)
        sink.add_piece(decoded.columns)
        if progress is not None:
            progress(*decoded.position)
        if decoded.tail:
            for future in decodings.values():
                future.cancel()
            source.check_unchanged()
            return sink, merge_headers(span.header, decoded.after or TraceHeader())
    raise NotChunkable("no span held the end of the array")


def _path_for_workers(source: TraceSource) -> str:
    """A path that opens, in another process, the file this process has open: its descriptor under
    /proc (a `/dev/stdin` or `/dev/fd/N` given on the command line names another file there, and a
    relative path depends on the folder), else the absolute path."""
    opened = f"/proc/{os.getpid()}/fd/{source.fileno()}"
    return opened if os.path.exists(opened) else os.path.abspath(source.path)
