"""The longest path of a DAG given as integer edge arrays, with networkx's choices among equal paths.

Nodes are visited in networkx's topological order (generations of zero in-degree, children in the
order their edges were added); each takes its best predecessor (the first added among equals) unless
every way in is negative, and the path ends at the first node of greatest length in that order.
The same answer `networkx.dag_longest_path` gives, without the graph objects.

A graph may end with *meeting nodes* (a job's collective calls, `job.py`): a meeting node's i-th
edge in and i-th edge out belong to one rank's call (its start, its end), and it stands for an edge
from every rank's start to every other rank's end, each rank's own start → end being an edge of
its own. It is visited as that pairwise graph would be (the same order, so the same path among
equals) and never ends a path; the path's nodes and edges leave it out (`Path`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Numbers = npt.NDArray[np.signedinteger[Any]]
"""Node numbers in any integer width (a job's graph keeps int32)."""
Floats = npt.NDArray[np.float64]


class CycleError(ValueError):
    """The graph has a cycle: no longest path."""


@dataclass(frozen=True)
class Path:
    """The path's nodes in order, its edges (positions in the edge arrays) and its length.

    `edges[i]` is the edge that reaches `nodes[i + 1]` from `nodes[i]`; a step through a meeting
    node is one step, charged to the meeting's edge out (the edge in weighs nothing).
    """

    nodes: Ints
    edges: Ints
    length: float
    generation: int = -1
    """With `placed`: the generation of the path's last node in the topological order (module
    docstring), and the first node of generation 0 it descends from (`topological_order`'s
    `roots`): where the last node stands in the order of a graph this one is a piece of
    (`job.py`'s connected pieces)."""
    root: int = -1


@dataclass
class _Meetings:
    """Per meeting node: its ranks' start and end nodes (paired by position), the starts not yet
    visited, and which ends have their own start → end edge."""

    starts: list[list[int]]
    ends: list[list[int]]
    waiting: list[int]
    direct: list[list[bool]]
    counted: list[list[bool]]


def _meetings(real: int, count: int, src: Numbers, dst: Numbers) -> _Meetings:
    """The `count` meeting nodes (numbered from `real`) as pairs of edges; ValueError when they do not pair up."""
    if np.any((src >= real) & (dst >= real)):
        raise ValueError("an edge joins two meeting nodes")
    into, out = dst >= real, src >= real
    by_in = np.flatnonzero(into)[np.argsort(dst[into], kind="stable")]
    by_out = np.flatnonzero(out)[np.argsort(src[out], kind="stable")]
    n_in = np.bincount(dst[into] - real, minlength=count)
    n_out = np.bincount(src[out] - real, minlength=count)
    if np.any(n_in != n_out) or np.any(n_in == 0):
        raise ValueError("a meeting node's edges in and out do not pair up")
    cut = np.cumsum(n_in)[:-1]
    starts = [s.tolist() for s in np.split(src[by_in], cut)]
    ends = [e.tolist() for e in np.split(dst[by_out], cut)]
    key = src.astype(np.int64) * (int(dst.max(initial=0)) + 1) + dst
    pair_key = src[by_in].astype(np.int64) * (int(dst.max(initial=0)) + 1) + dst[by_out]
    direct = [d.tolist() for d in np.split(np.isin(pair_key, key), cut)]
    return _Meetings(starts, ends, n_in.tolist(), direct, [[False] * len(s) for s in starts])


def repeated_edges(src: Numbers, dst: Numbers) -> tuple[Numbers, Numbers] | None:
    """None when no (src, dst) pair is added twice; else each pair once, at its first position,
    standing for its last copy (a DiGraph's add_edge)."""
    if len(src) == 0:
        return None
    numbers = _numbers(len(src))
    key = src.astype(np.int64) * (int(max(src.max(initial=0), dst.max(initial=0))) + 1) + dst
    # One stable sort: each pair's copies lie together in the order added.
    by_key = np.argsort(key, kind="stable").astype(numbers)
    key = key[by_key]
    opens = np.empty(len(key), bool)
    opens[0] = True
    np.not_equal(key[1:], key[:-1], out=opens[1:])
    del key
    if opens.all():
        return None
    closes = np.empty_like(opens)
    closes[-1] = True
    closes[:-1] = opens[1:]
    # Each pair's last copy, by the position of its first; then the first positions in order
    # (marked, not sorted: a job has millions of edges).
    first = by_key[opens]
    last_of = np.empty(len(src), numbers)
    last_of[first] = by_key[closes]
    del by_key, opens, closes
    is_first = np.zeros(len(src), bool)
    is_first[first] = True
    del first
    kept = np.flatnonzero(is_first).astype(numbers)
    return kept, last_of[kept]


def _numbers(total: int) -> type[np.signedinteger[Any]]:
    """The smallest integer type that numbers `total` nodes or edges (and −1)."""
    return np.int32 if total < np.iinfo(np.int32).max else np.int64


def _bounds(keys: Numbers, n: int) -> Numbers:
    """Where each of `n` keys' run starts in `keys` sorted (n + 1 entries): counted, not searched."""
    bounds = np.zeros(n + 1, _numbers(len(keys)))
    np.cumsum(np.bincount(keys, minlength=n), out=bounds[1:], dtype=bounds.dtype)
    return bounds


def topological_order(
    n: int,
    src: Numbers,
    dst: Numbers,
    meetings: int = 0,
    roots: memoryview | None = None,
    firsts: list[int] | None = None,
) -> Numbers:
    """networkx's topological_sort order (see the module docstring); CycleError on a cycle.

    With `roots` (n entries, each node's own number): each node freed takes the root of the node
    whose visit freed it, so a node's root is the node of generation 0 it was reached from; with
    `firsts`, where each generation starts in the order. In a graph made of disjoint pieces the
    order runs generation by generation, and within one the pieces' nodes stand by their roots
    (a node is placed after the node that freed it, generation 0 by number): the two place any
    node of a piece in the whole graph's order without solving the whole graph.

    A meeting node is placed when its last start is visited (before any of its ends). Its ends
    are freed as the pairwise graph frees them: each by its own start → end edge when its start is
    the last to come (its count from the meeting taken when only that start was left), the others
    after the last start's own edges, in the meeting's order.
    """
    real = n - meetings
    by_src = np.argsort(src, kind="stable")
    # Flat buffers, not lists: a Python int in a list costs ~40 bytes, here 8 (a job has millions).
    children = np.ascontiguousarray(dst[by_src]).data
    del by_src
    bounds = _bounds(src, n).data
    numbers = _numbers(max(n, len(src)))
    indegree = np.bincount(dst, minlength=n).astype(numbers).data
    meet = _meetings(real, meetings, src, dst) if meetings else None
    generation = np.flatnonzero(np.asarray(indegree)[:real] == 0).tolist()
    order = array("i" if numbers is np.int32 else "q")
    visited = np.zeros(n, bool).data
    while generation:
        if firsts is not None:
            firsts.append(len(order))
        order.extend(generation)
        following: list[int] = []
        for node in generation:
            visited[node] = True
            for child in children[bounds[node] : bounds[node + 1]]:
                if child < real:
                    indegree[child] -= 1
                    if indegree[child] == 0:
                        following.append(child)
                        if roots is not None:
                            roots[child] = roots[node]
                    continue
                assert meet is not None
                m = child - real
                meet.waiting[m] -= 1
                counted = meet.counted[m]
                if meet.waiting[m] == 1:
                    # One start is left: its end waits for it by its own edge, no longer for the meeting.
                    last = next(i for i, s in enumerate(meet.starts[m]) if not visited[s])
                    if meet.direct[m][last]:
                        counted[last] = True
                        indegree[meet.ends[m][last]] -= 1
                elif meet.waiting[m] == 0:
                    order.append(child)
                    for i, end in enumerate(meet.ends[m]):
                        if not counted[i]:
                            counted[i] = True
                            indegree[end] -= 1
                            if indegree[end] == 0:
                                following.append(end)
                                if roots is not None:
                                    roots[end] = roots[node]
        generation = following
    if len(order) != n:
        raise CycleError("the graph has a cycle")
    return np.frombuffer(order, dtype=numbers)


def longest_path(n: int, src: Numbers, dst: Numbers, weight: Floats, meetings: int = 0, placed: bool = False) -> Path:
    """The longest path over `n` nodes by `weight` (edges as added; repeated pairs count once, last weight).

    The last `meetings` nodes are meeting nodes (module docstring). `placed`: the path says where
    its last node stands in the order (`Path.generation`, `Path.root`).
    """
    if n == 0:
        return Path(np.zeros(0, np.int64), np.zeros(0, np.int64), 0.0)
    real = n - meetings
    # Node and edge numbers as int32 where they fit: the solver's arrays are a job's largest.
    numbers = _numbers(max(n, len(src)))
    repeated = repeated_edges(src, dst)
    if repeated is None:
        # No pair repeated: every edge stands for itself; no copies.
        u, v, w, kept = src.astype(numbers, copy=False), dst.astype(numbers, copy=False), weight, None
    else:
        first, last = repeated
        u, v, w, kept = src[first].astype(numbers), dst[first].astype(numbers), weight[last], last.astype(numbers)
        del first, last, repeated
    roots = np.arange(n, dtype=numbers) if placed else None
    firsts: list[int] = []
    order = topological_order(n, u, v, meetings, None if roots is None else roots.data, firsts)
    by_dst = np.argsort(v, kind="stable")
    starts = _bounds(v, n).data
    pred = np.ascontiguousarray(u[by_dst]).data
    pred_w = np.ascontiguousarray(w[by_dst], dtype=np.float64).data
    pred_edge = np.ascontiguousarray((by_dst if kept is None else kept[by_dst]).astype(numbers, copy=False)).data
    del u, v, w, kept, by_dst
    dist_of = np.zeros(n)
    dist = dist_of.data
    back = np.arange(n, dtype=numbers).data
    via = np.full(n, -1, dtype=numbers).data
    for node in order.data:
        best, best_from, best_edge = None, node, -1
        for j in range(starts[node], starts[node + 1]):
            length = dist[pred[j]] + pred_w[j]
            if best is None or length > best:
                best, best_from, best_edge = length, pred[j], pred_edge[j]
        if best is not None and best >= 0:
            dist[node], back[node], via[node] = best, best_from, best_edge
    del starts, pred, pred_w, pred_edge  # the per-edge arrays, before the per-node ones below
    lengths = dist_of[order]
    lengths[order >= real] = -np.inf
    at = int(np.argmax(lengths))
    end = int(order[at])
    nodes, path_edges = [end], []
    while back[nodes[-1]] != nodes[-1]:
        edge, before = via[nodes[-1]], back[nodes[-1]]
        if before >= real:
            # A meeting: one step from the start that came last to this end.
            if back[before] == before:
                break
            before = back[before]
        path_edges.append(edge)
        nodes.append(before)
    generation, root = (bisect_right(firsts, at) - 1, int(roots[end])) if roots is not None else (-1, -1)
    return Path(
        np.asarray(nodes[::-1], np.int64), np.asarray(path_edges[::-1], np.int64), float(dist[end]), generation, root
    )
