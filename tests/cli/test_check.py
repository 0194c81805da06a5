"""Odd but valid traces are named, not counted quietly: the loader drops exact repeats, and
`htatui check` says what each rank can answer, what is odd, and which views will be empty.

Every trace is made here; each case checks the exit code, the one line that names the rank or
file, and that the numbers are right (the repeats are not counted twice).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kineto_util import cpu_op, kernel, runtime, step, write_trace
from ranks_jobs import gloo_rank, nccl_rank

from htatui.analysis.views import kernels
from htatui.cli.main import main
from htatui.jobs.load import load_traces
from htatui.trace.model import TraceSet

HOUR_US = 3600 * 1e6


def check(capsys: pytest.CaptureFixture[str], *paths: Path, quick: bool = False) -> tuple[int, dict[str, Any]]:
    args = ["check", *map(str, paths), "--format", "json", "--no-cache", *(["--quick"] if quick else [])]
    code = main(args)
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, json.loads(out.out) if out.out.strip() else {}


def kinds(report: dict[str, Any]) -> list[tuple[int | None, str]]:
    return [(f["rank"], f["kind"]) for f in report["findings"]]


def test_every_event_twice_is_counted_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace whose events were written twice: the 3 nccl steps × 2 kernels of rank 0, each twice.
    The loader keeps one of each (6 kernels, not 12) and says how many it dropped."""
    once = nccl_rank(0)
    write_trace(tmp_path / "once" / "rank-0.json", once, rank=0)
    write_trace(tmp_path / "twice" / "rank-0.json", [*once, *once], rank=0)
    single = load_traces([tmp_path / "once"], use_cache=False, max_workers=1)
    doubled = load_traces([tmp_path / "twice"], use_cache=False, max_workers=1)
    repeats = sum(1 for event in once if event["ph"] == "X")
    assert list(doubled.ranks[0].warnings) == [
        f"{repeats} complete event(s) repeated exactly (every field but the position) dropped"
    ]
    options = kernels.KernelsOptions()
    assert kernels.compute(doubled, options)["count"].to_list() == kernels.compute(single, options)["count"].to_list()
    code, report = check(capsys, tmp_path / "twice")
    assert code == 1 and kinds(report) == [(0, "load")]
    assert report["findings"][0]["file"] == "rank-0.json" and "repeated exactly" in report["findings"][0]["message"]
    assert check(capsys, tmp_path / "once")[0] == 0


def test_kernels_overlapping_on_a_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stream 7: [0, 100) then [30, 130): 70 µs (70 % of the kernel) before the first ends. A 5 µs
    overlap, as Hopper's dependent launch gives, is not odd."""
    events = [step(1, 0, 500), kernel("a", 0, 100, corr=1), kernel("b", 30, 100, corr=2), kernel("c", 200, 50, corr=3)]
    events += [runtime("cudaLaunchKernel", 0, 1, n) for n in (1, 2, 3)]
    write_trace(tmp_path / "bad" / "rank-0.json", events, rank=0)
    code, report = check(capsys, tmp_path / "bad")
    assert code == 1 and kinds(report) == [(0, "overlapping kernels")]
    assert report["findings"][0]["message"].startswith("1 kernel(s) start more than 20 µs")
    assert "on stream 7" in report["findings"][0]["message"] and "(70 µs in all)" in report["findings"][0]["message"]
    fine = [step(1, 0, 500), kernel("a", 0, 100, corr=1), kernel("b", 95, 100, corr=2)]
    write_trace(tmp_path / "fine" / "rank-0.json", fine, rank=0)
    assert check(capsys, tmp_path / "fine")[0] == 0
    # --quick reads no event twice: the overlap is not looked for.
    assert check(capsys, tmp_path / "bad", quick=True)[0] == 0


def test_a_rank_whose_clock_is_an_hour_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Four gloo ranks on one baseTimeNanoseconds; rank 3's timestamps are an hour later. Its
    gloo:all_reduce calls (one in each of its 3 steps) end 3,600,000,000 µs after the others'."""
    for rank in range(4):
        events = gloo_rank(rank)
        if rank == 3:
            events = [{**event, "ts": event["ts"] + HOUR_US} for event in events]
        write_trace(tmp_path / "job" / f"rank-{rank}.json", events, rank=rank, base_ns=1_700_000_000_000_000_000)
    code, report = check(capsys, tmp_path / "job")
    assert code == 1 and kinds(report) == [(None, "no GPU work"), (3, "clock")]  # gloo_rank has no GPU
    message = report["findings"][1]["message"]
    assert message.startswith("its 3 collective calls end +3,600,000,000 µs from the other ranks'")  # one per step
    assert "cannot be trusted" in message


def test_ranks_without_steps_or_gpu_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three NCCL ranks; rank 1 lost its ProfilerStep events, rank 2 recorded only its CPU side."""
    for rank in range(3):
        events = nccl_rank(rank)
        if rank == 1:
            events = [e for e in events if not str(e["name"]).startswith("ProfilerStep")]
        if rank == 2:
            events = [e for e in events if e["cat"] != "kernel"]
        write_trace(tmp_path / "job" / f"rank-{rank}.json", events, rank=rank)
    code, report = check(capsys, tmp_path / "job", quick=True)
    assert code == 1 and kinds(report) == [(1, "no steps"), (2, "no GPU work")]
    by_rank = {row["rank"]: row for row in report["ranks"]}
    assert (by_rank[0]["steps"], by_rank[1]["steps"], by_rank[2]["gpu_rows"]) == ("1-3", "", 0)
    assert by_rank[0]["comm_kernels"] == 3 and by_rank[0]["gpu_rows"] == 6


def test_a_job_without_gpu_work_says_which_views_are_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [step(1, 0, 100), step(2, 100, 100), cpu_op("aten::add", 10, 5), cpu_op("aten::add", 110, 5)]
    write_trace(tmp_path / "cpu" / "rank-0.json", events, rank=0)
    code, report = check(capsys, tmp_path / "cpu")
    assert code == 1 and kinds(report) == [(None, "no GPU work")]
    assert "temporal, idle, kernels, overlap, launch, counters: empty (no GPU work on any rank)" in report["views"]
    assert report["ranks"][0]["steps"] == "1-2" and report["ranks"][0]["input_shapes"] == 0


def test_clean_and_unusable_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
    code, report = check(capsys, demo)
    assert code == 0 and report["status"] == "clean" and report["findings"] == []
    assert [row["rank"] for row in report["ranks"]] == [0, 1, 2, 3]
    assert all(row["comm_kernels"] > 0 and row["steps"] == "10-14" for row in report["ranks"])
    (tmp_path / "notes.json").write_text('{"not": "a trace"}')
    assert main(["check", str(tmp_path / "notes.json"), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "notes.json" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_check_prints_a_table_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [step(1, 0, 100), cpu_op("aten::add", 10, 5)]
    write_trace(tmp_path / "cpu" / "rank-0.json", events, rank=0)
    assert main(["check", str(tmp_path / "cpu"), "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert "htatui check: what each rank can answer" in out and "what is odd" in out
    assert "view: temporal, idle, kernels, overlap, launch, counters: empty (no GPU work on any rank)" in out


def test_the_faces_name_a_rank_without_steps_at_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report` warns on stderr and the app lists it in its notes (N): the cheap findings, no re-read."""
    from htatui.analysis.health import load_notes

    for rank in range(2):
        events = nccl_rank(rank)
        if rank == 1:
            events = [e for e in events if not str(e["name"]).startswith("ProfilerStep")]
        write_trace(tmp_path / f"rank-{rank}.json", events, rank=rank)
    line = "rank 1 (rank-1.json): no ProfilerStep while other ranks have them: the cross-rank views leave it out"
    assert main(["report", str(tmp_path), "--view", "temporal", "--format", "csv", "--no-cache"]) == 0
    assert f"htatui: warning: {line}" in capsys.readouterr().err
    assert line in load_notes(load_traces([tmp_path], use_cache=False, max_workers=1))


def test_a_folder_opened_from_the_cache_still_names_them_and_keeps_its_ranks_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached folder's ranks open unread (issue 26); the load-time findings read each and drop it again."""
    from htatui.analysis.health import load_notes

    monkeypatch.setenv("HTATUI_CACHE_DIR", str(tmp_path / "cache"))
    for rank in range(2):
        events = nccl_rank(rank)
        if rank == 1:
            events = [e for e in events if not str(e["name"]).startswith("ProfilerStep")]
        write_trace(tmp_path / "job" / f"rank-{rank}.json", events, rank=rank)
    line = "rank 1 (rank-1.json): no ProfilerStep while other ranks have them: the cross-rank views leave it out"
    for _ in range(2):  # parsed and cached, then opened from the cache
        assert main(["report", str(tmp_path / "job"), "--view", "temporal", "--format", "csv"]) == 0
        assert f"htatui: warning: {line}" in capsys.readouterr().err
    cached = load_traces([tmp_path / "job"], max_workers=1)
    assert not any(trace.loaded for trace in cached.ranks.values())
    assert line in load_notes(cached)
    assert not any(trace.loaded for trace in cached.ranks.values())


def test_a_dataset_names_them_from_its_summary_without_reading_a_rank(tmp_path: Path) -> None:
    from htatui.analysis.health import finding_line, quick_findings
    from htatui.jobs.ingest import ingest

    for rank in range(3):
        events = nccl_rank(rank)
        if rank == 2:
            events = [e for e in events if e["cat"] != "kernel"]
        write_trace(tmp_path / "job" / f"rank-{rank}.json", events, rank=rank)
    ingest([tmp_path / "job"], tmp_path / "job.ds", max_workers=1)
    dataset = load_traces([tmp_path / "job.ds"], use_cache=False, max_workers=1)
    lines = [finding_line(f) for f in quick_findings(dataset)]
    assert lines == [
        "rank 2 (rank-2.json): no GPU kernels, copies or memsets while other ranks have them (a CPU-only rank)"
    ]
    assert not any(rank.loaded for rank in dataset.ranks.values())


def test_the_faces_name_a_skewed_clock_at_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 3's clock an hour off: `report`'s preamble and the app's notes say so at load (the
    events are in memory, so the collectives' end points are cheap to compare), for any view."""
    from htatui.analysis.health import load_notes

    for rank in range(4):
        events = gloo_rank(rank)
        if rank == 3:
            events = [{**event, "ts": event["ts"] + HOUR_US} for event in events]
        write_trace(tmp_path / f"rank-{rank}.json", events, rank=rank, base_ns=1_700_000_000_000_000_000)
    line = "rank 3 (rank-3.json): its 3 collective calls end +3,600,000,000 µs from the other ranks' (median)"
    assert main(["report", str(tmp_path), "--view", "ops", "--format", "csv", "--no-cache"]) == 0
    err = capsys.readouterr().err
    assert [x for x in err.splitlines() if "clock" in x][0].startswith(f"htatui: warning: {line}")
    notes = load_notes(load_traces([tmp_path], use_cache=False, max_workers=1))
    assert [note for note in notes if note.startswith(line)] != []
    assert "Traceback" not in err


def shared_jobs(root: Path) -> list[Path]:
    """Every job folder under ../shared/traces: a folder of trace files, or each sub-folder of a
    folder of jobs (trace_diff/control, critical_path/alexnet, …)."""
    jobs = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        subfolders = sorted(p for p in folder.iterdir() if p.is_dir())
        has_files = any(p.is_file() and p.name.endswith((".json", ".json.gz")) for p in folder.iterdir())
        jobs += [folder] if has_files or not subfolders else subfolders
    return jobs


def test_check_answers_on_every_shared_trace_folder(
    shared_traces: Path,
    load_shared: Callable[[str], TraceSet],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`htatui check` on each shared job prints what it can answer, without a traceback: exit 0 or
    1 with a row per rank, and a few answers known from the traces' README; memory_timeline (not
    a Kineto trace) is exit 2 and one line naming it. Jobs are loaded once per session
    (load_shared); the checks that re-read the files (shapes, flops) run too."""
    import argparse

    from htatui.cli.check import run_check

    reports: dict[str, dict[str, Any]] = {}
    for job in shared_jobs(shared_traces):
        name = str(job.relative_to(shared_traces))

        def load(paths: list[str], use_cache: bool, show_warnings: bool = True, name: str = name) -> object:
            return load_shared(name)

        for fmt in ("table", "json"):
            args = argparse.Namespace(paths=[str(job)], no_cache=True, format=fmt, quick=False, wide=False)
            code = run_check(args, load)
            out = capsys.readouterr()
            assert "Traceback" not in out.err + out.out, name
            if name == "memory_timeline":
                assert code == 2 and out.out == "" and len(out.err.strip().splitlines()) == 1, out.err
                assert out.err.startswith(f"htatui: {job}: ")
                break
            assert code in (0, 1), (name, out.err)
            if fmt == "table":
                assert "htatui check: what each rank can answer" in out.out, name
                assert ("what is odd" in out.out) == (code == 1) or out.out.count("skipped "), name
            else:
                reports[name] = json.loads(out.out)
                assert reports[name]["ranks"] and reports[name]["status"] == ("clean", "warnings")[code], name
    assert len(reports) >= 25  # 29 job folders, less memory_timeline

    def rank_rows(name: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = reports[name]["ranks"]
        return rows

    assert [r["rank"] for r in rank_rows("trace_filter")] == [0, 1]
    assert [(r["world_size"], r["cpu_collectives"] > 0) for r in rank_rows("h100_ddp_gloo_2rank")] == [(2, True)] * 2
    assert rank_rows("nccl_parser_config")[0]["comm_kernels"] > 0
    assert rank_rows("with_gpu_user_annotation")[0]["gpu_annotations"] > 0
    assert rank_rows("cupti_profiler")[0]["cupti_ranges"] > 0
    memory = rank_rows("h100_resnet_memory_profile")[0]
    assert memory["memory_events"] > 0 and memory["python_frames"] > 0
    assert rank_rows("h100_resnet_eager")[0]["input_shapes"] > 0
    for cpu_only in ("cpu_only", "rank_non_gpu"):
        assert reports[cpu_only]["status"] == "warnings" and rank_rows(cpu_only)[0]["gpu_rows"] == 0
        assert [f["kind"] for f in reports[cpu_only]["findings"]] == ["no GPU work"]


def test_nccl_name_drift_between_ranks_and_hta_compat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """All ranks name their all_reduce ncclDevKernel_* (NCCL >= 2.19): `check` says HTA 0.6.1's
    late starts will be empty. Rank 2 on an older NCCL (ncclKernel_*): named as drift, exit 1."""
    old = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
    for rank in range(3):
        events = nccl_rank(rank)
        write_trace(tmp_path / "new" / f"rank-{rank}.json", events, rank=rank)
        if rank == 2:
            events = [{**e, "name": old} if str(e["name"]).startswith("ncclDev") else e for e in events]
        write_trace(tmp_path / "mixed" / f"rank-{rank}.json", events, rank=rank)
    code, report = check(capsys, tmp_path / "new")
    assert code == 0 and [r["nccl_names"] for r in report["ranks"]] == ["ncclDevKernel_*"] * 3
    assert report["views"][0].startswith("late-starts --hta-compat: empty (HTA 0.6.1 looks for ncclKernel_* kernels")
    code, report = check(capsys, tmp_path / "mixed")
    assert code == 1 and kinds(report) == [(2, "NCCL names")]
    assert report["findings"][0]["message"].startswith(
        "its NCCL kernels are named ncclKernel_* while most ranks' are ncclDevKernel_*: the ranks ran different NCCL"
    )
    assert not any(view.startswith("late-starts --hta-compat") for view in report["views"])
