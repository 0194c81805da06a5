"""The longest path of a DAG given as integer edge arrays, with networkx's choices among equal paths.

Nodes are visited in networkx's topological order (generations of zero in-degree, children in the
order their edges were added); each takes its best predecessor (the first added among equals) unless
every way in is negative, and the path ends at the first node of greatest length in that order.
The same answer `networkx.dag_longest_path` gives, without the graph objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


class CycleError(ValueError):
    """The graph has a cycle: no longest path."""


@dataclass(frozen=True)
class Path:
    """The path's nodes in order, its edges (positions in the edge arrays) and its length."""

    nodes: Ints
    edges: Ints
    length: float


def unique_edges(src: Ints, dst: Ints) -> tuple[Ints, Ints]:
    """Each (src, dst) pair once, at its first position, standing for its last copy (a DiGraph's add_edge)."""
    key = src.astype(np.int64) * (int(max(src.max(initial=0), dst.max(initial=0))) + 1) + dst
    _, first = np.unique(key, return_index=True)
    _, last_rev = np.unique(key[::-1], return_index=True)
    last = len(key) - 1 - last_rev
    order = np.argsort(first, kind="stable")
    return first[order], last[order]


def topological_order(n: int, src: Ints, dst: Ints) -> Ints:
    """networkx's topological_sort order (see the module docstring); CycleError on a cycle."""
    by_src = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[by_src], np.arange(n + 1))
    children = dst[by_src].tolist()
    bounds = starts.tolist()
    indegree = np.bincount(dst, minlength=n).tolist()
    generation = [v for v in range(n) if indegree[v] == 0]
    order: list[int] = []
    while generation:
        order.extend(generation)
        following: list[int] = []
        for node in generation:
            for child in children[bounds[node] : bounds[node + 1]]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    following.append(child)
        generation = following
    if len(order) != n:
        raise CycleError("the graph has a cycle")
    return np.asarray(order, dtype=np.int64)


def longest_path(n: int, src: Ints, dst: Ints, weight: Floats) -> Path:
    """The longest path over `n` nodes by `weight` (edges as added; repeated pairs count once, last weight)."""
    if n == 0:
        return Path(np.zeros(0, np.int64), np.zeros(0, np.int64), 0.0)
    first, last = unique_edges(src, dst)
    u, v, w = src[first], dst[first], weight[last]
    order = topological_order(n, u, v)
    by_dst = np.argsort(v, kind="stable")
    starts = np.searchsorted(v[by_dst], np.arange(n + 1)).tolist()
    pred, pred_w, pred_edge = u[by_dst].tolist(), w[by_dst].tolist(), last[by_dst].tolist()
    dist = [0.0] * n
    back = list(range(n))
    via = [-1] * n
    for node in order.tolist():
        best, best_from, best_edge = None, node, -1
        for j in range(starts[node], starts[node + 1]):
            length = dist[pred[j]] + pred_w[j]
            if best is None or length > best:
                best, best_from, best_edge = length, pred[j], pred_edge[j]
        if best is not None and best >= 0:
            dist[node], back[node], via[node] = best, best_from, best_edge
    order_list = order.tolist()
    lengths = np.asarray(dist)[order]
    end = order_list[int(np.argmax(lengths))] if n else 0
    nodes, path_edges = [end], []
    while back[nodes[-1]] != nodes[-1]:
        path_edges.append(via[nodes[-1]])
        nodes.append(back[nodes[-1]])
    return Path(np.asarray(nodes[::-1], np.int64), np.asarray(path_edges[::-1], np.int64), float(dist[end]))
