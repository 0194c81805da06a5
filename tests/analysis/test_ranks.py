"""Across ranks: rank × step matrix, stragglers and collectives on jobs with planted answers.

Every expected number is derived in the job's docstring or the comment beside the assert.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, named, runtime, step, traces_of
from ranks_jobs import gloo_rank, nccl_rank, skewed_rank

from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import Prepared, prepare
from htatui.analysis.core.scope import Scope
from htatui.analysis.views import ranks
from htatui.analysis.views.ranks import RanksOptions, meeting, phases, tables
from htatui.trace import TraceSet
from htatui.trace.model import DETAIL_COLUMNS, EVENT_SCHEMA


def test_slow_data_loader_on_gloo(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *(gloo_rank(r) for r in range(4)))
    result = ranks.analyse(traces, RanksOptions())
    assert result.source == meeting.CPU_OPS
    # Per step the three fast ranks wait 700 − 400 = 300 µs for rank 2; delay = median(300, 300, 300).
    # Two steps: 600 µs. Its data_loader: 2 × 400 = 800 vs the others' 2 × 100 = 200 → +600.
    # No GPU work, so every wait is exposed. The excess explains all of the delay.
    assert result.stragglers.to_dicts() == [
        {
            "rank": 2,
            "is_straggler": True,
            "steps": "1,2",
            "delay_us": 600.0,
            "delay_pct": 100.0,
            "calls_last": 2,
            "cause": "data_loader: 100 % of the delay (+600 µs, 800 µs vs median 200 µs)",
            "cause_phase": "data_loader",
            "cause_excess_us": 600.0,
            "cause_pct": 100.0,
        }
    ]
    # Per step: rank 2, 300 µs, data_loader 400 vs median 100.
    assert result.step_stragglers.select("step", "rank", "delay_us", "cause", "cause_pct").rows() == [
        (1, 2, 300.0, "data_loader: 100 % of the delay (+300 µs, 400 µs vs median 100 µs)", 100.0),
        (2, 2, 300.0, "data_loader: 100 % of the delay (+300 µs, 400 µs vs median 100 µs)", 100.0),
    ]
    matrix = result.matrix
    assert matrix.height == 8  # 4 ranks × steps 1, 2
    fast = matrix.filter((pl.col("rank") == 0) & (pl.col("step") == 1)).to_dicts()[0]
    slow = matrix.filter((pl.col("rank") == 2) & (pl.col("step") == 1)).to_dicts()[0]
    # rank 0: the gloo op [400, 800) is its communication; it waited 300; backward [300, 800).
    assert fast == {
        "rank": 0,
        "step": 1,
        "step_us": 1000.0,
        "gpu_busy_us": 0.0,
        "gpu_idle_us": 1000.0,
        "comm_us": 400.0,
        "wait_us": 300.0,
        "backward_us": 500.0,
        "data_loader_us": 100.0,
        "forward_us": 200.0,
        "optimizer_us": 100.0,
    }
    # rank 2: the gloo op [700, 800), no wait, backward [600, 800).
    assert (slow["comm_us"], slow["wait_us"], slow["data_loader_us"], slow["backward_us"]) == (100, 0, 400, 200)
    coll = result.collectives.to_dicts()
    # 4 ranks × 2 steps; mean duration (3 × 400 + 100) / 4 = 325; skew per call 300.
    assert len(coll) == 1
    assert coll[0] | {"msg_bytes": None} == {
        "pg": "",
        "kind": "all_reduce",
        "ranks": 4,
        "group_size": 4,
        "calls": 2,
        "msg_bytes": None,
        "total_bytes": None,
        "dur_us": 325.0,
        "total_dur_us": 2600.0,
        "algbw_gbps": None,
        "busbw_gbps": None,
        "skew_mean_us": 300.0,
        "skew_max_us": 300.0,
        "msg_bytes_from": None,
    }


def test_phase_comparison_of_the_straggler(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *(gloo_rank(r) for r in range(4)))
    result = ranks.analyse(traces, RanksOptions())
    table = phases.phase_excess(result.phases, 2, [1, 2])
    rows = {row["phase"]: (row["rank_us"], row["others_median_us"], row["excess_us"]) for row in table.to_dicts()}
    # backward: rank 2 2 × 200 vs 2 × 500; forward and optimizer equal.
    assert rows == {
        "data_loader": (800.0, 200.0, 600.0),
        "forward": (400.0, 400.0, 0.0),
        "optimizer": (200.0, 200.0, 0.0),
        "backward": (400.0, 1000.0, -600.0),
    }
    assert table["phase"].to_list()[0] == "data_loader"


def test_slow_compute_kernel_on_nccl(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *(nccl_rank(r) for r in range(3)))
    result = ranks.analyse(traces, RanksOptions())
    assert result.source == meeting.KERNELS
    # Ranks 0 and 2 reach the all_reduce at B+300, rank 1 at B+600: 300 µs per step, 2 steps.
    # Its gemm: 2 × 500 = 1000 vs 2 × 200 = 400 → +600 (GPU compute is +600 too; the kernel is named).
    got = result.stragglers.to_dicts()
    assert [(r["rank"], r["steps"], r["delay_us"], r["cause_phase"], r["cause_excess_us"]) for r in got] == [
        (1, "1,2", 600.0, "kernel sm80_xmma_gemm_f32", 600.0)
    ]
    row = result.matrix.filter((pl.col("rank") == 0) & (pl.col("step") == 2)).to_dicts()[0]
    # GPU busy = [1100, 1700) = 600, idle 1000 − 600 = 400, NCCL kernel 400, wait 300.
    assert (row["gpu_busy_us"], row["gpu_idle_us"], row["comm_us"], row["wait_us"], row["forward_us"]) == (
        600.0,
        400.0,
        400.0,
        300.0,
        100.0,
    )
    coll = result.collectives.to_dicts()[0]
    # 1e6 floats = 4e6 bytes; mean duration (400 + 100 + 400) / 3 = 300 µs → algbw 4e6 / 300 µs
    # = 13.333 GB/s; busbw × 2(n−1)/n = 4/3 → 17.778 GB/s.
    assert (coll["pg"], coll["kind"], coll["ranks"], coll["group_size"], coll["calls"]) == ("0", "all_reduce", 3, 3, 2)
    assert coll["msg_bytes"] == 4_000_000
    assert coll["total_bytes"] == 6 * 4_000_000
    assert coll["dur_us"] == pytest.approx(300.0)
    assert coll["algbw_gbps"] == pytest.approx(4e6 / 300 / 1e3)
    assert coll["busbw_gbps"] == pytest.approx(4e6 / 300 / 1e3 * 4 / 3)
    assert (coll["skew_mean_us"], coll["skew_max_us"]) == (300.0, 300.0)
    # The view's one answer carries HTA's late-start score beside it: per step the 2nd-latest
    # start of the NCCL kernel is B+300, shared by ranks 0 and 2, so all three ranks reach the
    # threshold in both steps (score 2 each); only rank 1 made the others wait.
    view = ranks.stragglers(traces, RanksOptions())
    assert view.frame.select("rank", "is_straggler", "delay_us", "hta_late_starts").rows() == [
        (1, True, 600.0, 2),
        (0, False, 0.0, 2),
        (2, False, 0.0, 2),
    ]


def test_demo_names_its_planted_straggler() -> None:
    """fixtures/demo plants rank 2 with slower compute kernels (fixtures/demo.py): the one answer
    names rank 2 alone, its whole delay explained by GPU compute."""
    from htatui.jobs.load import load_traces

    demo = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
    traces = load_traces([demo], use_cache=False, max_workers=1)
    frame = ranks.stragglers(traces, RanksOptions()).frame
    named = frame.filter(pl.col("is_straggler"))
    assert named.select("rank", "cause_phase", "cause_pct").rows() == [(2, "GPU compute", 100.0)]
    assert frame.filter(pl.col("rank") != 2)["delay_us"].to_list() == [0.0] * (frame.height - 1)


def test_skewed_arrivals_to_one_all_reduce(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *(skewed_rank(r) for r in range(4)))
    result = ranks.analyse(traces, RanksOptions())
    first = result.calls.filter(pl.col("seq") == 0).sort("rank")
    # Waits for the last arrival (400): 300, 250, 0, 200.
    assert first["wait_us"].to_list() == [300.0, 250.0, 0.0, 200.0]
    assert result.calls.filter(pl.col("seq") == 1)["wait_us"].to_list() == [0.0] * 4
    # Rank 2 delayed the others by median(300, 250, 200) = 250; the second call had no one late.
    assert result.stragglers.select("rank", "steps", "delay_us", "calls_last").to_dicts() == [
        {"rank": 2, "steps": "1", "delay_us": 250.0, "calls_last": 1}
    ]
    coll = result.collectives.to_dicts()[0]
    # Skew per call (longest wait): 300 and 0 → mean 150, max 300; kind from the kernel name.
    assert (coll["kind"], coll["calls"], coll["skew_mean_us"], coll["skew_max_us"]) == ("all_reduce", 2, 150.0, 300.0)
    # No message args, no pg: world_size (4) stands in for the group size; bytes unknown.
    assert (coll["pg"], coll["group_size"], coll["msg_bytes"], coll["busbw_gbps"]) == ("", 4, None, None)


def test_one_rank_says_so(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, skewed_rank(0))
    view = ranks.stragglers(traces, RanksOptions())
    assert view.frame.height == 0
    assert view.message == "the job has one rank: stragglers need two or more"
    # The other two views still answer for one rank.
    assert ranks.rank_steps(traces, RanksOptions()).frame.height == 1
    coll = ranks.collectives(traces, RanksOptions())
    assert coll.frame["calls"].to_list() == [2]
    assert coll.message == "the job has one rank: cross-rank skew needs two or more"


def test_one_picked_rank_of_four_says_it_was_picked(tmp_path: Path) -> None:
    """Issue 25 #15: with rank 1 of 4 chosen, the job still has 4 ranks; the sentence says one is chosen."""
    traces = traces_of(tmp_path, *(skewed_rank(r) for r in range(4)))
    picked = RanksOptions(scope=Scope(ranks=(1,)))
    assert ranks.stragglers(traces, picked).message == (
        "one of the job's 4 ranks is chosen: stragglers need two or more"
    )
    assert ranks.collectives(traces, picked).message == (
        "one of the job's 4 ranks is chosen: cross-rank skew needs two or more"
    )


def test_compat_stragglers_keep_htas_table(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *(gloo_rank(r) for r in range(4)))
    compat = ranks.stragglers(traces, RanksOptions(scope=Scope(hta_compat=True)))
    # HTA's method looks at ncclKernel* only: on gloo it finds nothing.
    assert compat.frame.columns == ["rank", "straggler_score", "is_straggler"]
    assert compat.message == (
        "method: HTA 0.6.1's late starts (per step, the ranks that start its most variable collective last); "
        "no communication kernels on the GPU in the chosen steps: a gloo or CPU-only job communicates "
        "on the host, which HTA's method cannot see (--view stragglers reads it)"
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("gloo:all_reduce", "all_reduce"),
        ("nccl:_all_gather_base", "all_gather"),
        ("nccl:_reduce_scatter_base", "reduce_scatter"),
        ("c10d::alltoall_base_", "all_to_all"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "send/recv"),
        ("allgather", "all_gather"),
        ("gloo:broadcast", "broadcast"),
        ("void dpsk::ep::internode::combine<4, 8>(void*)", "dpsk::ep::internode::combine"),
    ],
)
def test_collective_kind(name: str, kind: str) -> None:
    assert meeting.collective_kind(name) == kind


def test_busbw_factors() -> None:
    assert meeting.busbw_factor("all_reduce", 8) == 2 * 7 / 8
    assert meeting.busbw_factor("all_gather", 8) == meeting.busbw_factor("reduce_scatter", 8) == 7 / 8
    assert meeting.busbw_factor("broadcast", 8) == meeting.busbw_factor("send/recv", 8) == 1.0


# ---- real jobs ---------------------------------------------------------------------------------


def test_gloo_ddp_two_ranks(load_shared: Callable[[str], TraceSet]) -> None:
    traces = load_shared("h100_ddp_gloo_2rank")
    result = ranks.analyse(traces, RanksOptions())
    assert result.source == meeting.CPU_OPS
    # Steps 2 and 3 (4 is the last): 3 all_reduces and 2 broadcasts per step per rank.
    assert sorted(map(tuple, result.collectives.select("kind", "calls", "ranks").rows())) == [
        ("all_reduce", 6, 2),
        ("broadcast", 4, 2),
    ]
    first = result.calls.filter((pl.col("kind") == "all_reduce") & (pl.col("step") == 2) & (pl.col("seq") == 0))
    # gloo:all_reduce starts at 4510331119302.179 (rank 0) and 4510331120820.710 (rank 1) in the
    # files (same baseTimeNanoseconds): rank 0 waits 1518.531 µs.
    assert first.sort("rank")["wait_us"].to_list() == pytest.approx([1518.531, 0.0], abs=2e-3)
    data_loader = result.matrix.filter(pl.col("step") == 2).sort("rank")["data_loader_us"].to_list()
    assert data_loader == pytest.approx([276.717, 254.062])  # the files' data_loader durations
    assert result.stragglers.height >= 1 and result.message is None


def test_trace_filter_send_recv(load_shared: Callable[[str], TraceSet]) -> None:
    traces = load_shared("trace_filter")
    result = ranks.analyse(traces, RanksOptions())
    assert result.source == meeting.KERNELS
    # Step 551 (552 is the last): 5 SendRecv kernels per rank; rank 1 starts each one later.
    # Rank 0's waits from the files' ts: 129911−94377, 234342−125052, 298964−295662,
    # 512687−348496, 585405−585321 = 35534 + 109290 + 3302 + 164191 + 84 = 312401.
    waits = result.calls.filter(pl.col("rank") == 0).sort("ts")["wait_us"].to_list()
    assert waits == [35534.0, 109290.0, 3302.0, 164191.0, 84.0]
    # Rank 0's GPU ran its own kernels during part of those waits: only the rest delayed it.
    top = result.stragglers.to_dicts()[0]
    own_work = _own_gpu_work_inside(traces, 0, result.calls.filter(pl.col("rank") == 0))
    assert (top["rank"], top["steps"], top["calls_last"]) == (1, "551", 5)
    assert top["delay_us"] == pytest.approx(312401.0 - own_work) and own_work > 0
    coll = result.collectives.to_dicts()[0]
    assert (coll["kind"], coll["calls"], coll["group_size"], coll["skew_max_us"]) == ("send/recv", 5, 128, 164191.0)
    assert coll["skew_mean_us"] == pytest.approx(312401 / 5)


def _own_gpu_work_inside(traces: TraceSet, rank: int, calls: pl.DataFrame) -> float:
    """Brute force: the union of the rank's non-communication GPU work, intersected with each call's wait."""
    events = traces.ranks[rank].events.filter(pl.col("cat").cast(pl.Utf8).is_in(["kernel", "gpu_memcpy", "gpu_memset"]))
    work = sorted(
        (ts, end)
        for name, ts, end in events.select(pl.col("name").cast(pl.Utf8), "ts", "end").iter_rows()
        if "nccl" not in name.lower()
    )
    merged: list[list[float]] = []
    for ts, end in work:
        if merged and ts <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([ts, end])
    total = 0.0
    for start, stop in calls.select("ts", "arrival_last_us").iter_rows():
        total += sum(max(0.0, min(stop, b) - max(start, a)) for a, b in merged)
    return total


def test_compat_stragglers_are_htas_on_trace_filter(load_shared: Callable[[str], TraceSet]) -> None:
    from htatui.analysis.views import steps

    traces = load_shared("trace_filter")
    ours = ranks.stragglers(traces, RanksOptions(scope=Scope(hta_compat=True)))
    theirs = steps.stragglers(traces, steps.StragglerOptions(scope=Scope(hta_compat=True)))  # the HTA parity path
    assert ours.frame.equals(theirs.frame) and theirs.message is None
    assert ours.message is not None and ours.message.startswith("method: HTA 0.6.1's late starts")
    assert ours.frame["is_straggler"].to_list() == [True, True]  # both ranks, k = 2 (HTA's answer)


def test_nccl_parser_config_one_rank(load_shared: Callable[[str], TraceSet]) -> None:
    traces = load_shared("nccl_parser_config")
    result = ranks.analyse(traces, RanksOptions())
    assert result.message == "the job has one rank: stragglers need two or more"
    rows = {row["kind"]: row for row in result.collectives.to_dicts()}
    assert set(rows) >= {"all_reduce"}
    allreduce = rows["all_reduce"]
    assert (allreduce["pg"], allreduce["group_size"], allreduce["skew_max_us"]) == ("0", 2, None)
    # Bytes are In msg nelems × 4 (dtype Float), e.g. 6637568 × 4 for the largest bucket.
    assert allreduce["msg_bytes"] == pytest.approx(allreduce["total_bytes"] / allreduce["calls"])
    assert allreduce["busbw_gbps"] == pytest.approx(allreduce["algbw_gbps"])  # 2(n−1)/n = 1 for n = 2


# ---- the report faces ----------------------------------------------------------------------------


def test_report_views(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from htatui.cli.main import main

    traces_of(tmp_path, *(gloo_rank(r) for r in range(4)))
    assert main(["report", str(tmp_path), "--view", "stragglers", "--format", "json", "--no-cache"]) == 0
    out = capsys.readouterr()
    assert [(r["rank"], r["delay_us"], r["cause_phase"]) for r in json.loads(out.out)] == [(2, 600.0, "data_loader")]
    assert "meeting points: collective CPU ops" in out.err
    assert main(["report", str(tmp_path), "--view", "stragglers", "--per-step", "--format", "csv", "--no-cache"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        '1,2,300.0,"data_loader: 100 % of the delay (+300 µs, 400 µs vs median 100 µs)",data_loader,300.0,100.0',
        '2,2,300.0,"data_loader: 100 % of the delay (+300 µs, 400 µs vs median 100 µs)",data_loader,300.0,100.0',
    ]
    assert main(["report", str(tmp_path), "--view", "rank-steps", "--format", "csv", "--no-cache"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "rank,step,step_us,gpu_busy_us,gpu_idle_us,comm_us,wait_us,backward_us,data_loader_us,forward_us,optimizer_us"
    )
    assert len(lines) == 9
    assert main(["report", str(tmp_path), "--view", "collectives", "--format", "json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["skew_max_us"] == 300.0


def test_report_comm_rules_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from htatui.analysis.core.comm_rules import ENV_VAR
    from htatui.cli.main import main

    monkeypatch.setenv(ENV_VAR, "")  # --comm-rules sets it for the process; monkeypatch restores it
    (tmp_path / "job").mkdir()
    traces_of(
        tmp_path / "job", [step(1, 0, 100), runtime("cudaLaunchKernel", 1, 1, 1), kernel("myccl_bcast", 5, 50, corr=1)]
    )
    assert main(["report", str(tmp_path / "job"), "--view", "temporal", "--format", "csv", "--no-cache"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split(",")[2] == "50.0"  # compute_us: a compute kernel
    rules = tmp_path / "mine.toml"
    rules.write_text('[[rule]]\npattern = "^myccl_"\n')
    args = ["report", str(tmp_path / "job"), "--view", "temporal", "--format", "csv", "--no-cache"]
    assert main([*args, "--comm-rules", str(rules)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split(",")[2] == "0.0"  # now communication
    assert main([*args, "--comm-rules", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml: cannot read communication rules" in capsys.readouterr().err
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "gone.toml"))  # a bad file named in the environment
    assert main(args) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"htatui: {tmp_path / 'gone.toml'}: cannot read communication rules (No such file or directory)"
    )


def test_message_bytes_from_nelems_dtype_or_size(tmp_path: Path) -> None:
    """2 ranks, one step: an all_gather kernel (In 1000, Out 4000 bf16 elements, group of 4,
    100 µs) and an all_to_all kernel with only 'In msg size' 1234 (50 µs), both arriving together."""

    def rank_events(_rank: int) -> list[dict[str, object]]:
        gather: dict[str, Any] = {"Collective name": "allgather", "In msg nelems": 1000, "Out msg nelems": 4000}
        gather |= {"dtype": "BFloat16", "Group size": 4, "Process Group Name": "7"}
        return [
            step(1, 0, 1000),
            runtime("cudaLaunchKernel", 10, 5, 1),
            runtime("cudaLaunchKernel", 20, 5, 2),
            kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 100, 100, corr=1, **gather),
            kernel(
                "ncclDevKernel_Generic",
                300,
                50,
                corr=2,
                **named({"Collective name": "all_to_all", "In msg size": 1234}),
            ),
        ]

    traces = traces_of(tmp_path, rank_events(0), rank_events(1))
    rows = {row["kind"]: row for row in ranks.analyse(traces, RanksOptions()).collectives.to_dicts()}
    # all_gather: max(1000, 4000) × 2 B = 8000 B; 8000 B / 100 µs = 0.08 GB/s; busbw × (4−1)/4 = 0.06.
    gather = rows["all_gather"]
    assert (gather["pg"], gather["group_size"], gather["msg_bytes"]) == ("7", 4, 8000.0)
    assert gather["algbw_gbps"] == pytest.approx(0.08)
    assert gather["busbw_gbps"] == pytest.approx(0.06)
    # all_to_all: In msg size 1234 B / 50 µs = 0.02468 GB/s; group size from world_size 2 → × 1/2.
    to_all = rows["all_to_all"]
    assert (to_all["msg_bytes"], to_all["group_size"]) == (1234.0, 2)
    assert to_all["busbw_gbps"] == pytest.approx(1234 / 50 / 1e3 / 2)
    assert (gather["skew_max_us"], to_all["skew_max_us"]) == (0.0, 0.0)


def test_steps_come_from_the_host_profiler_step(tmp_path: Path) -> None:
    """Host ProfilerStep#1 [0, 1000) but its GPU-side copy only [100, 300): the optimizer range
    [800, 900) and the kernel it launches at 850 ([860, 880)) still belong to step 1."""
    from kineto_util import cpu_op

    events = [
        step(1, 0, 1000),
        cpu_op("ProfilerStep#1", 100, 200, cat="gpu_user_annotation"),
        step(2, 1000, 1000),
        cpu_op("optimizer", 800, 100, cat="user_annotation"),
        runtime("cudaLaunchKernel", 850, 5, 5),
        kernel("sgd_kernel", 860, 20, corr=5),
    ]
    result = ranks.analyse(traces_of(tmp_path, events), RanksOptions())
    row = result.matrix.to_dicts()[0]
    assert (row["step"], row["optimizer_us"], row["gpu_busy_us"]) == (1, 100.0, 20.0)


def _same(a: ranks.RanksResult, b: ranks.RanksResult) -> bool:
    """Equal results; frames compared with their rows sorted (phases come in no fixed order)."""
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, pl.DataFrame):
            if not x.sort(x.columns, nulls_last=True).equals(y.sort(y.columns, nulls_last=True)):
                return False
        elif x != y:
            return False
    return True


@pytest.mark.parametrize("folder", ["h100_ddp_gloo_2rank", "trace_filter", "amd_trace", "nccl_parser_config"])
@pytest.mark.parametrize("compat", [False, True])
def test_analyse_needs_only_its_columns(
    folder: str, compat: bool, load_shared: Callable[[str], TraceSet], monkeypatch: pytest.MonkeyPatch
) -> None:
    """analyse reads ANALYSE_READS only; with every column prepared it must give the same result."""
    traces = load_shared(folder)
    narrow = ranks.analyse(TraceSet(ranks=traces.ranks), RanksOptions(scope=Scope(hta_compat=compat)))
    real_prepare = prepare

    def every_column(traces: TraceSet, options: CommonOptions, columns: tuple[str, ...] | None = None) -> Prepared:
        return real_prepare(traces, options, columns=(*EVENT_SCHEMA, *DETAIL_COLUMNS))

    monkeypatch.setattr(tables, "prepare", every_column)
    wide = ranks.analyse(TraceSet(ranks=traces.ranks), RanksOptions(scope=Scope(hta_compat=compat)))
    assert _same(narrow, wide)
    assert wide.rank_count >= 1 and wide.calls.height + wide.matrix.height > 0


def test_over_a_dataset_analyse_reads_a_rank_at_a_time(tmp_path: Path) -> None:
    """Over an ingested job the analysis keeps no rank's events, and its numbers are the loaded job's."""
    from htatui.jobs.ingest import ingest
    from htatui.jobs.load import load_traces

    (tmp_path / "job").mkdir()
    direct = traces_of(tmp_path / "job", *(nccl_rank(r) for r in range(3)))
    ingest([tmp_path / "job"], tmp_path / "ds", max_workers=1)
    stored = load_traces([tmp_path / "ds"])
    result = ranks.analyse(stored, RanksOptions())
    assert not any(rank.loaded for rank in stored.ranks.values())
    assert _same(result, ranks.analyse(direct, RanksOptions()))
    assert result.stragglers["rank"].to_list() == [1]  # the hand-made straggler (test_slow_compute_kernel_on_nccl)


def test_phases_come_in_one_order(load_shared: Callable[[str], TraceSet]) -> None:
    """The phase rows are sorted by rank, step and phase, so repeated runs read the same."""
    traces = load_shared("h100_ddp_gloo_2rank")
    runs = [ranks.analyse(TraceSet(ranks=traces.ranks), RanksOptions()).phases for _ in range(3)]
    assert runs[0].height > 0 and runs[0].equals(runs[0].sort("rank", "step", "phase"))
    assert all(run.equals(runs[0]) for run in runs)


def test_a_delay_no_phase_explains_says_so(tmp_path: Path) -> None:
    """Two ranks, gloo, two analysed steps of 1000 µs. data_loader lasts 100 µs (110 on rank 1),
    then rank 1 stalls outside any range until B+600 before its gloo:all_reduce; rank 0 arrives at
    B+200. Rank 0 waits 600 − 200 = 400 µs per step: delay 800 µs over steps 1-2. The largest
    excess is data_loader's 2 × 10 = 20 µs: 2.5 % of the delay, so no phase explains it."""

    def rank_events(rank: int) -> list[dict[str, object]]:
        loader, arrival = (110.0, 600.0) if rank == 1 else (100.0, 200.0)
        events: list[dict[str, object]] = []
        for n in (1, 2, 3):
            base = (n - 1) * 1000.0
            events += [
                step(n, base, 1000),
                cpu_op("data_loader", base, loader, cat="user_annotation"),
                cpu_op("gloo:all_reduce", base + arrival, 700 - arrival, tid=2, cat="user_annotation"),
            ]
        return events

    traces = traces_of(tmp_path, rank_events(0), rank_events(1))
    view = ranks.stragglers(traces, RanksOptions())
    row = view.frame.row(0, named=True)
    assert (row["rank"], row["is_straggler"], row["delay_us"], row["cause_phase"]) == (1, True, 800.0, "data_loader")
    assert row["cause_excess_us"] == 20.0 and row["cause_pct"] == pytest.approx(2.5)
    assert row["cause"] == (
        "no phase explains this delay (largest: data_loader, 2 % of it: +20 µs, 220 µs vs median 200 µs)"
    )
    assert view.message is not None and view.message.startswith("method: who the others waited for at collectives")
