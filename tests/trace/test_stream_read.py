"""A regular trace file streamed block by block gives exactly what decoding it whole gives.

Block and piece sizes are made tiny here (a few bytes of file read or gunzip output, a few
hundred bytes of JSON per piece), so events, byte-order marks, gzip members and the `},{` cut
pattern all fall across block and piece boundaries.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from decode_golden import DECODED, decoded_bytes, expected
from decode_util import tricky_events, whole
from kineto_util import kernel, runtime, step

from htatui.jobs.load import load_traces
from htatui.trace import LoadError
from htatui.trace import chunks as chunks_module
from htatui.trace.columns import decode_frame
from htatui.trace.decode import TraceFormatError
from htatui.trace.loader import parse_file
from htatui.trace.read import open_trace, read_trace_bytes


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """7-byte file reads and 5-byte gunzip steps."""
    monkeypatch.setattr("htatui.trace.read._CHUNK", 7)
    monkeypatch.setattr("htatui.trace.read._GUNZIP_STEP", 5)


def trace_doc(events: list[dict[str, Any]]) -> bytes:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Test GPU"}],
        "traceEvents": events,
        "logs": ["a ] b", "c }, { d ]"],
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }
    return json.dumps(doc, indent=1).encode()


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def streamed(path: Path) -> bytes:
    with open_trace(path) as source:
        return b"".join(source.blocks())


@pytest.mark.parametrize("name", ["rank-0.json", "rank-0.json.gz"])
def test_blocks_join_to_the_whole_read(tmp_path: Path, tiny_blocks: None, name: str) -> None:
    data = trace_doc(tricky_events())
    path = write(tmp_path / name, data)
    assert streamed(path) == read_trace_bytes(path)[0] == data


def test_byte_order_mark_split_across_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("htatui.trace.read._CHUNK", 2)  # the 3-byte mark spans two reads
    data = trace_doc([kernel("k", 1, 2)])
    path = write(tmp_path / "rank-0.json", b"\xef\xbb\xbf" + data)
    assert streamed(path) == data
    path = write(tmp_path / "rank-1.json", json.dumps({"traceEvents": []}).encode("utf-16"))
    with pytest.raises(TraceFormatError, match="is UTF-16 text"):
        streamed(path)


def test_gzip_members_and_zero_padding(tmp_path: Path, tiny_blocks: None) -> None:
    # A member ending while output was capped once hung the whole-file gunzip (stale unconsumed_tail).
    data = trace_doc(tricky_events())
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(gzip.compress(data[:500]) + b"\x00" * 9 + gzip.compress(data[500:]) + b"\x00\x00")
    assert streamed(path) == read_trace_bytes(path)[0] == data


@pytest.mark.parametrize("name", ["rank-0.json", "rank-0.json.gz"])
@pytest.mark.parametrize("chunk_bytes", [64, 333, 4096])
def test_streamed_frame_equals_the_whole_document(
    tmp_path: Path, tiny_blocks: None, name: str, chunk_bytes: int
) -> None:
    # Event names and a thread name hold `}, {`: a cut there must be grown past, in any block.
    data = trace_doc(tricky_events())
    path = write(tmp_path / name, data)
    warnings: list[str] = []
    with open_trace(path) as source:
        frame, meta = decode_frame(source, warnings, chunk_bytes=chunk_bytes)
    expected_frame, expected_meta, expected_warnings = whole(data)
    assert frame.equals(expected_frame)
    assert (meta, warnings) == (expected_meta, expected_warnings)
    # By hand: the 2 metadata events are not rows; the `}, {` thread name is kept whole.
    assert frame.height == len(tricky_events()) - 2
    assert meta.thread_names == {("100", "1"): "main }, {"}


def test_window_holds_about_one_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("htatui.trace.read._CHUNK", 1000)
    events = [kernel(f"k{i}", i * 10, 5, corr=i) for i in range(3000)]
    path = write(tmp_path / "rank-0.json", trace_doc(events))
    held: list[int] = []
    fill = chunks_module.Window.fill

    def counting_fill(window: chunks_module.Window, need: int = 0) -> bool:
        grew = fill(window, need)
        held.append(len(window.buf))
        return grew

    monkeypatch.setattr(chunks_module.Window, "fill", counting_fill)
    with open_trace(path) as source:
        frame, _ = decode_frame(source, [], chunk_bytes=8000)
    assert frame.height == 3000
    # A piece (8000 B) and 1000 B of look-ahead, the rest of the event it ends in, one 1000-byte
    # read, and the byte before the piece; never the file.
    event_bytes = max(len(json.dumps(e, indent=1)) for e in events) + 16
    assert path.stat().st_size > 40 * max(held) and max(held) <= 8000 + 1000 + event_bytes + 1000 + 1


@pytest.mark.parametrize("name", ["rank-0.json", "rank-0.json.gz"])
def test_progress_counts_the_file_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr("htatui.trace.chunks.CHUNK_BYTES", 4 << 10)
    monkeypatch.setattr("htatui.trace.read._CHUNK", 4 << 10)
    monkeypatch.setattr("htatui.trace.read._GUNZIP_STEP", 8 << 10)
    events = [step(1, 0, 100_000)] + [runtime("launch", i * 10, 2, corr=i) for i in range(2000)]
    path = write(tmp_path / name, trace_doc(events))
    seen: list[tuple[int, int]] = []
    parsed = parse_file(path, lambda done, total: seen.append((done, total)))
    assert parsed.events.height == 2001
    size = path.stat().st_size
    assert len(seen) > 5 and {total for _, total in seen} == {size}
    assert [done for done, _ in seen] == sorted(done for done, _ in seen) and seen[-1] == (size, size)


def test_gzip_bomb_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (8 << 20) + b"]}"))
    monkeypatch.setenv("HTATUI_MAX_TRACE_BYTES", str(1 << 20))
    with pytest.raises(LoadError) as info:
        load_traces([path], use_cache=False)
    message = str(info.value)
    assert "\n" not in message and "rank-0.json.gz" in message
    assert "gzip expands past 1048576 bytes (HTATUI_MAX_TRACE_BYTES)" in message


def test_truncated_gzip_is_refused_in_one_line(tmp_path: Path, tiny_blocks: None) -> None:
    data = gzip.compress(trace_doc([kernel(f"k{i}", i, 1) for i in range(200)]))
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(LoadError) as info:
        load_traces([path], use_cache=False)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: corrupt or truncated gzip (")


def test_file_that_grows_while_streamed_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("htatui.trace.read._CHUNK", 64)
    path = write(tmp_path / "rank-0.json", trace_doc([kernel("k", 1, 2)]))
    with open_trace(path) as source:
        blocks = source.blocks()
        next(blocks)
        with path.open("ab") as handle:
            handle.write(b" ")
        with pytest.raises(TraceFormatError, match="changed while it was being read"):
            list(blocks)


def test_odd_layout_falls_back_to_the_whole_file(tmp_path: Path, tiny_blocks: None) -> None:
    # An event field of the wrong type: the piece decoder gives up, the whole-file decoder reads it.
    data = trace_doc([kernel("k", 1, 2), {"ph": "X", "cat": "cpu_op", "name": "n", "ts": "late", "pid": 1}])
    path = write(tmp_path / "rank-0.json.gz", data)
    parsed = parse_file(path)
    assert parsed.events["name"].to_list() == ["k"]
    assert any("slower fallback" in w for w in parsed.warnings)


def test_shared_traces_stream_in_tiny_blocks_as_before(shared_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 4 KB gunzip steps and 32 KB pieces: blocks and pieces end anywhere; figures of tests/decode_golden.py.
    monkeypatch.setattr("htatui.trace.read._GUNZIP_STEP", 4 << 10)
    for name in ("h100_resnet_eager", "amd_trace", "ns_resolution_trace"):
        for path in sorted((shared_traces / name).glob("*.json*")):
            with open_trace(path) as source:
                got = decoded_bytes(source, chunk_bytes=32 << 10)
            assert got == {key: expected(str(path.relative_to(shared_traces)))[key] for key in DECODED}, path


def test_pipe_with_an_odd_layout_is_decoded_whole_from_what_was_read(tmp_path: Path) -> None:
    # A pipe is read once: the whole-file decoder gets those bytes, not a second (empty) read.
    data = trace_doc([kernel("k", 1, 2), kernel("nan", 3, 4)]).replace(b'"ts": 3', b'"ts": NaN')
    read_end, write_end = os.pipe()

    def feed() -> None:
        os.write(write_end, data)
        os.close(write_end)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        parsed = parse_file(Path(f"/dev/fd/{read_end}"))
    finally:
        os.close(read_end)
    assert parsed.identity is None and parsed.events["name"].to_list() == ["k"]
    assert parsed.warnings[0] == "non-standard JSON (NaN or Infinity literals); decoded with the slower fallback"
