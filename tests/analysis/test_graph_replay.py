"""Graph replays with their ops from the capture trace (issue 37, item 2)."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from fixtures.generate import write_scenario
from fixtures.serving import CAPTURED
from htatui.analysis.model import graph_replay
from htatui.analysis.views import op_tree, ops
from htatui.analysis.views.ops import OpsOptions
from htatui.jobs.load import CAPTURES_ENV, load_traces


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serving")
    write_scenario("serving", root)
    return root


def test_the_capture_gives_replayed_kernels_their_ops(serving: Path) -> None:
    traces = load_traces([serving / "sglang"], use_cache=False, max_workers=1)
    assert [c.path.name for c in traces.captures] == ["bs_32_rank0.json.gz"]
    paired = graph_replay.replayed(traces, 0)
    # 4 replays × 4 kernels, each paired with its capture launch in order (GEMMs by occurrence).
    assert paired.height == 16
    first = paired.head(4)
    assert first["op"].to_list() == [op for _module, op, _dims, _launch, _kernel in CAPTURED]
    assert (
        first["stack"].to_list()[0]
        == "ProfilerStep#7 > capture_32_DECODE > Qwen3ForCausalLM_0 > QKVLinear_0 > aten::mm"
    )
    table = ops.compute(traces, OpsOptions())
    rows = {r["name"]: r for r in table.to_dicts()}
    # Steps 1-3: aten::mm twice a replay (2 × 150 µs), rmsnorm 20, silu_and_mul 30; no host time.
    assert (rows["aten::mm"]["count"], rows["aten::mm"]["gpu_self_us"], rows["aten::mm"]["cpu_total_us"]) == (
        6,
        900.0,
        0.0,
    )
    assert (rows["sgl_kernel::fused_add_rmsnorm"]["count"], rows["sgl_kernel::fused_add_rmsnorm"]["gpu_self_us"]) == (
        3,
        60.0,
    )
    assert (rows["sgl_kernel::silu_and_mul"]["count"], rows["sgl_kernel::silu_and_mul"]["gpu_self_us"]) == (3, 90.0)
    # The iteration that launched the graph keeps the rest: its total is unchanged (350 + the 4 µs copy).
    assert rows["step[DECODE bs=32]"]["gpu_total_us"] == 2 * 354.0 and rows["step[DECODE bs=32]"]["gpu_self_us"] == 0.0
    shapes = ops.compute(traces, OpsOptions(group_by="shape")).filter(pl.col("name") == "aten::mm")
    assert sorted(shapes.select("input_dims", "count", "gpu_self_us").rows()) == [
        ("[[32, 4096], [4096, 24576]]", 3, 450.0),
        ("[[32, 4096], [4096, 6144]]", 3, 450.0),
    ]
    # The performance model reads the captured shapes: 2·32·4096·24576 FLOPs a call.
    modelled = ops.compute(traces, OpsOptions(group_by="shape", flops=True)).filter(pl.col("name") == "aten::mm")
    assert sorted(modelled["gflop"].to_list()) == [pytest.approx(1.610612736), pytest.approx(6.442450944)]
    tree = op_tree.compute(traces, op_tree.OpTreeOptions())
    assert "  aten::mm" in tree["call_path"].to_list()
    assert traces.notes == (
        "rank 0: 16 of 16 graph-replayed GPU rows got their ops from the capture (bs_32_rank0.json.gz)",
    )


def test_without_a_capture_the_notes_say_which_kernels_came_from_graphs(serving: Path) -> None:
    traces = load_traces([serving / "vllm"], use_cache=False, max_workers=1)
    assert traces.captures == ()
    assert traces.notes == (
        "rank 0: 6 GPU rows ran in 3 CUDA/HIP graph launches; which op launched each is not in the trace: give the "
        "capture trace (--capture FILE, or a capture_traces/ folder beside the traces) to see them in ops, the op "
        "tree and the perf model",
    )


def test_capture_named_with_the_flag_or_beside_the_trace(
    serving: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(serving / "sglang" / "rank-0.json.gz", flat / "replay.json.gz")
    alone = load_traces([flat], use_cache=False, max_workers=1)
    assert alone.captures == () and "graph launches" in alone.notes[0]
    monkeypatch.setenv(CAPTURES_ENV, str(serving / "sglang" / "capture_traces" / "bs_32_rank0.json.gz"))
    named = load_traces([flat], use_cache=False, max_workers=1)
    assert graph_replay.replayed(named, 0).height == 16
    monkeypatch.delenv(CAPTURES_ENV)
    shutil.copy(serving / "sglang" / "capture_traces" / "bs_32_rank0.json.gz", flat / "graph_capture_rank_0.json.gz")
    beside = load_traces([flat], use_cache=False, max_workers=1)
    assert list(beside.ranks) == [0] and [c.path.name for c in beside.captures] == ["graph_capture_rank_0.json.gz"]


# ---- TraceLens's public inference traces ---------------------------------------------------
INFERENCE = "tests/traces/inference"
JOBS = {
    "sglang_decode": ("sglang_Qwen3-8B_decode.json.gz", "bs_32_rank0.json.gz"),
    "vllm_decode_full": ("graph_execution.json.gz", "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"),
}


def _captured_launch_counts(path: Path) -> Counter[str]:
    """Per op, how many kernel launches it made between the capture's Begin and End (raw JSON:
    the innermost cpu_op around each launch on its thread)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    begin = min(e["ts"] for e in events if e.get("name", "").endswith("StreamBeginCapture"))
    end = max(e["ts"] for e in events if e.get("name", "").endswith("StreamEndCapture"))
    ops_on: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ops_on.setdefault(e["tid"], []).append(e)
    counts: Counter[str] = Counter()
    for e in events:
        name = e.get("name", "")
        if e.get("cat") != "cuda_runtime" or "Launch" not in name or "Graph" in name or not begin <= e["ts"] <= end:
            continue
        around = [
            o for o in ops_on.get(e["tid"], []) if o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
        ]
        if around:
            counts[min(around, key=lambda o: o["dur"])["name"]] += 1
    return counts


@pytest.mark.parametrize("job", sorted(JOBS))
def test_tracelens_replay_gets_the_captures_ops(tracelens: Any, job: str) -> None:
    replay_name, capture_name = JOBS[job]
    replay = tracelens(f"{INFERENCE}/{job}/{replay_name}")
    capture = tracelens(f"{INFERENCE}/{job}/capture_traces/{capture_name}")
    traces = load_traces([replay.parent], use_cache=False, max_workers=1)
    assert [c.path.name for c in traces.captures] == [capture_name]
    paired = graph_replay.replayed(traces, 0)
    replayed_rows = graph_replay.graph_kernels(traces.ranks[0].events).height
    assert paired.height == replayed_rows  # every replayed kernel found its launch
    # Counts checked against the capture: each op's replayed kernels are its captured launches.
    assert Counter(paired["op"].to_list()) == _captured_launch_counts(capture)
    # And the op totals are TraceLens's (its perf_csvs/ops_summary.csv, direct kernel time).
    summary = csv.DictReader(tracelens(f"{INFERENCE}/{job}/perf_csvs/ops_summary.csv").read_text().splitlines())
    expected: dict[str, float] = {}
    for row in summary:
        expected[row["name"]] = expected.get(row["name"], 0.0) + float(row["total_direct_kernel_time_sum"])
    table = ops.compute(traces, OpsOptions())
    got = dict(zip(table["name"].to_list(), table["gpu_self_us"].to_list(), strict=True))
    top = {
        "sglang_decode": ["aten::mm", "aiter::add_rmsnorm", "sgl_kernel::silu_and_mul"],
        "vllm_decode_full": ["vllm::moe_forward", "aten::addmm", "SortTokens"],
    }[job]
    for name in top:
        assert got[name] == pytest.approx(expected[name], abs=0.02), name
    # Their shapes are the capture's.
    shaped = ops.compute(traces, OpsOptions(group_by="shape")).filter(pl.col("name") == top[1])
    assert shaped.height and "[]" not in shaped["input_dims"].to_list()
    assert sum(1 for n in traces.notes if "got their ops from the capture" in n) == 1
