"""One file's pieces decoded in worker processes give the frame one process gives, value for value."""

from __future__ import annotations

import gc
import json
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import polars as pl
import pytest
from decode_util import Decoded, one_process, tricky_events

from htatui.trace import chunks
from htatui.trace.frame import finish_pieces
from htatui.trace.loader import parse_file
from htatui.trace.parallel import decode_columns_parallel
from htatui.trace.read import open_trace

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
"""This process and two workers: pieces come back out of order and are added in order."""


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=WORKERS - 1, mp_context=context, initializer=gc.disable) as executor:
        yield executor


def in_workers(
    path: Path, chunk_bytes: int, pool: ProcessPoolExecutor, progress: list[tuple[int, int]] | None = None
) -> Decoded:
    warnings: list[str] = []
    with open_trace(path) as source:
        frame, details, meta = decode_columns_parallel(
            source,
            warnings,
            WORKERS,
            chunk_bytes=chunk_bytes,
            local_pieces=2,
            executor=pool,
            progress=None if progress is None else lambda done, total: progress.append((done, total)),
        )
    return finish_pieces(frame), meta, warnings, details


def assert_same(path: Path, chunk_bytes: int, pool: ProcessPoolExecutor) -> pl.DataFrame:
    frame, meta, warnings, details = one_process(path, chunk_bytes)
    parallel_frame, parallel_meta, parallel_warnings, parallel_details = in_workers(path, chunk_bytes, pool)
    assert parallel_details.schema == details.schema and parallel_details.equals(details)
    assert parallel_frame.schema == frame.schema
    assert parallel_frame.equals(frame)
    assert parallel_meta == meta and parallel_warnings == warnings
    assert_cut_alike(frame)
    assert_cut_alike(parallel_frame)
    return frame


def assert_cut_alike(frame: pl.DataFrame) -> None:
    """A chunk per piece in every column but the constant ones (rank; a column null throughout):
    were one column cut otherwise, finish_pieces (and every later expression) would copy the whole
    frame to realign the columns."""
    lengths = frame["ts"].chunk_lengths()
    held = [name for name in frame.columns if name != "rank" and frame[name].null_count() < frame.height]
    assert {name: frame[name].chunk_lengths() for name in held} == {name: lengths for name in held}


@pytest.mark.parametrize("rank", [0, 2])
def test_demo_ranks(rank: int, pool: ProcessPoolExecutor) -> None:
    """The demo's gzip ranks (~1 MB of JSON) in 16 KB pieces: about 70 pieces, most in the workers."""
    frame = assert_same(ROOT / "fixtures" / "demo" / f"rank-{rank}.json.gz", 16 << 10, pool)
    assert frame.height > 3000 and frame["index"].is_sorted() and frame["ts"].n_chunks() > 50


@pytest.mark.parametrize(
    ("folder", "chunk_bytes"), [("nccl_parser_config", 256 << 10), ("ns_resolution_trace", 256 << 10)]
)
def test_shared_traces(folder: str, chunk_bytes: int, shared_traces: Path, pool: ProcessPoolExecutor) -> None:
    """NCCL collectives' device args; fractional timestamps (the flag is or-ed over the pieces)."""
    (path,) = sorted((shared_traces / folder).glob("*.json*"))
    frame = assert_same(path, chunk_bytes, pool)
    if folder == "ns_resolution_trace":
        assert in_workers(path, chunk_bytes, pool)[1].fractional_ts
    else:
        assert frame["collective_name"].drop_nulls().len() > 0


@pytest.mark.parametrize("chunk_bytes", [64, 300, 700])
def test_wrong_cuts_are_joined_in_order(tmp_path: Path, chunk_bytes: int, pool: ProcessPoolExecutor) -> None:
    """Names holding `}, {` put candidate cuts inside strings: a piece ending there is joined to the
    next one, and the pieces after it (decoded from a wrong start) are dropped."""
    doc = {"traceEvents": tricky_events(), "traceName": "t", "more": [{"a": 1}, {"b": 2}]}
    path = tmp_path / "tricky.json"
    path.write_text(json.dumps(doc, indent=1))
    frame = assert_same(path, chunk_bytes, pool)
    assert frame.height == len(doc["traceEvents"]) - 2


def test_progress_reaches_the_file_size(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    path = ROOT / "fixtures" / "demo" / "rank-1.json.gz"
    seen: list[tuple[int, int]] = []
    in_workers(path, 32 << 10, pool, seen)
    assert len(seen) > 10 and seen[-1] == (path.stat().st_size, path.stat().st_size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_parse_file_with_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader's whole single-file path (checks, iterations) with its own workers started."""
    path = ROOT / "fixtures" / "demo" / "rank-3.json.gz"
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 16 << 10)
    monkeypatch.setattr("htatui.trace.parallel.LOCAL_PIECES", 2)
    one = parse_file(path)
    several = parse_file(path, workers=2)
    assert several.events.equals(one.events)
    assert several.meta == one.meta and several.warnings == one.warnings
