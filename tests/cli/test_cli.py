"""The headless CLI: info on every shared folder, bad input as one line and exit 2."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from cli_util import cli, run_cli
from kineto_util import kernel, runtime, step, write_trace

from htatui import __version__
from htatui.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def good_trace(path: Path, rank: int | None = None) -> Path:
    events = [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)]
    return write_trace(path, events, rank=rank)


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"htatui {__version__}"


def test_info_json_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good_trace(tmp_path / "rank-0.json.gz")
    assert main(["info", str(tmp_path), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "rank": 0,
            "file": "rank-0.json.gz",
            "rank_source": "filename",
            "device": "Test GPU",
            "events": 3,
            "kernels": 1,
            "streams": 1,
            "span_ms": 0.1,
            "steps": "1",
            "warnings": "",
        }
    ]


def test_info_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good_trace(tmp_path / "rank-0.json")
    assert main(["info", str(tmp_path / "rank-0.json"), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "rank,file,rank_source,device,events,kernels,streams,span_ms,steps,warnings"
    assert lines[1].startswith("0,rank-0.json,filename,Test GPU,3,1,1,0.1,1,")


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    (tmp / "empty").mkdir()
    (tmp / "notraces").mkdir()
    (tmp / "notraces" / "readme.txt").write_text("x")
    truncated = tmp / "truncated.json.gz"
    truncated.write_bytes(gzip.compress(json.dumps({"traceEvents": []}).encode() * 50)[:30])
    invalid = tmp / "invalid.json"
    invalid.write_text('{"traceEvents": [{"ph": "X",')
    not_trace = tmp / "config.json"
    not_trace.write_text('{"learning_rate": 0.1}')
    no_events = tmp / "noevents.json"
    no_events.write_text('{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]}')
    dup = tmp / "dup"
    good_trace(dup / "a.json", rank=1)
    good_trace(dup / "b.json", rank=1)
    return {
        "missing": (tmp / "nope", "no such file or folder"),
        "empty folder": (tmp / "empty", "folder is empty"),
        "no trace files": (tmp / "notraces", "no trace files"),
        "truncated gzip": (truncated, "corrupt or truncated gzip"),
        "invalid json": (invalid, "invalid JSON"),
        "not a chrome trace": (not_trace, "not a Chrome trace"),
        "no events": (no_events, "trace has no events"),
        "duplicate ranks": (dup, "both are rank 1"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "empty folder",
        "no trace files",
        "truncated gzip",
        "invalid json",
        "not a chrome trace",
        "no events",
        "duplicate ranks",
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    path, expected = _bad_inputs(tmp_path)[case]
    result = cli(capsys, "info", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0] and path.name in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = good_trace(tmp_path / "rank-0.json")
    path.chmod(0)
    result = cli(capsys, "info", str(path))
    assert result.returncode == 2 and "permission denied" in result.stderr


def test_unreadable_file_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from htatui.jobs.load import load_traces
    from htatui.trace import LoadError

    path = good_trace(tmp_path / "rank-0.json")

    def deny(_: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("htatui.trace.loader.open_trace", deny)
    with pytest.raises(LoadError, match=r"rank-0\.json: cannot be read \(permission denied\)"):
        load_traces([path], use_cache=False)


def test_one_bad_file_among_good_ones_loads_the_rest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good_trace(tmp_path / "rank-0.json")
    (tmp_path / "rank-1.json").write_text("{oops")
    result = cli(capsys, "info", str(tmp_path), "--format", "csv")
    assert result.returncode == 0
    assert "rank-1.json: invalid JSON" in result.stderr
    assert result.stdout.count("\n") == 2


def test_info_on_every_shared_folder(shared_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folders = sorted(p for p in shared_traces.iterdir() if p.is_dir() and p.name != "memory_timeline")
    result = cli(capsys, "info", *map(str, folders), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    rows = json.loads(result.stdout)
    jobs = {row["job"] for row in rows}
    # Folders of job folders (trace_diff, trace_compare, critical_path) expand to their jobs.
    assert {"control", "test", "base", "alexnet", "trace_filter", "amd_trace"} <= jobs
    by_job = {(row["job"], row["rank"]): row for row in rows}
    assert by_job[("trace_filter", 0)]["streams"] == 5
    assert by_job[("df_index_resolver", 1)]["kernels"] == 19_370


def test_export_counters_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in"
    good_trace(source / "rank-0.json.gz")
    out = tmp_path / "out"
    out.mkdir()
    first = cli(capsys, "export", "counters", str(source), "-o", str(out))
    assert first.returncode == 0, first.stderr
    written = out / "rank-0_with_counters.json.gz"
    assert first.stdout.strip() == str(written)
    events = json.loads(gzip.decompress(written.read_bytes()))["traceEvents"]
    queue = [e for e in events if e.get("name") == "Queue Length"]
    # One launch at 10 µs (+1) whose kernel starts at 20 µs (−1): two change points on stream 7.
    assert [(e["args"]["Queue Length"], e["id"]) for e in queue] == [(1, 7), (0, 7)]
    again = cli(capsys, "export", "counters", str(source), "-o", str(out))
    assert again.returncode == 2 and "already exists (pass --force to overwrite)" in again.stderr
    assert cli(capsys, "export", "counters", str(source), "-o", str(out), "--force").returncode == 0
    missing = cli(capsys, "export", "counters", str(source), "-o", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "nope" in missing.stderr and "Traceback" not in missing.stderr


def test_report_json_has_the_issue_columns(capsys: pytest.CaptureFixture[str]) -> None:
    demo = ROOT / "fixtures" / "demo"
    assert main(["report", str(demo), "--view", "overlap", "--format", "json", "--ranks", "0,2"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["rank"] for row in rows] == [0, 2] and set(rows[0]) == {"rank", "overlap_pct"}
    assert main(["report", str(demo), "--view", "temporal", "--ranks", "9"]) == 2
