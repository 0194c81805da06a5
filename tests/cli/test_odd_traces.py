"""Odd but valid traces give the right numbers or say why not (issue 22): a rank without
ProfilerStep is left out of the cross-rank views (not counted whole against the others' steps),
a rank whose clock is an hour off is realigned at the collectives, temporal names the ranks it has
no row for, and kernels overlapping on a stream are named at load by every face.

The jobs are ranks_jobs.nccl_rank: 3 ranks, 3 steps of 1,000 µs; per step a gemm of 200 µs
(500 on rank 1) then an all_reduce kernel until B+700. Steps 1-2 are analysed (the last is left
out), so each rank makes 2 matched calls; ranks 0 and 2 wait 300 µs for rank 1 in each.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from kineto_util import kernel, runtime, step, write_trace
from ranks_jobs import nccl_rank

from htatui.analysis.health import load_notes
from htatui.cli.main import main
from htatui.jobs.load import load_traces

HOUR_US = 3600 * 1e6


def report(capsys: pytest.CaptureFixture[str], folder: Path, view: str) -> tuple[list[dict[str, str]], list[str]]:
    code = main(["report", str(folder), "--view", view, "--format", "csv", "--no-cache"])
    out = capsys.readouterr()
    assert code == 0 and "Traceback" not in out.err
    return list(csv.DictReader(io.StringIO(out.out))), out.err.strip().splitlines()


def job(folder: Path, change: dict[int, object] | None = None) -> Path:
    for rank in range(3):
        events = nccl_rank(rank)
        edit = (change or {}).get(rank)
        if callable(edit):
            events = edit(events)
        write_trace(folder / f"rank-{rank}.json", events, rank=rank, base_ns=1_700_000_000_000_000_000)
    return folder


def without_steps(events: list[dict[str, object]]) -> list[dict[str, object]]:
    return [e for e in events if not str(e["name"]).startswith("ProfilerStep")]


def test_a_rank_without_steps_is_left_out_of_collectives_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 1 lost its ProfilerStep events. Before: its 3 calls (the last step's too) were counted
    with the others' 2 each (calls 3, total 1,900 µs, skew 0). Now ranks 0 and 2 only: 2 calls,
    each 400 µs on both ranks (1,600 µs in all), 2 ranks × 2 calls × 4 MB = 16,000,000 bytes."""
    rows, err = report(capsys, job(tmp_path / "job", {1: without_steps}), "collectives")
    assert [(r["ranks"], r["calls"], r["total_dur_us"], r["total_bytes"]) for r in rows] == [
        ("2", "2", "1600.0", "16000000.0")
    ]
    assert (
        "htatui: rank 1 left out: no ProfilerStep in the chosen steps while the other ranks have them; meeting points: "
        in "\n".join(err)
    )
    rows, err = report(capsys, tmp_path / "job", "rank-steps")
    assert sorted({r["rank"] for r in rows}) == ["0", "2"]
    assert "htatui: rank 1 left out: no ProfilerStep in the chosen steps while the other ranks have them" in err


def test_a_rank_whose_clock_is_an_hour_off_is_realigned_at_the_collectives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 2's timestamps are an hour later. Before: ranks 0 and 1 waited 3,600,000,000 µs inside
    1,000 µs steps and rank 2 was the straggler. Now the clean job's numbers: ranks 0 and 2 wait
    300 µs per step for rank 1, which is the straggler (2 steps × 300 µs median exposed wait)."""
    clean, _ = report(capsys, job(tmp_path / "clean"), "rank-steps")
    skewed = job(tmp_path / "skew", {2: lambda ev: [{**e, "ts": e["ts"] + HOUR_US} for e in ev]})
    rows, err = report(capsys, skewed, "rank-steps")
    assert rows == clean
    assert [(r["rank"], r["wait_us"]) for r in rows if r["step"] == "1"] == [
        ("0", "300.0"),
        ("1", "0.0"),
        ("2", "300.0"),
    ]
    note = "rank 2's clock is +3,600,000,000 µs off the others' at the collectives: realigned for these waits"
    assert any(line.startswith(f"htatui: {note}") for line in err)
    rows, _ = report(capsys, skewed, "stragglers")
    assert [(r["rank"], r["is_straggler"], r["delay_us"]) for r in rows if r["is_straggler"] == "true"] == [
        ("1", "true", "600.0")
    ]
    rows, _ = report(capsys, skewed, "collectives")
    assert [(r["skew_max_us"], r["calls"]) for r in rows] == [("300.0", "2")]


def test_temporal_names_the_ranks_it_has_no_row_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def cpu_only(events: list[dict[str, object]]) -> list[dict[str, object]]:
        return [e for e in events if e["cat"] != "kernel"]

    rows, err = report(capsys, job(tmp_path / "one", {2: cpu_only}), "temporal")
    assert [r["rank"] for r in rows] == ["0", "1"]
    assert "htatui: rank 2 left out: no GPU kernels, copies or memsets in the chosen steps" in err
    rows, err = report(capsys, job(tmp_path / "none", dict.fromkeys(range(3), cpu_only)), "temporal")
    assert rows == []
    assert "htatui: no GPU kernels, copies or memsets in the chosen steps" in err
    # The table format says "no rows" and why in the table's place.
    assert main(["report", str(tmp_path / "none"), "--view", "temporal", "--no-cache"]) == 0
    out = capsys.readouterr()
    assert " ".join(out.out.split()).endswith(": no rows (no GPU kernels, copies or memsets in the chosen steps)")


def test_overlapping_kernels_are_named_at_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stream 7: [0, 100) then [30, 130): kernel sums count 70 µs twice. report's preamble and the
    app's notes name it (before: only `htatui check`)."""
    events = [step(1, 0, 500), kernel("a", 0, 100, corr=1), kernel("b", 30, 100, corr=2), kernel("c", 200, 50, corr=3)]
    events += [runtime("cudaLaunchKernel", 0, 1, n) for n in (1, 2, 3)]
    write_trace(tmp_path / "job" / "rank-0.json", events, rank=0)
    line = (
        "rank 0 (rank-0.json): 1 kernel(s) start more than 20 µs (and half their length) before the kernel "
        "before them on stream 7 ends (70 µs in all): a merged or broken trace; busy and compute times count "
        "them once, kernel sums twice"
    )
    _, err = report(capsys, tmp_path / "job", "kernels")
    assert f"htatui: warning: {line}" in err
    assert line in load_notes(load_traces([tmp_path / "job"], use_cache=False, max_workers=1))


def test_every_per_rank_gpu_table_names_the_ranks_it_has_no_row_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rank 2 recorded only its CPU side (no kernels) and rank 1 lost its ProfilerStep events.
    Each table that can have no row for a chosen rank says which and why (before: only temporal),
    in `report` and on the app's pages; a table with rows for every rank says nothing."""
    from htatui.analysis import registry as views
    from htatui.analysis.registry import (
        NO_COPIES,
        NO_GPU_WORK,
        NO_IDLE_GAP,
        NO_MATCHED_LAUNCH,
        NO_STEPS,
        VIEWS,
        PageTable,
        frame_of,
        make_page_tables,
        make_table,
    )

    def cpu_only(events: list[dict[str, object]]) -> list[dict[str, object]]:
        return [e for e in events if e["cat"] != "kernel"]

    traces = load_traces([job(tmp_path / "job", {1: without_steps, 2: cpu_only})], use_cache=False, max_workers=1)
    expected = {
        ("idle", "main"): f"rank 2 left out: {NO_IDLE_GAP}",
        ("idle", "by-stream"): f"rank 2 left out: {NO_IDLE_GAP}",
        ("idle", "interval-stats"): f"rank 2 left out: {NO_IDLE_GAP}",
        ("kernel-types", "main"): f"rank 2 left out: {NO_GPU_WORK}",
        ("kernels", "main"): f"rank 2 left out: {NO_GPU_WORK}",
        ("kernel-spread", "main"): f"rank 2 left out: {NO_GPU_WORK}",
        ("overlap", "main"): f"rank 2 left out: {NO_GPU_WORK}",
        ("temporal", "main"): f"rank 2 left out: {NO_GPU_WORK}",
        ("launch", "main"): f"rank 2 left out: {NO_MATCHED_LAUNCH}",
        ("launch", "summary"): f"rank 2 left out: {NO_MATCHED_LAUNCH}",
        ("queue", "main"): f"rank 2 left out: {NO_MATCHED_LAUNCH}",
        ("queue", "overview"): f"rank 2 left out: {NO_MATCHED_LAUNCH}",
        ("queue", "series"): f"rank 2 left out: {NO_MATCHED_LAUNCH}",
        ("queue", "blocked"): f"rank 2 left out: {NO_MATCHED_LAUNCH}",
        ("membw", "main"): NO_COPIES,  # no rank copies: the table is empty, and says why
        ("membw", "series"): NO_COPIES,
        ("steps", "main"): f"rank 1 left out: {NO_STEPS}",
    }
    for (view_id, table_name), sentence in expected.items():
        table = views.view(view_id).table(table_name)
        assert table.rankless is not None, (view_id, table_name)
        _, message = frame_of(make_table(table, traces, views.view(view_id).options()))
        assert message == sentence, (view_id, table_name)
    # The app's Counters page makes the same tables (its together path for datasets included).
    from htatui.analysis.registry import page

    pages = make_page_tables(traces, page("counters").tables, {v.id: v.options() for v in VIEWS})
    assert pages[PageTable("queue", "overview")].message == f"rank 2 left out: {NO_MATCHED_LAUNCH}"
    rows, err = report(capsys, tmp_path / "job", "launch")
    assert f"htatui: rank 2 left out: {NO_MATCHED_LAUNCH}" in err
    # All ranks present: no sentence.
    clean = load_traces([job(tmp_path / "ok")], use_cache=False, max_workers=1)
    assert frame_of(make_table(VIEWS[0].main, clean, VIEWS[0].options()))[1] is None


def test_a_job_written_twice_gives_the_stragglers_of_the_job_written_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every event of every rank written twice. Before (the issue's probe): kernel counts, sums and
    straggler delays doubled. Now one of each is kept, with a warning per file, and rank 1 is the
    straggler by 600 µs (2 steps × 300 µs) as in the job written once."""
    once = job(tmp_path / "once")
    twice = job(tmp_path / "twice", dict.fromkeys(range(3), lambda events: [*events, *events]))
    clean, _ = report(capsys, once, "stragglers")
    rows, err = report(capsys, twice, "stragglers")
    assert rows == clean
    assert [(r["rank"], r["delay_us"]) for r in rows if r["is_straggler"] == "true"] == [("1", "600.0")]
    assert sum("complete event(s) repeated exactly" in line for line in err) == 3
    assert report(capsys, twice, "kernels")[0] == report(capsys, once, "kernels")[0]
