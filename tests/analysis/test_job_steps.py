"""One scope across ranks (issue 35): a rank one step short, and ranks whose collective counts
differ in a process group's step.

Hand-built on `ranks_jobs.nccl_rank`: 3 ranks, steps 1-3 of 1000 µs at B = (n−1)·1000, each a gemm
[B+100, B+300) (B+600 on rank 1) and one all_reduce that starts when the gemm ends and ends at B+700.
"""

from __future__ import annotations

import copy
from pathlib import Path

import polars as pl
from kineto_util import runtime, traces_of
from ranks_jobs import nccl_rank

from htatui.analysis.core.describe import describe_scope
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.scope import RankSteps, Scope, Steps, choose_steps, common_steps, ragged
from htatui.analysis.health import capabilities, findings
from htatui.analysis.registry import BY_ID, frame_of, make_table
from htatui.analysis.views.ranks import meeting
from htatui.trace import TraceSet


def table(traces: TraceSet, view: str, name: str = "main", scope: Scope | None = None) -> tuple[pl.DataFrame, str]:
    chosen = BY_ID[view]
    options = chosen.options() if scope is None else chosen.options(scope=scope)
    frame, message = frame_of(make_table(chosen.table(name), traces, options))
    return frame, message or ""


def short_job(tmp_path: Path) -> TraceSet:
    """Rank 2 stops after step 2 (its last, cut short): the others count steps 1-2, it counts 1."""
    ranks = [nccl_rank(rank) for rank in range(3)]
    ranks[2] = [event for event in ranks[2] if event["ts"] < 2000]
    return traces_of(tmp_path, *ranks)


def test_steps_are_chosen_once_for_the_job(tmp_path: Path) -> None:
    traces = short_job(tmp_path)
    matrix, note = table(traces, "rank-steps")
    # Before: ranks 0 and 1 over steps 1-2, rank 2 over step 1 alone, under a header "steps 1-2".
    assert matrix.select("rank", "step").rows() == [(0, 1), (1, 1), (2, 1)]
    assert note == "rank 2 has no step 2 to count (the other ranks do): every rank is measured over step 1"
    scope_text = describe_scope(traces, CommonOptions())
    assert scope_text == "ranks all (3) · step 1 (last step 3 left out; step 2 left out: not every rank has it)"
    # The per-rank views count the same step on every rank: one 600 µs span of GPU work each.
    temporal, _ = table(traces, "temporal")
    assert temporal["span_us"].to_list() == [600.0, 600.0, 600.0]
    # The straggler (rank 1's slow gemm) is measured over the one step every rank has.
    stragglers, note = table(traces, "stragglers")
    assert stragglers.filter(pl.col("is_straggler"))["rank"].to_list() == [1]
    assert stragglers.filter(pl.col("rank") == 1)["steps"].to_list() == ["1"]
    assert note.startswith("rank 2 has no step 2 to count")


def test_named_steps_are_cut_to_the_ones_every_rank_has(tmp_path: Path) -> None:
    traces = short_job(tmp_path)
    matrix, note = table(traces, "rank-steps", scope=Scope(steps=Steps.parse("1-3")))
    assert sorted(set(matrix["step"].to_list())) == [1, 2]
    assert note == "rank 2 has no step 3 to count (the other ranks do): every rank is measured over steps 1-2"
    # Steps 1-2, which every rank has: nothing is cut, nothing said.
    matrix, note = table(traces, "rank-steps", scope=Scope(steps=Steps.parse("1-2")))
    assert sorted(set(matrix["step"].to_list())) == [1, 2] and note == ""


def test_compat_mode_keeps_htas_per_rank_steps(tmp_path: Path) -> None:
    traces = short_job(tmp_path)
    matrix, _ = table(traces, "temporal", scope=Scope(hta_compat=True))
    # HTA 0.6.1 cuts each rank at its own last step: rank 2 counts step 1, the others 1-2.
    assert matrix["span_us"].to_list() == [1600.0, 1600.0, 600.0]


def test_check_names_the_rank_one_step_short(tmp_path: Path) -> None:
    traces = short_job(tmp_path)
    found = findings(traces, capabilities(traces, read_shapes=False), thorough=False)
    assert found.select("rank", "kind").rows() == [(2, "ragged steps")]
    assert found["message"][0] == (
        "has no step 2 to count while other ranks do (its steps 1-2): the views measure every rank over steps 1"
    )


def test_the_common_steps_by_hand() -> None:
    mine = choose_steps([1, 2, 3, 4], Steps())
    short = choose_steps([1, 2, 3], Steps())
    assert (mine.used, short.used) == ((1, 2, 3), (1, 2))
    assert common_steps([mine, short]) == (1, 2)
    assert common_steps([mine, mine]) is None  # equal choices: nothing to cut
    assert common_steps([mine, choose_steps([7, 8, 9], Steps())]) is None  # numbered apart: nothing shared
    assert common_steps([mine, choose_steps([], Steps())]) is None  # a stepless rank is left to its own finding
    cut = choose_steps([1, 2, 3, 4], Steps(), job_steps=(1, 2))
    assert (cut.used, cut.not_common, cut.left_out, cut.own) == ((1, 2), (3,), (3, 4), (1, 2, 3))
    assert ragged({0: cut, 1: short}) == {1: (3,)}
    assert ragged({0: RankSteps((), (), (), True), 1: short}) == {}


def extra_allreduce_job(tmp_path: Path) -> TraceSet:
    """nccl_rank's job, but rank 1 makes a second all_reduce in step 1 ([710, 730), launched at 30)."""
    ranks = [nccl_rank(rank) for rank in range(3)]
    first = next(e for e in ranks[1] if e["name"].startswith("ncclDevKernel") and e["ts"] < 1000)
    second = copy.deepcopy(first)
    second.update(ts=710.0, dur=20.0)
    second["args"]["correlation"] = 99
    ranks[1] += [second, runtime("cudaLaunchKernel", 30, 5, 99)]
    return traces_of(tmp_path, *ranks)


def test_counts_that_differ_are_left_out_of_the_pairing(tmp_path: Path) -> None:
    traces = extra_allreduce_job(tmp_path)
    collectives, note = table(traces, "collectives")
    (row,) = collectives.to_dicts()
    # Step 1: ranks 0 and 2 meet (rank 1's two calls are left out), arriving at 300 together (skew 0);
    # step 2: all three, rank 1 at 1600 and the others at 1300 (skew 300). Before: rank 1's second
    # call was paired with nothing and its first with the others', 2 calls a rank in step 1.
    assert (row["calls"], row["ranks"], row["skew_max_us"], row["skew_mean_us"]) == (2, 3, 300.0, 150.0)
    said = "collective counts differ: process group '0', step 1: rank 1 made 2 calls where the others made 1"
    assert note.startswith(said + ": left out of the pairing")
    stragglers, note = table(traces, "stragglers")
    assert stragglers.filter(pl.col("rank") == 1)["steps"].to_list() == ["2"]
    assert note.startswith(said)
    # The job's critical path pairs the same calls: it never meets at step 1's all_reduce with rank 1.
    found = findings(traces, capabilities(traces, read_shapes=False))
    assert found.filter(pl.col("kind") == "collective counts").select("rank").to_series().to_list() == [1]


def test_mismatched_counts_by_hand() -> None:
    calls = pl.DataFrame(
        {
            "rank": [0, 1, 1, 2, 0, 1, 0, 1],
            "pg": ["a", "a", "a", "a", "a", "a", "b", "b"],
            "step": [1, 1, 1, 1, 2, 2, 1, 1],
        },
        schema={"rank": pl.Int32, "pg": pl.Utf8, "step": pl.Int64},
    )
    found = meeting.mismatched_counts(calls)
    # Group a, step 1: 1, 2, 1 → rank 1 is off the usual 1. Step 2: rank 2 made none (a member of a).
    # Group b, step 1: 1 and 1: fine.
    assert found.rows() == [(1, "a", 1, 2, 1), (2, "a", 2, 0, 1)]
    assert meeting.without_mismatched(calls, found).rows() == [
        (0, "a", 1),
        (2, "a", 1),
        (0, "a", 2),
        (1, "a", 2),
        (0, "b", 1),
        (1, "b", 1),
    ]
    tie = pl.DataFrame({"rank": [0, 1, 1], "pg": ["a"] * 3, "step": [1, 1, 1]}, schema=calls.schema)
    assert meeting.mismatched_counts(tie).select("rank", "calls", "usual").rows() == [(0, 1, None), (1, 2, None)]
