"""`report --view op-tree` over several ranks: built a rank at a time, numbered as the job's one tree."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, runtime, traces_of

from htatui.analysis.core.scope import Scope
from htatui.analysis.model import job_tree
from htatui.analysis.views import op_tree
from htatui.trace.model import TraceSet


def _job(tmp_path: Path) -> TraceSet:
    """Rank 0: A [0,10] launches k (3 µs); rank 1: B [0,10] launches k (4 µs); rank 2: C alone."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    return traces_of(
        tmp_path,
        [cpu_op("A", 0, 10), runtime("cudaLaunchKernel", 1, 2, 1), kernel("k", 5, 3, corr=1)],
        [cpu_op("B", 0, 10), runtime("cudaLaunchKernel", 1, 2, 1), kernel("k", 5, 4, corr=1)],
        [cpu_op("C", 0, 5)],
    )


def _rows(table: pl.DataFrame) -> list[tuple[object, ...]]:
    return table.select("rank", "node", "parent_node", "call_path", "gpu_total_us").rows()


def test_nodes_are_numbered_as_the_whole_jobs_tree(tmp_path: Path) -> None:
    """Host nodes of every rank first (A 0, its launch 1, B 2, its launch 3, C 4), then the device
    leaves (rank 0's k 5, rank 1's k 6); each rank depth first, its heaviest GPU child first."""
    traces = _job(tmp_path)
    table = op_tree.compute(traces, op_tree.OpTreeOptions())
    assert _rows(table) == [
        (0, 0, None, "A", 3.0),
        (0, 5, 0, "  k", 3.0),
        (0, 1, 0, "  cudaLaunchKernel", 0.0),
        (1, 2, None, "B", 4.0),
        (1, 6, 2, "  k", 4.0),
        (1, 3, 2, "  cudaLaunchKernel", 0.0),
        (2, 4, None, "C", 0.0),
    ]
    whole = op_tree.depth_first(op_tree.build(job_tree.tree(traces, op_tree.OpTreeOptions())))
    assert table.drop("call_path").equals(whole.drop("name").select(table.drop("call_path").columns))


def test_named_ranks_number_leaves_in_the_order_named(tmp_path: Path) -> None:
    """`--ranks 2,0`: host nodes by rank (A 0, launch 1, C 2), then the leaves as the ranks were named (k 3)."""
    traces = _job(tmp_path)
    options = op_tree.OpTreeOptions(scope=Scope(ranks=(2, 0)))
    table = op_tree.compute(traces, options)
    assert _rows(table) == [
        (0, 0, None, "A", 3.0),
        (0, 3, 0, "  k", 3.0),
        (0, 1, 0, "  cudaLaunchKernel", 0.0),
        (2, 2, None, "C", 0.0),
    ]
    whole = op_tree.depth_first(op_tree.build(job_tree.tree(traces, options)))
    assert table["node"].to_list() == whole["node"].to_list()


def test_the_job_tree_is_not_built(tmp_path: Path) -> None:
    """The table comes from each rank's tree: the whole job's (`job_tree.tree`, every rank's events) is never made."""
    traces = _job(tmp_path)
    op_tree.compute(traces, op_tree.OpTreeOptions())
    assert not [key for key in traces.derived if key and key[0] == "ops.tree"]


def test_a_held_job_tree_is_cut_by_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the ops table made the job's tree, the op tree cuts it a rank at a time instead of
    building each rank's again, and the table is the same."""
    fresh = op_tree.compute(_job(tmp_path / "fresh"), op_tree.OpTreeOptions())
    traces = _job(tmp_path / "held")
    job_tree.tree(traces, op_tree.OpTreeOptions())

    def built_again(*_: object) -> None:
        raise AssertionError("a rank's tree was built again")

    monkeypatch.setattr(job_tree, "rank_tree", built_again)
    assert op_tree.compute(traces, op_tree.OpTreeOptions()).equals(fresh)


def test_top_and_depth_keep_the_heaviest_children_down_to_a_level(tmp_path: Path) -> None:
    """Issue 38 #7: op-tree on 8 ranks printed 5,982 lines with no --top or --depth.

    One rank: P [0,100] holds A [0,30] (launching k1, 5 µs), B [40,70] (k2, 9 µs) and C [80,90]
    (no GPU work), A holds a1 [1,2]. --top 1: P's heaviest child by GPU total (B, then its launch and
    kernel, a leaf of B's, outweighs its launch call); --depth 1: P and its children A, B, C."""
    traces = traces_of(
        tmp_path,
        [
            cpu_op("P", 0, 100),
            cpu_op("A", 0, 30),
            cpu_op("a1", 1, 1),
            runtime("cudaLaunchKernel", 10, 2, 1),
            kernel("k1", 20, 5, corr=1),
            cpu_op("B", 40, 30),
            runtime("cudaLaunchKernel", 45, 2, 2),
            kernel("k2", 50, 9, corr=2),
            cpu_op("C", 80, 10),
        ],
    )

    def paths(**knobs: int | None) -> tuple[list[str], str | None]:
        found = op_tree.table(traces, op_tree.OpTreeOptions(**knobs))  # type: ignore[arg-type]
        return [path.strip() for path in found.frame["call_path"].to_list()], found.message

    every, message = paths()
    assert every[:2] == ["P", "B"] and "a1" in every and message is None
    top, message = paths(top_k=1)
    assert top == ["P", "B", "k2"]
    assert message == f"each node's 1 heaviest children: 3 of {len(every)} nodes (--top all --depth all: every one)"
    shallow, message = paths(max_depth=1)
    assert shallow == ["P", "B", "A", "C"]
    assert message is not None and message.startswith("down to depth 1: 4 of ")
