"""`htatui timeline` and `htatui export slice`: text that fits, trimmed traces, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_util import cpu_op, kernel, runtime, step, write_trace

from htatui.cli.main import main


def job(folder: Path, ranks: int = 1) -> Path:
    for rank in range(ranks):
        events = [
            step(1, 0, 100),
            cpu_op("aten::mm", 10, 30),
            runtime("cudaLaunchKernel", 20, 5, 1),
            kernel("gemm", 30, 40, corr=1),
            {"ph": "i", "name": "mark", "pid": 100, "tid": 1, "ts": 90, "s": "t"},
            {"ph": "M", "name": "process_name", "pid": 100, "args": {"name": "python"}},
        ]
        write_trace(folder / f"rank-{rank}.json", events, rank=rank)
    return folder


def test_timeline_prints_labelled_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = job(tmp_path / "job")
    args = ["timeline", str(folder), "--no-cache", "--rank", "0", "--start", "0", "--end", "100", "--width", "19"]
    assert main(args) == 0
    rows, legend = capsys.readouterr().out.split("\n\n")
    lines = rows.splitlines()
    # label width 11 ("thread 1 +1") + 1 → 7 cells of 100/7 ≈ 14.29 µs: aten::mm (10-40) covers
    # 0.3 of cell 0, all of cell 1, 0.8 of cell 2; gemm (30-70) 0.9, 1, 0.9 of cells 2-4.
    assert lines[1:] == ["thread 1    AAAAAAA", "thread 1 +1 oOO    ", "stream 7    ..CCC.."]
    assert all(len(line) <= 19 for line in lines)
    # The legend names the marks drawn (A, O/o, C, the idle dot, lower case), no others.
    text = " ".join(legend.split())
    assert text.startswith("legend: C compute, O op, A annotation, lower case")
    assert ". stream idle" in text and "memcpy" not in text and "counter" not in text


def test_timeline_help_explains_the_marks() -> None:
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-m", "htatui", "timeline", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=root),
    )
    for mark in (
        "C     compute",
        "N     communication",
        "M     memcpy",
        "a-z   the same, under half",
        ".     stream idle",
    ):
        assert mark in done.stdout


def test_timeline_defaults_to_the_whole_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = job(tmp_path / "job")
    assert main(["timeline", str(folder), "--no-cache", "--width", "40", "--depth", "1", "--rows", "streams"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("0–100 µs") and lines[1].startswith("stream 7 ")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rank", "5"], "rank 5 is not in the traces"),
        (["--start", "10", "--end", "10"], "is empty"),
        (["--width", "5"], "too narrow"),
        (["--rows", "nope"], "--rows"),
    ],
)
def test_timeline_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    folder = job(tmp_path / "job")
    with pytest.raises(SystemExit) if extra[0] == "--rows" else _nothing():
        code = main(["timeline", str(folder), "--no-cache", *extra])
        assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


class _nothing:  # noqa: N801 - a stand-in for contextlib.nullcontext that mypy types simply
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_export_slice_keeps_the_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = job(tmp_path / "job")
    out = tmp_path / "slice.json"
    args = ["export", "slice", str(folder), "--no-cache", "--start", "35", "--end", "95", "-o", str(out)]
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == str(out)
    doc = json.loads(out.read_text())
    names = [e["name"] for e in doc["traceEvents"]]
    # ProfilerStep (0-100), aten::mm (10-40) and gemm (30-70) overlap [35, 95); the launch
    # (20-25) does not; the instant at 90 is inside; metadata is always kept.
    assert names == ["ProfilerStep#1", "aten::mm", "gemm", "mark", "process_name"]
    assert doc["distributedInfo"]["rank"] == 0
    # Never over an existing file without --force, never over an input.
    assert main(args) == 2
    assert "already exists (pass --force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    source = folder / "rank-0.json"
    before = source.read_bytes()
    code = main(
        ["export", "slice", str(folder), "--no-cache", "--start", "0", "--end", "9", "-o", str(source), "--force"]
    )
    assert code == 2 and "input traces" in capsys.readouterr().err
    assert source.read_bytes() == before


def test_export_slice_several_ranks_keeps_them_apart(tmp_path: Path) -> None:
    folder = job(tmp_path / "job", ranks=2)
    out = tmp_path / "both.json"
    assert main(["export", "slice", str(folder), "--no-cache", "--start", "0", "--end", "15", "-o", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert sorted({e["pid"] for e in events}) == ["rank 0 · 100", "rank 1 · 100"]
    assert [e["name"] for e in events if e["ph"] == "X"] == ["ProfilerStep#1", "aten::mm"] * 2


def test_export_slice_gzip_loads_back(tmp_path: Path) -> None:
    from htatui.jobs.load import load_traces

    folder = job(tmp_path / "job")
    out = tmp_path / "out" / "slice.json.gz"
    out.parent.mkdir()
    assert main(["export", "slice", str(folder), "--no-cache", "--start", "0", "--end", "28", "-o", str(out)]) == 0
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    events = load_traces([out], use_cache=False, max_workers=1).ranks[0].events
    # The step and aten::mm overlap [0, 28), and so does the launch (20-25); gemm starts at 30.
    assert sorted(events["name"].cast(str).to_list()) == ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel"]
    missing = tmp_path / "nowhere" / "slice.json"
    code = main(["export", "slice", str(folder), "--no-cache", "--start", "0", "--end", "28", "-o", str(missing)])
    assert code == 2


def test_timeline_stacks_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = job(tmp_path / "job", ranks=2)
    args = ["timeline", str(folder), "--no-cache", "--rank", "all", "--depth", "1", "--width", "22"]
    assert main([*args, "--start", "0", "--end", "100"]) == 0
    # 10 cells of 10 µs: the step everywhere, gemm (30-70) in cells 3-6, on both ranks.
    assert capsys.readouterr().out.split("\n\n")[0].splitlines()[1:] == [
        "r0 thread 1 AAAAAAAAAA",
        "r0 stream 7 ...CCCC...",
        "r1 thread 1 AAAAAAAAAA",
        "r1 stream 7 ...CCCC...",
    ]
