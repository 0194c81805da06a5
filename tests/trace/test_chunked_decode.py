"""Cutting: pieces of any size give exactly what the whole document decoded as one piece gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import pytest
from decode_util import tricky_events, whole
from kineto_util import kernel, runtime, write_trace

from htatui.jobs.load import load_traces
from htatui.trace import decode as decode_module
from htatui.trace import events as events_module
from htatui.trace.chunks import decode_pieces, locate_events
from htatui.trace.columns import decode_frame
from htatui.trace.decode import TraceFormatError
from htatui.trace.loader import LoadProgress
from htatui.trace.model import TraceMeta


def pieces(raw: bytes, chunk_bytes: int) -> tuple[pl.DataFrame, TraceMeta, list[str]]:
    warnings: list[str] = []
    frame, meta = decode_frame(raw, warnings, chunk_bytes=chunk_bytes)
    return frame, meta, warnings


def write(doc: Any) -> bytes:
    return json.dumps(doc, indent=1).encode()


@pytest.mark.parametrize("chunk_bytes", [64, 700, 5000, 1 << 20])
def test_pieces_equal_the_whole_document(chunk_bytes: int) -> None:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Test GPU"}],
        "traceEvents": tricky_events(),
        # After the array: a list whose strings hold brackets, and a list of objects.
        "logs": ["a ] b", "c }, { d ]"],
        "more": [{"a": 1}, {"b": 2}],
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        "traceName": "t",
    }
    raw = write(doc)
    frame, meta, warnings = pieces(raw, chunk_bytes)
    expected_frame, expected_meta, expected_warnings = whole(raw)
    assert frame.equals(expected_frame)
    assert meta == expected_meta and warnings == expected_warnings
    # Numbers by hand: 2 M events are not rows; the odd kernel's stream is a list, so all its args are null.
    assert frame.height == len(doc["traceEvents"]) - 2  # type: ignore[arg-type]
    odd = frame.filter(pl.col("name") == "odd")
    assert odd["stream"].to_list() == [None] and odd["correlation"].to_list() == [None]
    assert frame.filter(pl.col("name") == "k3")["grid"].to_list() == ["3,1,1"]
    assert meta.thread_names == {("100", "1"): "main }, {"} and meta.base_time_ns == 1_700_000_000_000_000_000
    # runtime() writes the correlation as the External id too: one dropped value in each.
    assert warnings == [
        f"1 value(s) of '{c}' did not fit a 64-bit number and were dropped" for c in ("correlation", "external_id")
    ]


def test_list_form_and_empty_array() -> None:
    raw = write(tricky_events())
    assert pieces(raw, 300)[0].equals(whole(raw)[0])
    frame, meta, _ = pieces(b'{"traceEvents": [], "traceName": "x"}', 100)
    assert frame.height == 0 and meta.trace_name == "x"


def test_pieces_are_bounded_and_progress_reaches_the_end() -> None:
    raw = write({"traceEvents": [kernel(f"k{i}", i, 1) for i in range(2000)]})
    span = locate_events(raw)
    seen: list[tuple[int, int]] = []

    def decode(piece: bytes | bytearray | memoryview) -> list[Any]:
        assert len(piece) < 4096 + 1024  # a piece is the chunk size plus at most one event
        return msgspec.json.decode(piece, type=list[Any])

    def decode_tail(piece: bytes | bytearray | memoryview) -> list[Any]:
        events: list[Any] = msgspec.json.decode(piece)["traceEvents"]
        return events

    got = list(
        decode_pieces(raw, span, decode, decode_tail, chunk_bytes=4096, progress=lambda d, t: seen.append((d, t)))
    )
    assert len(got) > 20 and sum(map(len, got)) == 2000
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1] == (len(raw), len(raw))


@pytest.mark.parametrize(
    ("raw", "outcome"),
    [
        (b"", "empty file"),
        (b"   ", "empty file"),
        (b'{"schemaVersion": 1}', "not a Chrome trace (no traceEvents)"),
        (b'{"a": "\\"traceEvents\\": [", "traceEvents": 5}', "traceEvents is not a list"),
        # An event field of the wrong type: the event is dropped, the rest read.
        (b'{"traceEvents": [{"ph": "X", "ts": "late"}, {"ph": "X", "ts": 1, "dur": 1}]}', "1 malformed events skipped"),
        (b'{"traceEvents": [{"ph": "X", "name": "bad\xff", "ts": 1, "dur": 1}]}', "invalid UTF-8 replaced with U+FFFD"),
    ],
)
def test_what_cannot_be_cut_is_decoded_whole(raw: bytes, outcome: str, monkeypatch: pytest.MonkeyPatch) -> None:
    whole_reads: list[int] = []
    decode_document = decode_module.decode_document

    def counted(data: bytes | bytearray) -> Any:
        whole_reads.append(len(data))
        return decode_document(data)

    monkeypatch.setattr(events_module, "decode_document", counted)
    warnings: list[str] = []
    try:
        frame, _ = decode_frame(raw, warnings, chunk_bytes=16)
    except TraceFormatError as exc:
        assert str(exc) == outcome
    else:
        assert outcome in warnings and frame.height == 1
    assert whole_reads == [len(raw)]


def test_args_with_invalid_utf8_are_dropped_not_fatal() -> None:
    # msgspec leaves raw args unchecked, so the bytes decode; the event keeps its fields, not its args.
    events = [runtime("launch", 1, 2, corr=5), kernel("k", 3, 4, corr=5)]
    raw = write({"traceEvents": events}).replace(b'"External id": 5', b'"External id": "\xff"')
    frame, _, warnings = pieces(raw, 1 << 20)
    assert frame["correlation"].to_list() == [None, 5] and frame["name"].to_list() == ["launch", "k"]
    assert whole(raw)[0].equals(frame)


def test_load_progress_counts_bytes_within_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("htatui.trace.chunks.CHUNK_BYTES", 16 << 10)
    path = tmp_path / "rank-0.json.gz"
    write_trace(path, [kernel(f"k{i}", i * 10, 5, corr=i) for i in range(2000)])
    size = path.stat().st_size  # progress counts the file's bytes: compressed ones for gzip
    seen: list[LoadProgress] = []
    traces = load_traces([path], use_cache=False, progress=seen.append)
    assert traces.ranks[0].events.height == 2000
    within = [(u.bytes_done, u.bytes_total) for u in seen if u.bytes_total]
    assert len(within) > 5 and {total for _, total in within} == {size}
    assert [d for d, _ in within] == sorted(d for d, _ in within) and within[-1][0] == size
    assert (seen[-1].done, seen[-1].total, seen[-1].bytes_total) == (1, 1, 0)  # then the file is done
