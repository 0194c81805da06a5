"""Hostile input to the decoder (issue 35, items 6, 7, 10 and 16): what no trace can hold is dropped and
counted, refused in one line, or ignored with a warning; never a traceback, never quadratic time."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import kernel, runtime, step, write_trace

from htatui.cli.main import main
from htatui.trace.columns import decode_frame
from htatui.trace.loader import parse_file

EPOCH_US = 1_700_000_000_000_000
"""Where a trace that writes µs since the epoch starts (2023)."""


@pytest.fixture(autouse=True)
def one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process CLI calls parse here instead of spawning workers (fast, and tracebacks surface)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def good(at: int = 0) -> list[dict[str, Any]]:
    """A step, a launch and its 30 µs kernel, from `at` on."""
    return [step(1, at, 100), runtime("cudaLaunchKernel", at + 10, 5, corr=1), kernel("gemm", at + 20, 30, corr=1)]


# ---------------------------------------------------------------- 6. times no trace can have


@pytest.mark.parametrize("wrong_ts", [0, -1])
def test_a_kernel_at_ts_0_in_an_epoch_trace_is_dropped_not_a_53_year_span(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wrong_ts: int
) -> None:
    path = write_trace(tmp_path / "rank-0.json", [*good(EPOCH_US), kernel("zero", wrong_ts, 4, corr=2)])
    code, out, err = cli(capsys, "report", path, "--view", "temporal", "--format", "json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["span_us"] == 30 and row["idle_pct"] == 0  # was 1.7e15 µs, 99.9999999 % idle
    (warning,) = [line for line in err.splitlines() if "impossible times" in line]
    assert "1 event(s)" in warning and "1 more than a week from the trace's median time" in warning


def test_relative_timestamps_near_0_are_kept(tmp_path: Path) -> None:
    # Kineto's relative timestamps (baseTimeNanoseconds set) start near 0: ts 0 is no outlier there.
    path = write_trace(tmp_path / "rank-0.json", [*good(5), kernel("first", 0, 4, corr=2)], base_ns=EPOCH_US * 1000)
    parsed = parse_file(path)
    assert parsed.events.height == 4 and parsed.warnings == []


def test_the_1e17_limit_is_kept_on_the_integer_as_written(tmp_path: Path) -> None:
    # float(10**17 + 1) == 1e17: deciding on the float let it through. 10**17 itself is at the limit, kept.
    limit = 10**17
    near = [*good(limit - 1000), kernel("at", limit, 4, corr=2), kernel("past", limit + 1, 4, corr=3)]
    parsed = parse_file(write_trace(tmp_path / "rank-0.json", near))
    assert "past" not in parsed.events["name"].cast(str).to_list()
    assert "at" in parsed.events["name"].cast(str).to_list()
    (warning,) = parsed.warnings
    assert warning.startswith("1 event(s) with impossible times dropped")
    assert "1 with a ts that is not finite" in warning


# ---------------------------------------------------------------- 7. malformed events counted


def _malformed() -> list[dict[str, Any]]:
    return [
        {"ph": "X", "cat": "kernel", "name": "no ts", "pid": 0, "tid": 7, "dur": 3},
        {"ph": "X", "cat": "kernel", "name": "no dur", "pid": 0, "tid": 7, "ts": 40},
        {"cat": "kernel", "name": "no ph", "pid": 0, "tid": 7, "ts": 40, "dur": 3},
    ]


def _with_401_digit_ts(path: Path) -> Path:
    text = path.read_text().replace('"ts": 77777', '"ts": ' + "1" * 401)
    path.write_text(text)
    return path


def test_events_without_ts_dur_or_ph_or_with_a_401_digit_ts_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big_ts = {"ph": "X", "cat": "kernel", "name": "huge ts", "pid": 0, "tid": 7, "ts": 77777, "dur": 3}
    path = _with_401_digit_ts(write_trace(tmp_path / "rank-0.json", [*good(), *_malformed(), big_ts]))
    code, out, err = cli(capsys, "report", path, "--view", "temporal", "--format", "json")
    assert code == 0, err
    assert "htatui: warning: " in err and "4 malformed events skipped" in err
    parsed = parse_file(path)
    assert parsed.events.height == 3 and parsed.warnings == ["4 malformed events skipped"]
    # Instant, flow and metadata events need no dur; they are kept.
    instant = {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 100, "tid": 1, "ts": 50, "s": "t"}
    assert parse_file(write_trace(tmp_path / "ok" / "rank-0.json", [*good(), instant])).warnings == []


def test_malformed_events_join_the_whole_document_decoders_count() -> None:
    # `"ts": "late"` sends the document to the whole-document decoder, which skips that event itself.
    events = [*good(), *_malformed(), {"ph": "X", "cat": "cpu_op", "ts": "late"}]
    warnings: list[str] = []
    frame, _ = decode_frame(json.dumps({"traceEvents": events}).encode(), warnings)
    assert frame.height == 3 and warnings[1:] == ["4 malformed events skipped"]
    assert warnings[0].startswith("unexpected value types")


def test_malformed_events_are_counted_in_pieces_alike() -> None:
    events = [*good(), *_malformed()] * 50
    for chunk_bytes in (256, 1 << 20):
        warnings: list[str] = []
        frame, _ = decode_frame(json.dumps({"traceEvents": events}).encode(), warnings, chunk_bytes=chunk_bytes)
        assert frame.height == 150 and warnings == ["150 malformed events skipped"], chunk_bytes


# ---------------------------------------------------------------- 10. the gzip path is linear


def test_megabytes_of_whitespace_are_read_in_linear_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 128 MiB of spaces in the events array took 81 s gzipped, 64 MiB ~20 s: each 256 KB block of
    # gunzip output was joined to a copy of all the unconsumed bytes held before it. Now ~1 s.
    path = tmp_path / "spaces.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents":[' + b" " * (64 << 20) + b"]}", 1))
    start = time.monotonic()
    code, _, err = cli(capsys, "info", "--no-cache", path)
    assert time.monotonic() - start < 10
    assert code == 2 and err.strip() == f"htatui: {path}: trace has no events"


# ---------------------------------------------------------------- 16. header integers past 64 bits


@pytest.mark.parametrize("command", ["info", "report", "check"])
@pytest.mark.parametrize("where", ["distributedInfo", "deviceProperties"])
def test_a_400_digit_header_integer_is_ignored_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, where: str
) -> None:
    path = write_trace(tmp_path / "rank-0.json", good(), rank=0)
    doc = json.loads(path.read_text())
    if where == "distributedInfo":
        doc["distributedInfo"]["world_size"] = 77777
        named = "distributedInfo.world_size"
    else:
        doc["deviceProperties"][0]["totalGlobalMem"] = 77777
        named = "deviceProperties[0].totalGlobalMem"
    path.write_text(json.dumps(doc).replace("77777", "9" * 400))
    # JSON: a table at 80 columns would wrap or shorten the warning.
    args = ["--view", "temporal"] if command == "report" else ["--format", "json"]
    code, out, err = cli(capsys, command, "--no-cache", path, *args)
    assert code in ((0, 1) if command == "check" else (0,)), err
    assert "Traceback" not in err and "OverflowError" not in out + err
    warning = f"1 header integer(s) wider than 64 bits ignored ({named})"
    assert warning in (err if command == "report" else out)


@pytest.mark.parametrize("field", ["pid", "tid"])
def test_a_pid_or_tid_wider_than_64_bits_is_its_text(tmp_path: Path, field: str) -> None:
    # Was an OverflowError traceback: the integer labels were made an Int64 column first.
    wide = {"ph": "X", "cat": "cpu_op", "name": "wide", "pid": 100, "tid": 1, "ts": 30, "dur": 2}
    path = write_trace(tmp_path / "rank-0.json", [*good(), dict(wide, **{field: 77777})])
    path.write_text(path.read_text().replace("77777", "9" * 400))
    events = parse_file(path).events
    assert events.filter(pl.col("name") == "wide")[field].cast(str).to_list() == ["9" * 400]


def test_a_wide_rank_is_ignored_and_the_rank_comes_from_the_name(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "rank-3.json", good(), rank=0)
    path.write_text(path.read_text().replace('"rank": 0', '"rank": ' + "9" * 400))
    parsed = parse_file(path)
    assert parsed.meta.claimed_rank is None
    assert parsed.warnings == ["1 header integer(s) wider than 64 bits ignored (distributedInfo.rank)"]
