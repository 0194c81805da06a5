"""Replaying a step graph, and the path that bounds the step.

The replay places every node at the earliest time its dependencies allow: its anchor (what
nothing in the window precedes happens when it happened; another rank's arrival, in one rank's
graph) or its in-edges' sources plus their weights. With the graph's own weights it gives the
measured times; with changed weights (a what-if), the step as it would have run.

Most nodes have one edge in and no anchor (a thread's walk, a kernel's end): each is its chain's
head plus the weights along the chain, summed for all nodes at once by pointer jumping. Only the
*junctions* (two or more edges in, or an anchor) are placed one by one, in number order (a
topological order).

The path is the chain of binding edges from the window's end back to its start: every µs of the
step lies on exactly one of its edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from htatui.analysis.model.step.assemble import StepGraph
from htatui.analysis.model.step.graph import Bools, Floats, Ints


@dataclass(frozen=True)
class Plan:
    """What a replay needs of a graph whatever its weights: the junctions in order, each other
    node's one edge in, and the junctions' edges in (positions in the graph's edge arrays)."""

    junction: Bools
    junctions: Ints
    single_edge: Ints
    """Per node: its one edge in (−1 for junctions)."""
    junction_edges: Ints
    """The junctions' edges in, by junction (`junction_ptr[k]:junction_ptr[k + 1]` are the k-th's)."""
    junction_ptr: Ints


def plan(g: StepGraph) -> Plan:
    """The replay's plan for `g` (kept on the graph: every what-if replays the same graph)."""
    found = g.cache.get("replay.plan")
    if isinstance(found, Plan):
        return found
    degree = np.diff(g.ptr)
    junction = (degree != 1) | np.isfinite(g.anchor)
    single_edge = np.where(junction, -1, g.ptr[:-1])
    junctions = np.flatnonzero(junction)
    counts = degree[junctions]
    junction_ptr = np.zeros(len(junctions) + 1, dtype=np.int64)
    np.cumsum(counts, out=junction_ptr[1:])
    # The junctions' edges in, in junction order: each junction's run of the edge arrays.
    starts = np.repeat(g.ptr[junctions], counts)
    within = np.arange(int(junction_ptr[-1]), dtype=np.int64) - np.repeat(junction_ptr[:-1], counts)
    made = Plan(junction, junctions, single_edge, starts + within, junction_ptr)
    g.cache["replay.plan"] = made
    return made


def _chains(g: StepGraph, p: Plan, weight: Floats) -> tuple[Ints, Floats]:
    """Each node's chain head (a junction) and its offset from it: the weights along the way."""
    head = np.where(p.junction, np.arange(g.node_count), g.src[np.maximum(p.single_edge, 0)])
    offset = np.where(p.junction, 0.0, weight[np.maximum(p.single_edge, 0)])
    # Pointer jumping: each round doubles the stretch of chain summed.
    while True:
        pending = ~p.junction[head]
        if not pending.any():
            return head, offset
        offset = np.where(pending, offset + offset[head], offset)
        head = np.where(pending, head[head], head)


def replay(g: StepGraph, weight: Floats | None = None) -> Floats:
    """Every node's time in the replay with `weight` (the graph's own when None)."""
    w = g.weight if weight is None else weight
    p = plan(g)
    head, offset = _chains(g, p, w)
    edges = p.junction_edges
    # Junctions numbered among themselves: an edge in brings its source's head's time plus this.
    compact = np.full(g.node_count, -1, dtype=np.int64)
    compact[p.junctions] = np.arange(len(p.junctions))
    source_head = compact[head[g.src[edges]]].tolist()
    extra = (offset[g.src[edges]] + w[edges]).tolist()
    times = g.anchor[p.junctions].tolist()
    ptr = p.junction_ptr.tolist()
    for k in range(len(times)):
        best = times[k]
        for e in range(ptr[k], ptr[k + 1]):
            x = times[source_head[e]] + extra[e]
            if x > best:
                best = x
        times[k] = best
    placed = np.asarray(times, dtype=np.float64)
    return placed[compact[head]] + offset


def replay_step_us(g: StepGraph, weight: Floats | None = None) -> float:
    """The replayed window: from its start to its end node."""
    if weight is None:
        found = g.cache.get("replay.step_us")
        if isinstance(found, float):
            return found
    placed = replay(g, weight)
    step = float(placed[g.end] - g.low_us)
    if weight is None:
        g.cache["replay.step_us"] = step
    return step


def path_edges(g: StepGraph) -> Ints:
    """The binding edges from the window's end back to its start, in time order (kept on the
    graph, read-only: the path, its summary and every what-if ask for it)."""
    found = g.cache.get("replay.path_edges")
    if isinstance(found, np.ndarray):
        return found
    made = _path_edges(g)
    made.flags.writeable = False
    g.cache["replay.path_edges"] = made
    return made


def _path_edges(g: StepGraph) -> Ints:
    binding_of = np.full(g.node_count, -1, dtype=np.int64)
    binding_of[g.dst[g.binding]] = np.flatnonzero(g.binding)
    found: list[int] = []
    v = g.end
    time = g.time
    while time[v] > g.low_us:
        e = int(binding_of[v])
        if e < 0:
            break
        found.append(e)
        v = int(g.src[e])
    found.reverse()
    return np.asarray(found, dtype=np.int64)
