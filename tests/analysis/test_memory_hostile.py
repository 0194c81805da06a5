"""Hostile memory inputs end in one line naming the file: absurd nesting, NaN, numbers past 64 bits."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from kineto_util import write_trace
from memory_util import entry, memory_event, snapshot_a, write_pickle

from htatui.cli.main import main
from htatui.trace.memory_inputs import MemoryInputError, read_memory

DEPTH = 100_000
"""Far deeper than Python's recursion limit: a reader that recurses per level would crash."""


def _deeply_nested_pickle(path: Path) -> Path:
    """{'segments': [{'blocks': [], 'segment_type': [[[…]]]}]} written opcode by opcode.

    pickle.dumps itself recurses, so the nesting is built by hand: DEPTH empty lists pushed, then
    DEPTH - 1 APPENDs fold each into the one below it.
    """

    def text(value: str) -> bytes:
        return b"\x8c" + bytes([len(value)]) + value.encode()

    body = b"}" + text("segments") + b"]" + b"}" + text("blocks") + b"]" + b"s"
    body += text("segment_type") + b"]" * DEPTH + b"a" * (DEPTH - 1) + b"s" + b"a" + b"s"
    path.write_bytes(b"\x80\x04" + body + b".")
    return path


def _snapshot_with_address(address: int) -> dict[str, Any]:
    snapshot: dict[str, Any] = snapshot_a()
    snapshot["device_traces"] = [[entry("alloc", address, 512, 11)]]
    return snapshot


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


CASES = {
    "nested.pickle": (_deeply_nested_pickle, r"nested\.pickle: refused: the pickle nests containers more than 64 deep"),
    "bigaddr.pickle": (
        lambda p: write_pickle(p, _snapshot_with_address(2**64)),
        r"bigaddr\.pickle: malformed snapshot \(ValueError: 18446744073709551616 does not fit in 64 bits\)",
    ),
    "deep.json": (lambda p: _write(p, "[" * DEPTH + "]" * DEPTH), r"deep\.json: invalid JSON \(nested too deeply\)"),
    "nan.json": (
        lambda p: _write(p, "[[1, 2], [[NaN, 1], [2, 3]]]"),
        r"nan\.json: invalid JSON \(NaN is not a number JSON allows\)",
    ),
    "inf.raw.json": (
        lambda p: _write(p, "[[1, 2, Infinity, 3], [5, 2, 4, 1]]"),
        r"inf\.raw\.json: invalid JSON \(Infinity is not a number JSON allows\)",
    ),
    "huge.json": (
        lambda p: _write(p, json.dumps([[1, 2], [[10**20, 1], [2, 3]]])),
        r"huge\.json: the memory timeline holds values that are not numbers",
    ),
    "huge.raw.json": (
        lambda p: _write(p, json.dumps([[1, 2, 3, 1e300], [5, 2, 4, 1]])),
        r"huge\.raw\.json: the raw memory timeline holds rows that are not numbers",
    ),
    "huge_trace.json": (
        lambda p: write_trace(p, [memory_event(5, 10**25, 10**25, 1)]),
        r"huge_trace\.json: a \[memory\] event holds a number that does not fit in 64 bits",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input_is_one_line_naming_the_file(tmp_path: Path, name: str) -> None:
    write, message = CASES[name]
    path = write(tmp_path / name)
    with pytest.raises(MemoryInputError, match=message) as raised:
        read_memory(path)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("name", ["nested.pickle", "deep.json", "nan.json", "huge_trace.json"])
def test_cli_exits_2_with_one_line(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    write, _ = CASES[name]
    path = write(tmp_path / name)
    assert main(["memory", str(path), "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    # A trace is opened as a job: its load notes may come first; the error is one line.
    (line,) = [line for line in captured.err.splitlines() if not line.startswith(("htatui: note:", "htatui: warning:"))]
    assert line.startswith(f"htatui: {path}: ")


def test_largest_64_bit_address_is_still_read(tmp_path: Path) -> None:
    # The bound is the int64 range itself, not something tighter: real addresses sit well inside it.
    path = write_pickle(tmp_path / "edge.pickle", _snapshot_with_address(2**63 - 1))
    events = read_memory(path).events
    assert events["addr"].to_list() == [2**63 - 1]


def test_gzip_is_read_by_the_trace_reader_bounded_gunzip(tmp_path: Path) -> None:
    # Two members (as `cat a.gz b.gz` makes) read as one; past the limit, or cut short, one line.
    trace = json.dumps({"traceEvents": [memory_event(5, 512, 1024, 1)]}).encode()
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(gzip.compress(trace[:20]) + gzip.compress(trace[20:]))
    assert read_memory(path).events["size_bytes"].to_list() == [512]
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * 100_000 + trace))
    with pytest.raises(MemoryInputError, match=r"bomb\.json\.gz: over the 50000-byte limit once decompressed$"):
        read_memory(bomb, max_bytes=50_000)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(trace)[:-12])
    with pytest.raises(MemoryInputError, match=r"cut\.json\.gz: corrupt or truncated gzip \(") as raised:
        read_memory(cut)
    assert "\n" not in str(raised.value)
