"""`htatui info --timings`: where each file's load went, phase by phase (trace/timings.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kineto_util import kernel, runtime, step, write_trace

from htatui.cli.main import main

PHASE_COLUMNS = ["gunzip_s", "decode_s", "framing_s", "checks_s", "summary_s", "cache_write_s"]


@pytest.fixture(autouse=True)
def one_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    monkeypatch.setenv("HTATUI_CACHE_DIR", str(tmp_path / "cache"))


def timings(capsys: pytest.CaptureFixture[str], *args: str | Path) -> list[dict[str, object]]:
    assert main(["info", "--timings", "--format", "json", *map(str, args)]) == 0
    out = capsys.readouterr().out
    # Two JSON documents: the info table, then the timings.
    decoder = json.JSONDecoder()
    info, end = decoder.raw_decode(out)
    rows, _ = decoder.raw_decode(out[end:].lstrip())
    assert [row["file"] for row in info] == [row["file"] for row in rows]
    return list(rows)


def test_each_phase_of_a_parse_is_timed_and_a_cached_read_has_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)]
    path = write_trace(tmp_path / "rank-0.json.gz", events * 200)
    (row,) = timings(capsys, path)
    assert list(row) == ["rank", "file", *PHASE_COLUMNS, "wall_s"]
    phases = [row[column] for column in PHASE_COLUMNS]
    # gzip, decoded, framed, checked, cached; a lone file's frame is kept whole: no summary row
    assert row["summary_s"] == 0.0
    assert all(
        isinstance(s, float) and s > 0 for c, s in zip(PHASE_COLUMNS, phases, strict=True) if c != "summary_s"
    ), row
    seconds = [s for s in phases if isinstance(s, float)]
    wall = row["wall_s"]
    # One process, one thread: the phases happen one after another within the parse.
    assert isinstance(wall, float) and sum(seconds) <= wall
    (cached,) = timings(capsys, path)
    assert [cached[column] for column in [*PHASE_COLUMNS, "wall_s"]] == [None] * 7


def test_a_plain_file_parsed_without_the_cache_has_no_gunzip_or_cache_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_trace(tmp_path / "rank-0.json", [step(1, 0, 100)])
    (row,) = timings(capsys, "--no-cache", path)
    assert row["gunzip_s"] == 0 and row["decode_s"] > 0 and row["framing_s"] > 0  # type: ignore[operator]


def test_the_ranks_of_a_folder_are_timed_making_their_summary_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)]
    for rank in range(2):
        write_trace(tmp_path / "job" / f"rank-{rank}.json", events * 50, rank=rank)
    rows = timings(capsys, tmp_path / "job")
    assert [row["rank"] for row in rows] == [0, 1]
    assert all(isinstance(row["summary_s"], float) and row["summary_s"] > 0 for row in rows), rows
