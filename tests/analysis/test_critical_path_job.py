"""The job's critical path: one meeting node per collective call, solved as the pairwise graph it stands for.

The reference is the graph the meeting nodes replace (an edge from every rank's start to every
other rank's end, in the order `join_ranks` used to add them), solved by the same longest-path
code with no meeting nodes: the path (its length, its events in order, each step's kind, weight
and charge) must be the same, ties broken the same way.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from kineto_util import meeting_rank, traces_of

from htatui.analysis.core.scope import Scope
from htatui.analysis.views import critical_path as cp
from htatui.analysis.views.critical_path.graph import COLLECTIVE, Edges
from htatui.analysis.views.critical_path.longest import longest_path
from htatui.analysis.views.critical_path.path import RankGraph, path_frame
from htatui.jobs.load import load_traces


def pairwise(g: RankGraph) -> RankGraph:
    """The graph without meeting nodes: each meeting's edge out to a rank's end becomes an edge
    from every other rank's start (ranks by their ends, then by their starts: the old order)."""
    src, dst = np.asarray(g.edges.src, np.int64), np.asarray(g.edges.dst, np.int64)
    real = len(g.nodes.ts)
    plain = np.flatnonzero((src < real) & (dst < real))
    edges = Edges()
    for i in plain.tolist():
        edges.add(int(src[i]), int(dst[i]), g.edges.kind[i], g.edges.event[i], g.edges.zero[i])
    weight = g.weight[plain].tolist()
    for meeting in range(real, g.node_count):
        starts = src[dst == meeting].tolist()
        outs = np.flatnonzero(src == meeting).tolist()
        for r, out in enumerate(outs):
            for q, start in enumerate(starts):
                if q != r:
                    edges.add(start, int(dst[out]), COLLECTIVE, g.edges.event[out])
                    weight.append(float(g.weight[out]))
    return RankGraph(g.window, g.nodes, edges.arrays(), np.asarray(weight))


def _joined(traces: Any, hta_compat: bool = False) -> RankGraph:
    solved = cp._job_solved(traces, cp.CriticalPathOptions(scope=Scope(hta_compat=hta_compat)))
    assert solved.graph is not None, solved.table.message
    return solved.graph


def _rank_edges(traces: Any) -> int:
    total = 0
    for rank in traces.ranks:
        g, _ = cp.rank_graph(traces, cp.CriticalPathOptions(rank=rank))
        assert g is not None
        total += len(g.edges.src)
    return total


def test_each_call_meets_at_one_node_two_edges_ameeting_rank(tmp_path: Path) -> None:
    """4 ranks × 2 all-reduces: 2 meeting nodes, 2 × 4 edges each (16, where every start to every
    other end was 2 × 4 × 3 = 24); the ranks' own edges unchanged."""
    traces = traces_of(tmp_path, meeting_rank(100), meeting_rank(300), meeting_rank(5000), meeting_rank(200))
    g = _joined(traces)
    kind = np.asarray(g.edges.kind)
    assert g.meetings == 2
    assert int((kind == COLLECTIVE).sum()) == 16
    assert len(kind) == _rank_edges(traces) + 16
    assert int((np.asarray(pairwise(g).edges.kind) == COLLECTIVE).sum()) == 24


def test_job_path_goes_through_the_last_arrival(tmp_path: Path) -> None:
    """Rank 2 arrives last (5000): its work to the launch 4990 → the launch (0: the stream's queue
    is not empty, a causal edge) → the first all-reduce's transfer 100 (5100 − 5000), reached
    from rank 2's start through the meeting, on rank 0 (the first rank among equals) → kernel to
    kernel 0 → the second all-reduce 100 (every rank arrives at 5100: its own span wins the tie)
    → sync and dependency 0 → after 10 = 5200; the same path as the pairwise graph's."""
    traces = traces_of(tmp_path, meeting_rank(100), meeting_rank(300), meeting_rank(5000), meeting_rank(200))
    g = _joined(traces)
    path = cp.job_path(traces, cp.CriticalPathOptions()).frame
    assert path["duration_us"].to_list() == [4990, 0, 100, 0, 100, 0, 0, 10]
    assert path["rank"].to_list() == [2, 2, 0, 0, 0, 0, 0, 0]
    crossing = path.filter(pl.col("edge_type") == "critical_path_collective")
    assert crossing.select("start_us", "end_us", "duration_us").rows() == [(5000, 5100, 100)]
    assert path.equals(path_frame(pairwise(g), False, ()))


@pytest.mark.parametrize("hta_compat", [False, True])
def test_identical_ranks_break_ties_as_the_pairwise_graph(tmp_path: Path, hta_compat: bool) -> None:
    """Every rank the same: every path is as long as every other; the one chosen is the pairwise graph's."""
    traces = traces_of(tmp_path, *[meeting_rank(300) for _ in range(5)])
    g = _joined(traces, hta_compat)
    assert g.meetings == 2
    path = path_frame(g, hta_compat, ())
    assert path.height > 0
    assert path.equals(path_frame(pairwise(g), hta_compat, ()))


Edge = tuple[int, int, float]
Call = list[tuple[int, int, float]]


def _random_job(seed: int) -> tuple[int, list[Edge], list[Call]]:
    """Ranks of forward edges (integer times, weights 0–3 so that paths tie) and calls across them:
    each rank's start before the call's middle, its end after, its own start → end edge weighing
    its transfer. Returns the node count, the ranks' edges and the calls (start, end, transfer)."""
    rnd = random.Random(seed)
    ranks, per_rank = rnd.randint(2, 5), rnd.randint(4, 12)
    times = [sorted(rnd.sample(range(60), per_rank)) for _ in range(ranks)]
    edges: list[Edge] = []
    for r in range(ranks):
        base = r * per_rank
        edges += [(base + i, base + i + 1, rnd.randint(0, 2)) for i in range(per_rank - 1) if rnd.random() < 0.8]
        for _ in range(per_rank // 2):
            a, b = sorted(rnd.sample(range(per_rank), 2))
            edges.append((base + a, base + b, rnd.randint(0, 3)))
    calls: list[Call] = []
    used: set[int] = set()
    for _ in range(rnd.randint(1, 3)):
        middle = rnd.randint(10, 50)
        members = []
        for r in range(ranks):
            free = [r * per_rank + i for i in range(per_rank) if r * per_rank + i not in used]
            before = [v for v in free if times[r][v % per_rank] < middle]
            after = [v for v in free if times[r][v % per_rank] >= middle]
            if before and after and rnd.random() < 0.9:
                start, end = rnd.choice(before), rnd.choice(after)
                used.update((start, end))
                members.append((start, end, float(rnd.randint(0, 2))))
        if len(members) >= 2:
            calls.append(members)
    edges += [member for members in calls for member in members]
    return ranks * per_rank, edges, calls


def _solve(n: int, edges: list[Edge], meetings: int = 0) -> tuple[Any, list[float]]:
    src, dst, weight = (np.asarray(column) for column in zip(*edges, strict=True))
    return longest_path(n, src, dst, weight.astype(np.float64), meetings), [e[2] for e in edges]


def test_meeting_nodes_solve_as_the_pairwise_graph_on_random_jobs() -> None:
    """300 random jobs with many equal paths: the same length, nodes and step weights either way."""
    for seed in range(300):
        n, edges, calls = _random_job(seed)
        pairs, meets = list(edges), list(edges)
        for k, members in enumerate(calls):
            for r, (_, end, transfer) in enumerate(members):
                pairs += [(start, end, transfer) for q, (start, _, _) in enumerate(members) if q != r]
            meets += [(start, n + k, 0.0) for start, _, _ in members]
            meets += [(n + k, end, transfer) for _, end, transfer in members]
        old, old_w = _solve(n, pairs)
        new, new_w = _solve(n + len(calls), meets, len(calls))
        assert new.length == old.length, seed
        assert new.nodes.tolist() == old.nodes.tolist(), seed
        assert [new_w[e] for e in new.edges] == [old_w[e] for e in old.edges], seed


@pytest.mark.parametrize("hta_compat", [False, True])
def test_shared_nccl_job_path_is_the_pairwise_graphs(load_shared: Any, hta_compat: bool) -> None:
    """trace_filter (2 real ranks, NCCL kernels): 5 calls meet, and the path is unchanged."""
    traces = load_shared("trace_filter")
    g = _joined(traces, hta_compat)
    assert g.meetings == 5
    assert int((np.asarray(g.edges.kind) == COLLECTIVE).sum()) == 5 * 2 * 2
    path = cp.job_path(traces, cp.CriticalPathOptions(scope=Scope(hta_compat=hta_compat))).frame
    assert path.height > 0
    assert path.equals(path_frame(pairwise(g), hta_compat, ()))


def test_unread_ranks_are_read_one_at_a_time(tmp_path: Path) -> None:
    """A cached folder's ranks are read on demand: the job's path reads each and drops it again,
    and the path is the one of the ranks loaded whole."""
    loaded = traces_of(tmp_path, meeting_rank(100), meeting_rank(300), meeting_rank(5000), meeting_rank(200))
    load_traces([tmp_path], max_workers=1)  # parsed and cached
    cached = load_traces([tmp_path], max_workers=1)
    assert not any(rank.loaded for rank in cached.ranks.values())
    path = cp.job_path(cached, cp.CriticalPathOptions()).frame
    assert not any(rank.loaded for rank in cached.ranks.values())
    assert path.equals(cp.job_path(loaded, cp.CriticalPathOptions()).frame)
