"""launch, queue (summary + blocked), membw, annotations, steps and stragglers in compat mode
against HTA 0.6.1 run in this test process, on every folder of ../shared/traces that HTA loads
(and, for stragglers, on small generated multi-rank jobs).

Tolerance: 0.01 % of HTA's value or 1 µs for times; 0.01 % or 1e-6 for queue lengths and
ratios; 0.01 % or 1e-9 GB/s for bandwidths (HTA's series keep float residues such as 1e-16
GB/s that only an equal summation order reproduces). A NaN on HTA's side must be a null (or
NaN) on ours. HTA's defaults analyse rank 0 only; every call here passes all ranks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from parity_folders import FOLDERS

from htatui.analysis.core.scope import Scope
from htatui.analysis.views import annotations as user_annotations
from htatui.analysis.views import launch, membw, queue, steps
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

pytest.importorskip("hta", reason="HTA 0.6.1 not installed: pip install traceinsight==0.6.1 'pandas<3'")


# Thresholds for the blocked-on-full-queue check: HTA's default and a few that real traces hit.
BLOCKED_LIMITS = (1024, 1000, 100, 10, 2, 1)

Key = tuple[Any, ...]
Row = dict[str, Any]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _close(ours: Any, theirs: Any, absolute: float) -> bool:
    if _missing(theirs) or _missing(ours):
        return _missing(theirs) and _missing(ours)
    return abs(float(ours) - float(theirs)) <= max(absolute, 1e-4 * abs(float(theirs)))


def _compare(ours: dict[Key, Row], theirs: dict[Key, Row], columns: dict[str, str], absolute: float, what: str) -> None:
    """Same keys on both sides and every column (ours → theirs) within tolerance."""
    assert set(ours) == set(theirs), (
        f"{what}: keys differ; only ours {sorted(set(ours) - set(theirs), key=str)[:5]}, "
        f"only HTA {sorted(set(theirs) - set(ours), key=str)[:5]}"
    )
    problems = [
        f"{key}: {mine} {ours[key][mine]!r} vs HTA {hta} {theirs[key][hta]!r}"
        for key in ours
        for mine, hta in columns.items()
        if not _close(ours[key][mine], theirs[key][hta], absolute)
    ]
    assert not problems, f"{what}: {len(problems)} values differ:\n" + "\n".join(problems[:20])


def _describe_rows(frame: Any, names: list[str], ranks: dict[int, int]) -> dict[Key, Row]:
    """HTA's groupby(...).describe() frame (MultiIndex columns) → {index tuple: {stat: value}},
    with HTA's rank numbers mapped to htatui's."""
    if frame is None or len(frame) == 0:
        return {}
    flat = frame.copy()
    flat.columns = [stat for _, stat in flat.columns]
    flat = flat.reset_index()
    flat["rank"] = flat["rank"].map(ranks)
    return {
        tuple(int(r[n]) if n in ("rank", "stream") else r[n] for n in names): {
            k: (float(v) if k not in names else v) for k, v in r.items()
        }
        for r in flat.to_dict("records")
    }


class Pair:
    """HTA's TraceAnalysis of one folder, htatui's TraceSet of it, and HTA rank → htatui rank
    (they differ where the file names no rank: HTA says 0, htatui reads the file name)."""

    def __init__(self, analysis: Any, traces: TraceSet) -> None:
        self.analysis = analysis
        self.traces = traces
        self.hta_ranks = sorted(int(r) for r in analysis.t.get_all_traces())
        assert len(self.hta_ranks) == len(traces.rank_ids), f"HTA ranks {self.hta_ranks} vs {traces.rank_ids}"
        self.rank = dict(zip(self.hta_ranks, traces.rank_ids, strict=True))


@pytest.fixture(params=FOLDERS, ids=[f.replace("/", "-") for f in FOLDERS])
def pair(
    request: pytest.FixtureRequest, hta_analysis: Callable[[str], Any], load_shared: Callable[[str], TraceSet]
) -> Pair:
    return Pair(hta_analysis(request.param), load_shared(request.param))


def test_launch(pair: Pair) -> None:
    theirs_by_rank = pair.analysis.get_cuda_kernel_launch_stats(ranks=pair.hta_ranks, visualize=False)
    ours_frame = launch.compute(pair.traces, launch.LaunchOptions(scope=Scope(hta_compat=True)))
    for hta_rank, rank in pair.rank.items():
        theirs = theirs_by_rank[hta_rank].sort_values(["correlation", "cpu_duration", "gpu_duration", "launch_delay"])
        mine = ours_frame.filter(pl.col("rank") == rank).sort(
            "correlation", "cpu_duration_us", "gpu_duration_us", "launch_delay_us"
        )
        assert mine.height == len(theirs), f"rank {rank}: {mine.height} launches vs HTA {len(theirs)}"
        # Key by position in the sorted order (one correlation may hold several rows).
        ours_rows = {(i,): r for i, r in enumerate(mine.to_dicts())}
        their_rows = {(i,): r for i, r in enumerate(theirs.to_dict("records"))}
        _compare(
            ours_rows,
            their_rows,
            {
                "correlation": "correlation",
                "cpu_duration_us": "cpu_duration",
                "gpu_duration_us": "gpu_duration",
                "launch_delay_us": "launch_delay",
            },
            1.0,
            f"launch rank {rank}",
        )


def test_queue_summary(pair: Pair) -> None:
    summary = pair.analysis.get_queue_length_summary(ranks=pair.hta_ranks)
    theirs = _describe_rows(summary, ["rank", "stream"], pair.rank)
    frame = queue.compute(pair.traces, queue.QueueOptions(scope=Scope(hta_compat=True)))
    ours = {(r["rank"], r["stream"]): r for r in frame.to_dicts()}
    _compare(
        ours,
        theirs,
        {
            "count": "count",
            "mean": "mean",
            "std": "std",
            "min": "min",
            "p25": "25%",
            "p50": "50%",
            "p75": "75%",
            "max": "max",
        },
        1e-6,
        "queue summary",
    )


def test_queue_blocked(pair: Pair) -> None:
    """HTA reports one stream per rank (the last one that reached the limit); ours reports
    every stream, and the one HTA picked must agree."""
    series = pair.analysis.get_queue_length_time_series(ranks=pair.hta_ranks)
    for limit in BLOCKED_LIMITS:
        theirs = pair.analysis.get_time_spent_blocked_on_full_queue(series, max_queue_length=limit)
        ours = queue.blocked(pair.traces, queue.QueueOptions(scope=Scope(hta_compat=True), max_queue_length=limit))
        ours_rows = {(r["rank"], r["stream"]): r for r in ours.to_dicts()}
        for r in theirs.to_dict("records"):
            key = (pair.rank[int(r["rank"])], int(r["stream"]))
            assert key in ours_rows, f"limit {limit}: HTA reports {key}, we do not"
            mine = ours_rows[key]
            assert _close(mine["blocked_us"], r["duration_at_max_queue_length"], 1.0), (limit, key, mine, r)
            assert _close(mine["blocked_pct"], 100.0 * r["relative_duration_at_max_queue_length"], 1e-4), (
                limit,
                key,
            )
        # Streams HTA leaves out either never reached the limit or lost to a later stream.
        reported = {(pair.rank[int(r["rank"])], int(r["stream"])) for r in theirs.to_dict("records")}
        for (rank, stream), mine in ours_rows.items():
            if (rank, stream) not in reported and rank not in {k[0] for k in reported}:
                assert mine["blocked_us"] == 0.0, (limit, rank, stream, mine)


def test_membw_summary(pair: Pair) -> None:
    theirs = _describe_rows(pair.analysis.get_memory_bw_summary(ranks=pair.hta_ranks), ["rank", "name"], pair.rank)
    frame = membw.compute(pair.traces, membw.MemoryBandwidthOptions(scope=Scope(hta_compat=True)))
    ours = {(r["rank"], r["copy_kind"]): r for r in frame.to_dicts()}
    _compare(
        ours,
        theirs,
        {
            "count": "count",
            "mean_gbps": "mean",
            "std_gbps": "std",
            "min_gbps": "min",
            "p25_gbps": "25%",
            "p50_gbps": "50%",
            "p75_gbps": "75%",
            "max_gbps": "max",
        },
        1e-9,
        "memory bandwidth summary",
    )


@pytest.mark.parametrize("use_gpu", [True, False])
def test_annotations(pair: Pair, use_gpu: bool) -> None:
    theirs_frame = pair.analysis.get_gpu_user_annotation_breakdown(use_gpu_annotation=use_gpu, visualize=False)
    theirs = (
        {}
        if theirs_frame is None
        else {(pair.rank[int(r["rank"])], r["name"]): r for r in theirs_frame.to_dict("records")}
    )
    options = user_annotations.AnnotationOptions(scope=Scope(hta_compat=True), use_gpu_annotation=use_gpu)
    ours = {(r["rank"], r["name"]): r for r in user_annotations.compute(pair.traces, options).to_dicts()}
    _compare(ours, theirs, {"sum_us": "sum (us)", "mean_us": "mean (us)"}, 1.0, "annotations")


def test_profiler_steps(pair: Pair) -> None:
    theirs = [int(s) for s in pair.analysis.get_profiler_steps()]
    assert steps.profiler_steps(pair.traces, steps.StepsOptions(scope=Scope(hta_compat=True))) == theirs


def test_stragglers_trace_filter(hta_analysis: Callable[[str], Any], load_shared: Callable[[str], TraceSet]) -> None:
    analysis = hta_analysis("trace_filter")
    theirs = sorted(int(r) for r in analysis.get_potential_stragglers())
    frame = steps.stragglers(load_shared("trace_filter"), steps.StragglerOptions(scope=Scope(hta_compat=True))).frame
    assert frame.filter(pl.col("is_straggler"))["rank"].to_list() == theirs


# ---- stragglers on generated jobs (no shared trace has more than two ranks) -------------------

# All-reduce start offsets per step and rank (µs after the step start); every kernel ends at 600.
STARTS = {
    1: {0: 100, 1: 110, 2: 150, 3: 200, 4: 105},
    2: {0: 100, 1: 160, 2: 120, 3: 300, 4: 250},
    3: {0: 130, 1: 100, 2: 400, 3: 110, 4: 120},
    4: {0: 100, 1: 100, 2: 100, 3: 100, 4: 100},  # the last step: dropped
}
OLD_NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _event(cat: str, name: str, pid: int, tid: int, ts: float, dur: float, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _write_job(folder: Path) -> Path:
    """5 ranks, steps 1–4 of 1000 µs (HTA drops step 4); per step a cudaLaunchKernel at +10
    launches the all-reduce on stream 20 and a gemm on stream 7."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in STARTS[1]:
        events: list[dict[str, Any]] = []
        for k, starts in STARTS.items():
            s = 1000.0 * (k - 1)
            events += [
                _event("user_annotation", f"ProfilerStep#{k}", 100, 1, s, 1000, {}),
                _event("cuda_runtime", "cudaLaunchKernel", 100, 1, s + 5, 3, {"correlation": 10 * k}),
                _event("kernel", "gemm", rank, 7, s + 20, 50, {"stream": 7, "correlation": 10 * k}),
                _event("cuda_runtime", "cudaLaunchKernel", 100, 1, s + 10, 5, {"correlation": 10 * k + 1}),
                _event(
                    "kernel",
                    OLD_NCCL,
                    rank,
                    20,
                    s + starts[rank],
                    600 - starts[rank],
                    {"stream": 20, "correlation": 10 * k + 1},
                ),
            ]
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 5},
            "traceEvents": events,
        }
        (folder / f"rank-{rank}.json").write_text(json.dumps(doc, indent=1))
    return folder


@pytest.fixture(scope="module")
def straggler_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, TraceSet]:
    from hta.trace_analysis import TraceAnalysis

    folder = _write_job(tmp_path_factory.mktemp("stragglers"))
    return TraceAnalysis(trace_dir=str(folder)), load_traces([folder], use_cache=False, max_workers=1)


@pytest.mark.parametrize("num_candidates", [1, 2, 3])
@pytest.mark.parametrize("profiler_steps", [None, (2,), (1, 3)])
def test_stragglers_generated(
    straggler_job: tuple[Any, TraceSet], num_candidates: int, profiler_steps: tuple[int, ...] | None
) -> None:
    analysis, traces = straggler_job
    theirs = analysis.get_potential_stragglers(
        profiler_steps=None if profiler_steps is None else list(profiler_steps), num_candidates=num_candidates
    )
    for compat in (True, False):  # the old ncclKernel names: both modes agree with HTA
        options = steps.StragglerOptions(
            scope=Scope(hta_compat=compat), num_candidates=num_candidates, profiler_steps=profiler_steps
        )
        frame = steps.stragglers(traces, options).frame
        assert sorted(frame.filter(pl.col("is_straggler"))["rank"].to_list()) == sorted(int(r) for r in theirs)
