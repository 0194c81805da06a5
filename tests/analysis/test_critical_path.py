"""The critical-path view: HTA 0.6.1's paths on the shared traces, and each edge kind on hand-made traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import Event, context_sync, cpu_op, device, kernel, runtime, traces_of

from htatui.analysis.core.scope import Scope
from htatui.analysis.views import critical_path as cp

ORACLES = Path(__file__).resolve().parents[2].parent / "shared" / "oracles" / "critical_path"
TRACES = ("alexnet", "cuda_event_sync", "cuda_event_sync_multi_stream", "simple_add")


def _oracle(name: str) -> dict[str, Any]:
    path = ORACLES / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"oracle not found at {path}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.mark.parametrize("name", TRACES)
def test_compat_matches_hta_path(name: str, load_shared: Any) -> None:
    """Summary per bound type, path length, and every edge (kind, weight, bound) in HTA's order."""
    oracle = _oracle(name)
    traces = load_shared(f"critical_path/{name}")
    options = cp.CriticalPathOptions(
        scope=Scope(hta_compat=True),
        rank=oracle["rank"],
        annotation=oracle["annotation"],
        instance=oracle["instance_id"] or 0,
    )
    path = cp.rank_path(traces, options).frame
    assert path["duration_us"].sum() == oracle["total_path_us"]
    summary = dict(cp.compute(traces, options).frame.select("bound_by", "time_us").iter_rows())
    assert summary == {k: v for k, v in oracle["summary_us"].items() if k}
    pct = dict(cp.compute(traces, options).frame.select("bound_by", "pct").iter_rows())
    assert pct == pytest.approx({k: v for k, v in oracle["summary_pct"].items() if k})
    ours = list(path.select("edge_type", "duration_us", "bound_by", "name").iter_rows())
    theirs = [(e["edge_type"], e["duration_us"], e["bound_by"], e["event"]) for e in oracle["edges"]]
    assert [row[:3] for row in ours] == [row[:3] for row in theirs]
    # HTA names events by its shortened names; the first word is the same.
    assert [str(row[3])[:8] for row in ours] == [str(row[3])[:8] for row in theirs]


def _path(tmp_path: Path, events: list[Event], hta_compat: bool = False) -> pl.DataFrame:
    tmp_path.mkdir(exist_ok=True)
    traces = traces_of(tmp_path, events)
    found = cp.rank_path(traces, cp.CriticalPathOptions(scope=Scope(hta_compat=hta_compat)))
    assert found.message is None
    return found.frame


def _by_bound(path: pl.DataFrame) -> dict[str, float]:
    return dict(cp.summarise(path).select("bound_by", "time_us").iter_rows())


@pytest.mark.parametrize("hta_compat", [False, True])
def test_launch_delay_kernel_andcontext_sync(tmp_path: Path, hta_compat: bool) -> None:
    """aten::add [0,20] launches k1 at 5; k1 runs 30–80; cudaDeviceSynchronize [25,85] waits for it; then op [90,100].

    Path: add.start →5 launch.start →25 (launch delay) k1.start →50 k1.end →0 (context sync) sync.end
    →0 op.start →10 op.end = 90 (without the sync edge the host alone: 20 + 10).
    """
    events = [
        cpu_op("aten::add", 0, 20),
        runtime("cudaLaunchKernel", 5, 5, 1),
        kernel("k1", 30, 50, corr=1),
        runtime("cudaDeviceSynchronize", 25, 60, 2),
        context_sync(30, 55, 2),
        cpu_op("op", 90, 10),
    ]
    path = _path(tmp_path, events, hta_compat)
    assert path["duration_us"].sum() == 90
    assert _by_bound(path) == {"gpu_compute_bound": 50, "gpu_kernel_launch_overhead": 25, "cpu_bound": 15}
    assert path["edge_type"].to_list() == [
        "critical_path_operator",
        "critical_path_kernel_launch_delay",
        "critical_path_operator",
        "critical_path_sync_dependency",
        "critical_path_dependency",
        "critical_path_operator",
    ]
    assert path["name"].to_list() == ["aten::add", None, "k1", None, None, "op"]


def test_kernel_kernel_delay(tmp_path: Path) -> None:
    """k2 is launched (at 10) while k1 (3–103) is still running: the gap 103→105 is kernel–kernel overhead.

    Path: L1.start →3 (launch) k1 →100 →2 (kernel-kernel) k2 →50 = 155.
    """
    events = [
        runtime("cudaLaunchKernel", 0, 2, 1),
        kernel("k1", 3, 100, corr=1),
        runtime("cudaLaunchKernel", 10, 2, 2),
        kernel("k2", 105, 50, corr=2),
    ]
    path = _path(tmp_path, events)
    assert path["duration_us"].sum() == 155
    assert _by_bound(path) == {
        "gpu_compute_bound": 150,
        "gpu_kernel_launch_overhead": 3,
        "gpu_kernel_kernel_overhead": 2,
    }
    assert path.filter(pl.col("bound_by") == "gpu_kernel_kernel_overhead")["name"].to_list() == ["k1"]


def test_cpu_nesting_and_blocking_call(tmp_path: Path) -> None:
    """outer [0,100] holds inner [10,30] and cudaStreamSynchronize [40,90] (no GPU work: its wait counts 0).

    Path along the stack: outer.start →10 inner.start →20 inner.end →10 sync.start →0 sync.end →10 outer.end = 50.
    """
    events = [
        cpu_op("outer", 0, 100),
        cpu_op("inner", 10, 20),
        runtime("cudaStreamSynchronize", 40, 50, 3),
    ]
    path = _path(tmp_path, events)
    assert path["duration_us"].sum() == 50
    assert path["name"].to_list() == ["outer", "inner", "outer", "cudaStreamSynchronize", "outer"]
    assert path["duration_us"].to_list() == [10, 20, 10, 0, 10]


def _record(ts: float, corr: int) -> Event:
    return runtime("cudaEventRecord", ts, 1, corr)


def test_event_sync_waits_for_the_recorded_kernel(tmp_path: Path) -> None:
    """cudaEventSynchronize [30,110] waits for k1 (5–105), recorded after its launch; then op [120,130].

    Path: L1 →5 k1 →100 →0 (event sync) sync.end →0 op →10 = 115 (without the sync edge, 105).
    """
    event_sync = device("cuda_sync", "Event Sync", 30, 80, stream=-1, corr=9)
    event_sync["args"]["wait_on_stream"] = 7
    events = [
        runtime("cudaLaunchKernel", 0, 2, 1),
        kernel("k1", 5, 100, corr=1),
        _record(20, 8),
        runtime("cudaEventSynchronize", 30, 80, 9),
        event_sync,
        cpu_op("op", 120, 10),
    ]
    path = _path(tmp_path, events)
    assert path["duration_us"].sum() == 115
    assert "critical_path_sync_dependency" in path["edge_type"].to_list()
    assert _by_bound(path) == {"gpu_compute_bound": 100, "gpu_kernel_launch_overhead": 5, "cpu_bound": 10}


def test_stream_wait_event_joins_two_streams(tmp_path: Path) -> None:
    """Stream 8 waits (cudaStreamWaitEvent) for k1 on stream 7 (5–105); k2 on stream 8 runs 106–116.

    Path: L1 →5 k1 →100 →0 (GPU→GPU sync) k2 →10 = 115 (without the wait, k2 stands alone: 105).
    """
    wait = device("cuda_sync", "Stream Wait Event", 6, 1, stream=8, corr=20)
    wait["args"]["wait_on_stream"] = 7
    events = [
        runtime("cudaLaunchKernel", 0, 2, 1),
        kernel("k1", 5, 100, corr=1),
        _record(3, 10),
        runtime("cudaStreamWaitEvent", 6, 1, 20),
        wait,
        runtime("cudaLaunchKernel", 8, 2, 2),
        kernel("k2", 106, 10, stream=8, corr=2),
    ]
    path = _path(tmp_path, events)
    assert path["duration_us"].sum() == 115
    assert path["name"].to_list()[-1] == "k2"
    assert path["edge_type"].to_list()[-2] == "critical_path_sync_dependency"


def test_unknown_annotation_says_so(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, [cpu_op("a", 0, 1)])
    found = cp.rank_path(traces, cp.CriticalPathOptions(annotation="ProfilerStep"))
    assert found.frame.height == 0
    assert found.message == "rank 0: no event's name contains 'ProfilerStep'"


def test_kernel_never_starts_before_its_launch(tmp_path: Path) -> None:
    """k1 is queued (k2's launch comes before k1 starts) 3 ms after the stream's last kernel: HTA gives
    it no edge in, so its path starts at k1 and the host's 3 ms hide the GPU work the sync waits for.

    Host: L0 [0,2], work [20,3020], L1 [3030,3032] → k1 [3040,3140], L2 [3035,3037] → k2 [3140,3240],
    cudaDeviceSynchronize [3040,3250], after [3260,3270].
    HTA: the host chain L0 2 + work 3000 + L1 2 + L2 2 + after 10 = 3016, all cpu_bound.
    Default: L0 2 + work 3000 → L1.start →0 (launch) k1 100 →0 k2 100 → sync end → after 10 = 3212.
    """
    events = [
        runtime("cudaLaunchKernel", 0, 2, 1),
        kernel("k0", 5, 5, corr=1),
        cpu_op("work", 20, 3000),
        runtime("cudaLaunchKernel", 3030, 2, 2),
        kernel("k1", 3040, 100, corr=2),
        runtime("cudaLaunchKernel", 3035, 2, 3),
        kernel("k2", 3140, 100, corr=3),
        runtime("cudaDeviceSynchronize", 3040, 210, 4),
        context_sync(3240, 5, 4),
        cpu_op("after", 3260, 10),
    ]
    hta = _path(tmp_path / "hta", events, hta_compat=True)
    assert hta["duration_us"].sum() == 3016
    assert _by_bound(hta) == {"cpu_bound": 3016}
    ours = _path(tmp_path / "ours", events)
    assert ours["duration_us"].sum() == 3212
    assert _by_bound(ours) == {
        "cpu_bound": 3012,
        "gpu_compute_bound": 200,
        "gpu_kernel_launch_overhead": 0,
        "gpu_kernel_kernel_overhead": 0,
    }


def test_negative_edge_counts_zero_in_default_mode(tmp_path: Path) -> None:
    """inner [5,11] ends 1 µs after outer [0,10] (an ns artefact); then next [20,25].

    The edge inner.end → outer.end weighs −1: the path is solved with 0 in both modes (5 + 6 + 0 + 5
    = 16), but HTA reports the edge's own −1 (its summary adds to 15).
    """
    events = [cpu_op("outer", 0, 10), cpu_op("inner", 5, 6), cpu_op("next", 20, 5)]
    ours = _path(tmp_path / "ours", events)
    assert ours["duration_us"].to_list() == [5, 6, 0, 0, 5]
    hta = _path(tmp_path / "hta", events, hta_compat=True)
    assert hta["duration_us"].to_list() == [5, 6, -1, 0, 5]


def _rank_events(op: str, op_end: float, launch_ts: float, kernel_ts: float) -> list[Event]:
    """One rank: `op` [0, op_end] launches an all-reduce (ends at 5100); the host syncs, then `after` [5110, 5120]."""
    return [
        cpu_op(op, 0, op_end),
        runtime("cudaLaunchKernel", launch_ts, 5, 1),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", kernel_ts, 5100 - kernel_ts, corr=1),
        runtime("cudaDeviceSynchronize", op_end + 1, 5104 - op_end, 2),
        context_sync(5100, 4, 2),
        cpu_op("after", 5110, 10),
    ]


def test_job_path_crosses_to_the_late_rank(tmp_path: Path) -> None:
    """Rank 0 is ready at 110 and its all-reduce kernel runs 110–5100 waiting for rank 1, whose
    `slow` op [0,5000] launches at 4990 (kernel 5000–5100).

    Rank 0 alone: fast 90 → launch 20 → all-reduce 4990 → after 10 = 5110, mostly communication.
    Job: the all-reduce ends 100 µs (the transfer) after the last arrival (rank 1, at 5000), so the
    path is rank 1's slow 4990 → launch 10 → rank 0's or 1's transfer 100 → after 10 = 5110.
    """
    traces = traces_of(tmp_path, _rank_events("fast", 100, 90, 110), _rank_events("slow", 5000, 4990, 5000))
    alone = cp.rank_path(traces, cp.CriticalPathOptions(rank=0)).frame
    assert _by_bound(alone) == {"gpu_communication_bound": 4990, "cpu_bound": 100, "gpu_kernel_launch_overhead": 20}
    found = cp.job_path(traces, cp.CriticalPathOptions())
    assert found.message is None
    path = found.frame
    assert path["duration_us"].sum() == 5110
    assert path.filter(pl.col("name") == "slow")["rank"].unique().to_list() == [1]
    assert path.filter(pl.col("name") == "slow")["duration_us"].sum() == 4990
    assert "critical_path_collective" in path["edge_type"].to_list()
    assert _by_bound(path) == {"cpu_bound": 5000, "gpu_communication_bound": 100, "gpu_kernel_launch_overhead": 10}
    job = cp.job(traces, cp.CriticalPathOptions()).frame
    assert job.row(0, named=True)["rank"] == 1
    assert job.row(0, named=True)["name"] == "slow"


def test_what_if_solves_the_path_again(tmp_path: Path) -> None:
    """The kernel–kernel trace (path 155 = launch 3 + k1 100 + gap 2 + k2 50), each kernel 50 % faster.

    k1 at 50 µs: 3 + 50 + 2 + 50 = 105; k2 at 25 µs: 3 + 100 + 2 + 25 = 130 (the gap stays 2).
    """
    events = [
        runtime("cudaLaunchKernel", 0, 2, 1),
        kernel("k1", 3, 100, corr=1),
        runtime("cudaLaunchKernel", 10, 2, 2),
        kernel("k2", 105, 50, corr=2),
    ]
    traces = traces_of(tmp_path, events)
    table = cp.hta_path_what_if(traces, cp.CriticalPathOptions(faster_pct=50)).frame
    rows = {r["name"]: r for r in table.iter_rows(named=True)}
    assert list(rows) == ["k1", "k2"]
    assert rows["k1"]["time_us"] == 100 and rows["k1"]["path_us"] == 155
    assert rows["k1"]["path_if_faster_us"] == 105 and rows["k1"]["saved_us"] == 50
    assert rows["k2"]["path_if_faster_us"] == 130
    assert rows["k2"]["saved_pct"] == pytest.approx(25 / 155 * 100)


def test_faster_pct_outside_0_100_says_so(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, [cpu_op("a", 0, 1)])
    found = cp.hta_path_what_if(traces, cp.CriticalPathOptions(faster_pct=150))
    assert found.frame.height == 0
    assert found.message == "--faster-pct 150 is not in 0–100"


def test_window_without_ops_says_so(tmp_path: Path) -> None:
    """Only a user annotation in the trace: no node, no path, and the sentence says why."""
    traces = traces_of(tmp_path, [cpu_op("range", 0, 10, cat="user_annotation")])
    found = cp.rank_path(traces, cp.CriticalPathOptions())
    assert found.frame.height == 0
    assert found.message == "rank 0: no op, runtime call or GPU work with a duration in the window"


def test_straggler_what_if_scales_the_slow_rank_to_the_median(tmp_path: Path) -> None:
    """The two-rank job above. Own paths (collectives weighing their 100 µs transfer): rank 0 90 +
    20 + 100 + 10 = 220, rank 1 4990 + 10 + 100 + 10 = 5110; median 2665. Rank 1 at the median's
    pace: its slow op and launch take 5000 · 2665/5110, then rank 0's transfer 100 and after 10.
    """
    traces = traces_of(tmp_path, _rank_events("fast", 100, 90, 110), _rank_events("slow", 5000, 4990, 5000))
    table = cp.hta_straggler_what_if(traces, cp.CriticalPathOptions()).frame
    rows = {r["rank"]: r for r in table.iter_rows(named=True)}
    assert rows[0]["own_path_us"] == 220 and rows[1]["own_path_us"] == 5110
    assert rows[1]["median_own_path_us"] == 2665 and rows[1]["job_path_us"] == 5110
    assert rows[0]["saved_us"] == 0
    assert rows[1]["job_path_if_median_us"] == pytest.approx(5000 * 2665 / 5110 + 110)
