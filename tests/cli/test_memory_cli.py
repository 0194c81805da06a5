"""`htatui memory`: JSON per device, tables, comparisons, frames on demand, and bad input."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from memory_util import MODEL, MODEL_SITE, entry, snapshot_a, write_pickle

from htatui.cli.main import main


def test_json_has_one_object_per_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pickle(tmp_path / "a.pickle", snapshot_a())
    assert main(["memory", str(path), "--format", "json", "--top", "2"]) == 0
    (device,) = json.loads(capsys.readouterr().out)
    assert device["device"] == "cuda:0"
    assert (device["peak_bytes"], device["peak_time_us"], device["end_bytes"], device["reserved_peak_bytes"]) == (
        3628,
        15.0,
        3372,
        5120,
    )
    assert [(s["site"], s["bytes"], s["count"]) for s in device["sites"]] == [
        (MODEL_SITE, 2048, 1),
        ("compute_loss (/home/me/loss.py:5)", 1024, 1),
    ]
    assert device["ooms"][0]["requested_bytes"] == 8192
    assert device["allocator"][0]["largest_free_bytes"] == 724


def test_csv_sites_and_table_sections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pickle(tmp_path / "a.pickle", snapshot_a())
    assert main(["memory", str(path), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "device,site,bytes,count,share_pct"
    assert lines[1].startswith(f"cuda:0,{MODEL_SITE},2048,1,")
    assert main(["memory", str(path)]) == 0
    out = capsys.readouterr().out
    for heading in ("Memory per device", "live at the peak, by site", "OUT OF MEMORY", "Allocator state"):
        assert heading in out


def test_site_frames_on_demand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_pickle(tmp_path / "a.pickle", snapshot_a())
    assert main(["memory", str(path), "--site", "model.py"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == MODEL_SITE
    assert out[-1].strip() == "forward /home/me/model.py:10"


def test_compare_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    after = copy.deepcopy(snapshot_a())
    after["device_traces"][0].append(entry("alloc", 20000, 4096, 30, MODEL))
    a = write_pickle(tmp_path / "a.pickle", snapshot_a())
    b = write_pickle(tmp_path / "b.pickle", after)
    assert main(["memory", str(a), str(b), "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    first = payload["sites"][0]
    assert (first["site"], first["delta_bytes"], first["status"]) == (MODEL_SITE, 4096, "grew")


class _Command:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("case", ["other", "truncated", "global", "empty"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    path = tmp_path / f"{case}.pickle"
    marker = tmp_path / "ran"
    if case == "other":
        write_pickle(path, {"weights": [1, 2]})
    elif case == "truncated":
        path.write_bytes(pickle.dumps(snapshot_a(), protocol=4)[:200])
    elif case == "global":
        write_pickle(path, {"segments": [_Command(marker)]})
    else:
        write_pickle(path, {"segments": [], "device_traces": [[]]})
    run = subprocess.run(
        [sys.executable, "-m", "htatui", "memory", str(path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in run.stderr
    assert not marker.exists()


def _with_oom(asked: int, device_free: int) -> dict[str, object]:
    snapshot = snapshot_a()
    trace = snapshot["device_traces"][0]
    trace[-1] = entry("oom", 0, asked, 17, MODEL, device_free=device_free)
    return snapshot


@pytest.mark.parametrize(
    ("asked", "free", "why"),
    [
        # 5,120 B reserved, 3,372 live: 1,748 cached + 100 free < 8,192 asked.
        (8192, 100, "the device was full; this process held 5.00 KiB, the rest by other processes"),
        # 1,748 cached + 100 free ≥ 1,500 asked, but the largest free block is 724 B.
        (
            1500,
            100,
            "fragmentation: 1.71 KiB cached free in this process's segments, but no free block big enough "
            "(largest at the snapshot 724 B)",
        ),
        (8192, 10_000, "the device had 9.77 KiB free, more than asked: a cap stopped the allocator"),
    ],
)
def test_oom_line_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str], asked: int, free: int, why: str) -> None:
    path = write_pickle(tmp_path / "oom.pickle", _with_oom(asked, free))
    assert main(["memory", str(path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "OUT OF MEMORY at 0.007 ms" in text  # the first event at 10 µs, the OOM at 17 µs
    assert why in text
    assert main(["memory", str(path), "--format", "json"]) == 0
    (device,) = json.loads(capsys.readouterr().out)
    assert why in device["ooms"][0]["why"]


def test_tables_read_in_gib_and_ms_while_json_keeps_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import polars as pl

    from htatui.cli.memory import readable

    frame = pl.DataFrame({"peak_bytes": [3 * 2**30], "end_bytes": [512 * 2**20], "peak_time_us": [1_000_010.0]})
    shown = readable(frame, 10.0).to_dicts()[0]
    assert shown == {"peak_gib": 3.0, "end_mib": 512.0, "peak_time_ms": 1000.0}
    path = write_pickle(tmp_path / "a.pickle", snapshot_a())
    assert main(["memory", str(path), "--format", "json"]) == 0
    (device,) = json.loads(capsys.readouterr().out)
    # Requested sizes (peak 3,628 B, end 3,372 B) and the allocator's 512-B rounding: the pre-existing
    # 300-B and 256-B blocks count 512 each, so 1,024 at the start, 4,096 at the peak, 3,584 at the end.
    assert (device["peak_bytes"], device["allocator_peak_bytes"]) == (3628, 4096)
    assert (device["end_bytes"], device["allocator_end_bytes"]) == (3372, 3584)


def test_mlp_snapshot_allocator_end_matches_its_segments(shared_traces: Path) -> None:
    """The oracle: segments' allocated_size 2,485,587,456 B is what memory_allocated() reported."""
    from htatui.analysis.memory.usage import allocator_allocated, analyse
    from htatui.trace.memory_inputs import read_memory

    analysis = analyse(read_memory(shared_traces.parent / "memory" / "h100_mlp_memory_snapshot" / "snapshot.pickle"))
    row = allocator_allocated(analysis).to_dicts()[0]
    assert row["allocator_end_bytes"] == 2_485_587_456
    assert analysis.summary["end_bytes"][0] == 2_417_426_568 + 68_157_440  # requested sizes, 3,448 B less


def _memory_job(folder: Path, ranks: tuple[int, ...] = (0,)) -> Path:
    from kineto_util import write_trace
    from memory_util import memory_trace_events

    for rank in ranks:
        write_trace(folder / f"rank-{rank}.pt.trace.json", memory_trace_events(), rank=rank)
    return folder


def test_the_scopes_steps_choose_a_jobs_memory_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """memory_trace_events: ProfilerStep#1 [0,100) holds the events at 5, 20, 60, 70 µs; #2 the
    ones at 110 and 120. By default the last step is left out; `--steps all` counts it."""
    job = _memory_job(tmp_path / "job")

    def summary(*flags: str) -> dict[str, object]:
        assert main(["report", str(job), "--view", "memory", "--format", "json", "--no-cache", *flags]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        return dict(row)

    default, whole, second = summary(), summary("--steps", "all"), summary("--steps", "2")
    assert (default["events"], default["peak_bytes"], default["end_bytes"]) == (4, 1400, 1150)
    assert (whole["events"], whole["peak_bytes"], whole["end_bytes"]) == (6, 1400, 1060)
    # Step 2 alone: 1,150 B live on entry (before recording, for this window), 1,160 at its peak.
    assert (second["events"], second["start_bytes"], second["peak_bytes"]) == (2, 1160, 1160)
    assert main(["memory", str(job), "--steps", "all", "--format", "json"]) == 0
    (device,) = json.loads(capsys.readouterr().out)
    assert (device["events"], device["end_bytes"]) == (6, 1060)
    # The memory command prints report's table for a job.
    assert main(["memory", str(job), "--table", "summary", "--format", "csv"]) == 0
    memory_csv = capsys.readouterr().out
    assert main(["report", str(job), "--view", "memory", "--format", "csv"]) == 0
    assert capsys.readouterr().out == memory_csv


def test_a_jobs_memory_names_each_ranks_device_and_obeys_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _memory_job(tmp_path / "job", (0, 1))
    assert main(["report", str(job), "--view", "memory", "--sites", "--format", "json", "--top", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["device"], r["site"], r["bytes"]) for r in rows] == [
        ("rank 0 cuda:0", "(allocated before recording)", 1000),
        ("rank 1 cuda:0", "(allocated before recording)", 1000),
    ]
    assert main(["report", str(job), "--view", "memory", "--ranks", "1", "--device", "cuda:7"]) == 2
    assert "no device 'cuda:7'" in capsys.readouterr().err


def test_a_job_without_memory_events_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    demo = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
    assert main(["memory", str(demo), "--no-cache"]) == 2
    assert "no [memory] events in the chosen steps" in capsys.readouterr().err
