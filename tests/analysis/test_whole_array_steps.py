"""The memory-light whole-array steps give what the plain loops give: the nesting search over
block maxima (`op_nesting.previous_reaching`) and the call tree found level by level
(`op_tree.build`), on random inputs checked against a loop over every row."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from htatui.analysis.model import op_nesting
from htatui.analysis.model.op_events import EVENT_SCHEMA, WORK_SCHEMA, OpEvents
from htatui.analysis.views import op_tree


@pytest.mark.parametrize("seed", range(4))
def test_previous_reaching_is_the_latest_earlier_row_that_reaches(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(1, 200))
        end = rng.integers(0, 40, n)
        need = rng.integers(0, 45, n)
        strict = rng.random(n) < 0.5
        segment = np.maximum.accumulate(np.where(rng.random(n) < 0.05, np.arange(n), 0))
        expected = []
        for i in range(n):
            found = next(
                (p for p in range(i - 1, -1, -1) if (end[p] > need[i] if strict[i] else end[p] >= need[i])), -1
            )
            expected.append(found if found >= segment[i] else -1)
        assert op_nesting.previous_reaching(segment, end, need, strict).tolist() == expected


def _loop_tree(events: pl.DataFrame, work: pl.DataFrame) -> tuple[list[int], list[int | None], list[int], list[str]]:
    """Nodes as a loop over every row makes them: (event nodes, node parents, leaf nodes, node names)."""
    node_of: dict[tuple[int, int | None, str, str], int] = {}
    parents: list[int | None] = []
    names: list[str] = []
    event_node: dict[tuple[int, int], int] = {}

    def node_for(rank: int, parent: int | None, name: str, kind: str) -> int:
        key = (rank, parent, name, kind)
        if key not in node_of:
            node_of[key] = len(parents)
            parents.append(parent)
            names.append(name)
        return node_of[key]

    assigned = []
    for rank, pos, parent, name, kind in events.select("rank", "pos", "parent", "name", "kind").iter_rows():
        node = node_for(rank, None if parent is None else event_node[(rank, parent)], name, kind)
        event_node[(rank, pos)] = node
        assigned.append(node)
    leaves = [
        node_for(rank, event_node[(rank, owner)], name, kind)
        for rank, owner, name, kind in work.select("rank", "owner", "name", "kind").iter_rows()
        if owner is not None and kind != "gpu-annotation"
    ]
    return assigned, parents, leaves, names


def _random_tree(rng: np.random.Generator) -> OpEvents:
    rows: list[dict[str, object]] = []
    work: list[dict[str, object]] = []
    for rank in (0, 1):
        depths: list[int] = []
        for pos in range(int(rng.integers(1, 60))):
            parent = int(rng.integers(-1, pos)) if pos else -1
            depth = 0 if parent < 0 else depths[parent] + 1
            depths.append(depth)
            rows.append(
                {
                    "rank": rank,
                    "pos": pos,
                    "parent": None if parent < 0 else parent,
                    "depth": depth,
                    "index": pos,
                    "name": str(rng.choice(["a", "b", "c"])),
                    "kind": str(rng.choice(["op", "annotation"])),
                    "ts": 0.0,
                    "dur": 1.0,
                    "cpu_total_us": float(rng.integers(0, 9)),
                    "cpu_self_us": 1.0,
                    "gpu_self_us": 0.0,
                    "gpu_total_us": 0.0,
                }
            )
        for index in range(int(rng.integers(0, 30))):
            owner = int(rng.integers(-1, len(depths)))
            work.append(
                {
                    "rank": rank,
                    "index": 1000 + index,
                    "name": str(rng.choice(["k1", "k2", "a"])),
                    "kind": str(rng.choice(["kernel", "memcpy", "gpu-annotation", "op"])),
                    "dur": float(rng.integers(1, 5)),
                    "bytes": None,
                    "owner": None if owner < 0 else owner,
                }
            )
    return OpEvents(pl.DataFrame(rows, schema=EVENT_SCHEMA), pl.DataFrame(work, schema=WORK_SCHEMA))


@pytest.mark.parametrize("seed", range(6))
def test_call_tree_nodes_are_the_loops_nodes(seed: int) -> None:
    tree = _random_tree(np.random.default_rng(seed))
    assigned, parents, leaves, names = _loop_tree(tree.events, tree.work)
    nodes = op_tree.build(tree)
    assert nodes["node"].to_list() == list(range(len(parents)))
    assert nodes["parent_node"].to_list() == parents
    assert nodes["name"].to_list() == names
    # Each node's calls: its events and leaves (integers, so the sums are exact).
    calls = np.bincount(np.array(assigned + leaves, dtype=np.int64), minlength=len(parents))
    assert nodes["count"].to_list() == calls.tolist()
    cpu = np.bincount(np.array(assigned), weights=tree.events["cpu_total_us"].to_numpy(), minlength=len(parents))
    assert nodes["cpu_total_us"].to_list() == cpu.tolist()
