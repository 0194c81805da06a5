"""The job's critical path solved by connected pieces (`pieces.py`).

The reference is the whole job graph solved at once (every rank's part joined in one graph, as
`join_ranks` did before): the path, the what-if tables and the straggler table must be the same,
ties broken the same way, whether or not ranks meet.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from kineto_util import Event, context_sync, cpu_op, kernel, runtime, traces_of

from htatui.analysis.core.prepare import chosen_ranks
from htatui.analysis.core.scope import Scope
from htatui.analysis.views import critical_path as cp
from htatui.analysis.views.critical_path.job import join_ranks, matched_calls, piece_calls
from htatui.analysis.views.critical_path.longest import longest_path
from htatui.analysis.views.critical_path.path import RankGraph, path_frame
from htatui.analysis.views.critical_path.pieces import JobSolution, standing
from htatui.analysis.views.critical_path.whatif import rank_what_if, what_if

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def _gloo_rank(chain: list[float]) -> list[Event]:
    """A rank whose collective is gloo's: a `user_annotation` range (no node in the graph) around
    CPU ops `chain` back to back from 0; `tail` [100, 110] after it."""
    events = [cpu_op("gloo:all_reduce", 0, 99, cat="user_annotation")]
    at = 0.0
    for i, dur in enumerate(chain):
        events.append(cpu_op(f"op{i}", at, dur))
        at += dur
    events.append(cpu_op("tail", 100, 10))
    return events


def _nccl_rank(arrival: float) -> list[Event]:
    """`work` [0, arrival] launches an all-reduce running to 5100; the host syncs to 5104."""
    return [
        cpu_op("work", 0, arrival),
        runtime("cudaLaunchKernel", arrival - 10, 5, 1),
        kernel(ALL_REDUCE, arrival, 5100 - arrival, corr=1),
        runtime("cudaDeviceSynchronize", arrival + 1, 5103 - arrival, 2),
        context_sync(5100, 4, 2),
    ]


def _whole(traces: Any, options: cp.CriticalPathOptions) -> RankGraph:
    """The job's graph in one piece: every rank's part joined at once."""
    build = cp._part_builder(traces, options, None)
    parts = [part for rank in chosen_ranks(traces, options) if (part := build(rank)) is not None]
    matched = matched_calls([part.calls for part in parts])
    heights = [part.graph.window.events.height for part in parts]
    return join_ranks(parts, piece_calls(matched, list(range(len(parts))), heights))


def _assert_as_whole(traces: Any, hta_compat: bool) -> JobSolution:
    """The job's path, what-if and straggler tables equal the whole graph's."""
    options = cp.CriticalPathOptions(scope=Scope(hta_compat=hta_compat))
    solved = cp._job_solved(traces, options)
    whole = _whole(traces, options)
    path = path_frame(whole, hta_compat, ())
    assert path.height > 0
    assert solved.table.frame.equals(path)
    top = cp.by_event(path).unique(["rank", "index"], keep="first", maintain_order=True)
    assert cp.hta_job_what_if(traces, options).frame.equals(what_if(whole, top, 50.0, cp.WHAT_IF_EVENTS))
    assert cp.hta_straggler_what_if(traces, options).frame.equals(rank_what_if(whole))
    return solved


@pytest.mark.parametrize("hta_compat", [False, True])
def test_two_identical_unjoined_ranks_pick_the_first(tmp_path: Path, hta_compat: bool) -> None:
    """Two gloo ranks, the same: two pieces with equal paths (10 + 20 + 30 + 10 after a wait);
    the whole graph picks rank 0's, and so do the pieces."""
    traces = traces_of(tmp_path, _gloo_rank([10, 20, 30]), _gloo_rank([10, 20, 30]))
    solved = _assert_as_whole(traces, hta_compat)
    assert solved.pieces is not None
    assert solved.pieces.pieces == ((0,), (1,))
    assert solved.pieces.lengths[0] == solved.pieces.lengths[1]
    assert set(solved.table.frame["rank"].to_list()) == {0}


def test_equal_paths_are_chosen_by_the_whole_graphs_order(tmp_path: Path) -> None:
    """Three gloo ranks with paths of equal length: rank 0 gets there in three ops, rank 1 in one
    (an earlier generation of networkx's order: it is the whole graph's pick although rank 0
    comes first), rank 2 in one too (same generation as rank 1, later root: not chosen)."""
    traces = traces_of(tmp_path, _gloo_rank([20, 20, 20]), _gloo_rank([60]), _gloo_rank([60]), _gloo_rank([50]))
    solved = _assert_as_whole(traces, False)
    assert solved.pieces is not None
    assert solved.pieces.pieces == ((0,), (1,), (2,), (3,))
    lengths = solved.pieces.lengths
    assert lengths[0] == lengths[1] == lengths[2] > lengths[3]
    assert set(solved.table.frame["rank"].to_list()) == {1}


def test_joined_ranks_stay_one_piece_and_a_gloo_rank_is_another(tmp_path: Path) -> None:
    """Two NCCL ranks meet at their all-reduce: one piece; a gloo rank beside them is a piece
    alone; the tables are the whole graph's."""
    (tmp_path / "nccl").mkdir()
    (tmp_path / "mixed").mkdir()
    traces = traces_of(tmp_path / "nccl", _nccl_rank(100), _nccl_rank(300))
    solved = cp._job_solved(traces, cp.CriticalPathOptions())
    assert solved.pieces is not None and solved.pieces.pieces == ((0, 1),)
    assert solved.pieces.graph.meetings == 1
    mixed = traces_of(tmp_path / "mixed", _nccl_rank(100), _nccl_rank(300), _gloo_rank([7000]))
    solved = _assert_as_whole(mixed, False)
    assert solved.pieces is not None
    assert solved.pieces.pieces == ((0, 1), (2,))
    assert set(solved.table.frame["rank"].to_list()) == {2}
    # The gloo rank's path is the job's: its own events' what-ifs, the NCCL piece's length beside.
    assert solved.pieces.others_us() == solved.pieces.lengths[0]


Edge = tuple[int, int, float]


def _random_ranks(seed: int) -> tuple[list[int], list[list[Edge]], list[list[tuple[int, int, int, float]]], list[int]]:
    """Ranks of forward edges (weights 0–3, so that paths tie), each rank in one of up to three
    groups; calls across a group's ranks (rank, start, end, transfer: the start before the call's
    time, the end after it; each rank's own start → end edge added to its edges). Returns each
    rank's node count, edges (rank's own numbering), the calls in order, and each rank's group."""
    rnd = random.Random(seed)
    ranks = rnd.randint(2, 6)
    sizes = [rnd.randint(1, 8) for _ in range(ranks)]
    group = [rnd.randrange(3) for _ in range(ranks)]
    times = [sorted(rnd.sample(range(60), size)) for size in sizes]
    edges: list[list[Edge]] = []
    for size in sizes:
        own = [(i, i + 1, float(rnd.randint(0, 2))) for i in range(size - 1) if rnd.random() < 0.7]
        for _ in range(size // 2):
            a, b = sorted(rnd.sample(range(size), 2))
            own.append((a, b, float(rnd.randint(0, 3))))
        edges.append(own)
    calls: list[list[tuple[int, int, int, float]]] = []
    used: set[tuple[int, int]] = set()
    for _ in range(rnd.randint(0, 4)):
        middle, chosen = rnd.randint(10, 50), rnd.randrange(3)
        members = []
        for r in range(ranks):
            free = [i for i in range(sizes[r]) if (r, i) not in used]
            before = [i for i in free if times[r][i] < middle]
            after = [i for i in free if times[r][i] >= middle]
            if group[r] == chosen and before and after and rnd.random() < 0.9:
                start, end = rnd.choice(before), rnd.choice(after)
                used.update({(r, start), (r, end)})
                members.append((r, start, end, float(rnd.randint(0, 2))))
                edges[r].append((start, end, members[-1][3]))
        if len(members) >= 2:
            calls.append(members)
    return sizes, edges, calls, group


def _graph(members: list[int], sizes: list[int], edges: list[list[Edge]], calls: list[list[Any]]) -> Any:
    """The graph of `members`' ranks (in order) and the calls among them: nodes rank by rank,
    then one meeting node a call; each rank's edges, then each meeting's in and out."""
    offset = dict(zip(members, np.cumsum([0] + [sizes[r] for r in members]).tolist(), strict=False))
    real = sum(sizes[r] for r in members)
    flat = [(offset[r] + a, offset[r] + b, w) for r in members for a, b, w in edges[r]]
    mine = [call for call in calls if call[0][0] in offset]
    for k, call in enumerate(mine):
        flat += [(offset[r] + start, real + k, 0.0) for r, start, _, _ in call]
        flat += [(real + k, offset[r] + end, transfer) for r, _, end, transfer in call]
    src, dst, weight = (np.asarray(column) for column in zip(*flat, strict=True)) if flat else ([],) * 3
    n = real + len(mine)
    found = longest_path(
        n, np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(weight, float), len(mine), True
    )
    where = [(r, i) for r in members for i in range(sizes[r])]
    return found, [where[v] for v in found.nodes.tolist()]


def test_pieces_pick_the_whole_graphs_path_on_random_jobs() -> None:
    """400 random jobs of ranks in up to three groups (calls only within a group), many paths
    equal: the longest piece, ties to the one whose last node comes first in the whole graph's
    order (`standing`), has the whole graph's path: its length and its nodes."""
    for seed in range(400):
        sizes, edges, calls, group = _random_ranks(seed)
        whole, whole_nodes = _graph(list(range(len(sizes))), sizes, edges, calls)
        best = None
        for g in sorted(set(group)):
            members = [r for r in range(len(sizes)) if group[r] == g]
            found, nodes = _graph(members, sizes, edges, calls)
            key = (-found.length, standing(found, members, sizes))
            if best is None or key < best[0]:
                best = (key, found, nodes)
        assert best is not None
        assert best[1].length == whole.length, seed
        assert best[2] == whole_nodes, seed


def test_pieces_of_a_folder_read_from_the_cache_are_the_same(tmp_path: Path) -> None:
    """Ranks read on demand from the cache (each dropped again; rank 1, slower than the median
    and not on the job's path, read again for the straggler table): the same tables as the ranks
    loaded whole."""
    from htatui.jobs.load import load_traces

    loaded = traces_of(tmp_path, _gloo_rank([30, 30]), _gloo_rank([20, 25]), _gloo_rank([10]), _gloo_rank([5]))
    load_traces([tmp_path], max_workers=1)
    cached = load_traces([tmp_path], max_workers=1)
    options = cp.CriticalPathOptions()
    for table in (cp.job_path, cp.hta_job_what_if, cp.hta_straggler_what_if):
        found = table(cached, options).frame
        assert found.height > 0
        assert found.equals(table(loaded, options).frame)
    assert not any(rank.loaded for rank in cached.ranks.values())
    assert pl.Series(cp.hta_straggler_what_if(cached, options).frame["rank"]).to_list() == [0, 1, 2, 3]
    _assert_as_whole(loaded, False)
