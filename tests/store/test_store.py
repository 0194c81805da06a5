"""`htatui ingest` writes a job dataset; every command reads it with the numbers of the traces."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import polars as pl
import pytest
from dataset_util import tiny_job
from kineto_util import kernel, write_trace

from htatui.analysis.core.rules import Rules
from htatui.analysis.core.scope import Scope, Steps
from htatui.cli.main import main
from htatui.jobs.ingest import RAY_DID_NOT_START, ingest
from htatui.jobs.load import load_traces
from htatui.store.dataset import DatasetError, open_dataset


def test_a_dataset_loads_as_the_traces_do(tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    report = ingest([job], tmp_path / "ds", max_workers=1)
    assert report.ranks == 2 and report.problems == []
    direct = load_traces([job], use_cache=False, max_workers=1)
    stored = load_traces([tmp_path / "ds"])
    assert stored.rank_ids == direct.rank_ids == [0, 1]
    for rank in direct.rank_ids:
        assert stored.ranks[rank].events.equals(direct.ranks[rank].events)
        assert stored.ranks[rank].meta == direct.ranks[rank].meta
        assert stored.ranks[rank].shift_us == direct.ranks[rank].shift_us == rank * 1000.0
        assert stored.ranks[rank].path == direct.ranks[rank].path


def test_the_summary_table_by_hand(tmp_path: Path) -> None:
    ingest([tiny_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    summary = open_dataset(tmp_path / "ds").summary()
    rows = {r["rank"]: r for r in summary.iter_rows(named=True)}
    assert sorted(rows) == [0, 1]
    # 6 events each; the last step (2) is dropped by default, so one step of 100 µs is used.
    assert rows[0]["events"] == 6 and rows[0]["kernels"] == 2 and rows[0]["span_us"] == 200.0
    assert rows[0]["steps"] == 1 and rows[0]["step_mean_us"] == 100.0
    # GPU activity of the used step: one 30 µs kernel, all compute, no idle within its span.
    assert rows[0]["gpu_span_us"] == 30.0 and rows[0]["compute_us"] == 30.0 and rows[0]["idle_us"] == 0.0


def test_every_command_gives_the_same_numbers_on_a_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tiny_job(tmp_path / "job")
    assert main(["ingest", str(job), "-o", str(tmp_path / "ds"), "--workers", "1"]) == 0
    capsys.readouterr()
    for command in (["info"], ["report", "--view", "temporal"], ["report", "--view", "kernels"]):
        outputs = []
        for source in (job, tmp_path / "ds"):
            assert main([*command, str(source), "--format", "json", "--no-cache"]) == 0
            outputs.append(json.loads(capsys.readouterr().out))
        assert outputs[0] == outputs[1], command


def test_an_existing_target_is_kept_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tiny_job(tmp_path / "job")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep")
    assert main(["ingest", str(job), "-o", str(tmp_path / "taken")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["ingest", str(job), "-o", str(tmp_path / "taken"), "--force"]) == 2
    assert (tmp_path / "taken" / "mine.txt").read_text() == "keep"  # not a dataset: never replaced
    assert main(["ingest", str(job), "-o", str(tmp_path / "ds"), "--workers", "1"]) == 0
    assert main(["ingest", str(job), "-o", str(tmp_path / "ds"), "--workers", "1", "--force"]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left behind


def test_a_bad_file_is_listed_and_the_rest_ingested(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tiny_job(tmp_path / "job")
    (job / "rank-2.json").write_text("{not json")
    assert main(["ingest", str(job), "-o", str(tmp_path / "ds"), "--workers", "2"]) == 0
    assert "rank-2.json" in capsys.readouterr().err
    stored = load_traces([tmp_path / "ds"])
    assert stored.rank_ids == [0, 1] and len(stored.problems) == 1


@pytest.mark.slow
def test_ray_engine_writes_the_same_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    # A raylet that has not started in 20 s will not: skip then, not after the ingest's 120 s (a
    # loaded machine spent 159 s here before skipping).
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "20")
    monkeypatch.setenv("RAY_agent_register_timeout_ms", "20000")
    job = tiny_job(tmp_path / "job")
    ingest([job], tmp_path / "local", engine="local", max_workers=2)
    before = _children()
    try:
        # One Ray worker: Ray starts a worker process per CPU it is given, each importing htatui.
        ingest([job], tmp_path / "ray", engine="ray", max_workers=1)
    except DatasetError as exc:
        # Ray gives its node 30 s to register, hard-coded; a machine shared by many jobs can miss that.
        if RAY_DID_NOT_START in str(exc):
            # Ray's node raises in its constructor, so ray.shutdown() cannot stop what it started: its
            # GCS, dashboard and monitors would poll on until this worker exits (~20 CPU-s in 10 min).
            left = _children() - before
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for pid in left:
                with contextlib.suppress(ChildProcessError):  # reaped already by Ray's own Popen
                    os.waitpid(pid, 0)
            pytest.skip(f"local Ray could not start on this (overloaded?) machine: {exc}")
        raise
    local, ray = open_dataset(tmp_path / "local"), open_dataset(tmp_path / "ray")
    assert local.summary().equals(ray.summary())
    assert [(r.source, r.meta, r.warnings) for r in local.ranks] == [(r.source, r.meta, r.warnings) for r in ray.ranks]
    for a, b in zip(local.ranks, ray.ranks, strict=True):
        assert a.events().equals(b.events())
    assert pl.read_ipc(tmp_path / "ray" / "summary.arrow").height == 2


def _children() -> set[int]:
    """This process's child processes (Linux: /proc/self/task/*/children; empty elsewhere)."""
    pids: set[int] = set()
    tasks = Path("/proc/self/task")
    for task in tasks.iterdir() if tasks.is_dir() else ():
        try:
            pids.update(int(pid) for pid in (task / "children").read_text().split())
        except OSError:
            continue
    return pids


def test_opening_a_dataset_reads_no_rank_and_the_summary_answers(tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    ingest([job], tmp_path / "ds", max_workers=1)
    stored = load_traces([tmp_path / "ds"])
    assert stored.summary is not None and not any(r.loaded for r in stored.ranks.values())
    from htatui.analysis.views import overlap, temporal
    from htatui.cli.info import info_frame

    answers = [temporal.compute(stored, temporal.TemporalOptions()), overlap.compute(stored, overlap.OverlapOptions())]
    info = info_frame(stored)
    assert not any(r.loaded for r in stored.ranks.values())  # all three came from the summary
    # By hand: the used step (1) holds one 30 µs kernel on each rank, all compute; no communication.
    assert answers[0].select("rank", "span_us", "compute_us", "idle_us").rows() == [
        (0, 30.0, 30.0, 0.0),
        (1, 30.0, 30.0, 0.0),
    ]
    assert answers[1]["overlap_pct"].to_list() == [None, None]
    assert info["events"].to_list() == [6, 6] and info["steps"].to_list() == ["1-2", "1-2"]
    direct = load_traces([job], use_cache=False, max_workers=1)
    assert answers[0].equals(temporal.compute(direct, temporal.TemporalOptions()))
    assert answers[1].equals(overlap.compute(direct, overlap.OverlapOptions()))
    assert info.equals(info_frame(direct))
    assert stored.ranks[1].events.equals(direct.ranks[1].events) and stored.ranks[1].loaded


def test_the_summary_is_not_used_where_it_does_not_hold(tmp_path: Path) -> None:
    from htatui.analysis.views import temporal

    ingest([tiny_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    # Other options: computed from the events.
    stored = load_traces([tmp_path / "ds"])
    temporal.compute(stored, temporal.TemporalOptions(scope=Scope(steps=Steps("all"))))
    assert all(r.loaded for r in stored.ranks.values())
    # With another job beside it the time origin moves, so the stored figures do not hold.
    other = tmp_path / "other"
    other.mkdir()
    write_trace(other / "rank-5.json", [kernel("gemm", 0, 10, corr=1)], rank=5, base_ns=1_600_000_000_000_000_000)
    assert load_traces([tmp_path / "ds", other]).summary is None
    # Other communication rules type kernels differently: computed from the events.
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nlibrary = "mine"\npattern = "^gemm$"\n')
    stored = load_traces([tmp_path / "ds"])
    breakdown = temporal.compute(stored, temporal.TemporalOptions(Scope(rules=Rules(comm_files=(str(rules),)))))
    assert all(r.loaded for r in stored.ranks.values())
    assert breakdown["compute_us"].to_list() == [0.0, 0.0] and breakdown["non_compute_us"].to_list() == [30.0, 30.0]


def test_a_damaged_rank_file_is_one_line_when_first_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bytes flipped in place (same size): the summary still answers; the first view that reads the
    rank fails in one line, by its checksum, before polars sees the bytes."""
    ingest([tiny_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    rank_file = tmp_path / "ds" / "ranks" / "00001.arrow"
    data = bytearray(rank_file.read_bytes())
    data[len(data) // 3] ^= 0xFF
    rank_file.write_bytes(bytes(data))
    assert main(["report", str(tmp_path / "ds"), "--view", "temporal"]) == 0  # from the summary
    capsys.readouterr()
    assert main(["report", str(tmp_path / "ds"), "--view", "kernels"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "00001.arrow: changed since it was ingested (size or checksum differs); ingest again" in err


def test_a_rank_file_of_another_size_is_skipped_at_open(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ingest([tiny_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    rank_file = tmp_path / "ds" / "ranks" / "00001.arrow"
    rank_file.write_bytes(rank_file.read_bytes() + b"x")
    assert main(["report", str(tmp_path / "ds"), "--view", "kernels", "--format", "csv"]) == 0
    err = capsys.readouterr().err
    assert "00001.arrow: not the file that was ingested (its type or size differs)" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "folder", ["df_index_resolver", "h100_ddp_gloo_2rank", "amd_trace", "mtia_trace_single_rank", "nccl_parser_config"]
)
def test_the_summary_needs_only_its_columns(folder: str, shared_traces: Path) -> None:
    """Ingest reads a rank back with SUMMARY_COLUMNS only; the row must equal the one from every column."""
    from htatui.jobs.summary import SUMMARY_COLUMNS, rank_summary
    from htatui.trace.loader import aligned_events, parse_file

    source = min(p for p in (shared_traces / folder).iterdir() if ".json" in p.name)
    parsed = parse_file(source)
    full = rank_summary(source, aligned_events(parsed.events, 3, 12.5), parsed.meta, 3, 12.5)
    narrow = parsed.events.select(SUMMARY_COLUMNS)
    assert rank_summary(source, aligned_events(narrow, 3, 12.5), parsed.meta, 3, 12.5) == full
    assert full["kernels"] > 0 or folder == "mtia_trace_single_rank"
