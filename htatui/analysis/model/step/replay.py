"""Replaying a step graph, and the path that bounds the step.

The replay places every node at the earliest time its dependencies allow: its anchor (what
nothing in the window precedes happens when it happened; another rank's arrival, in one rank's
graph) or its in-edges' sources plus their weights. With the graph's own weights it gives the
measured times; with changed weights (a what-if), the step as it would have run.

The path is the chain of binding edges from the window's end back to its start: every µs of the
step lies on exactly one of its edges.
"""

from __future__ import annotations

import numpy as np

from htatui.analysis.model.step.assemble import StepGraph
from htatui.analysis.model.step.graph import Floats, Ints


def replay(g: StepGraph, weight: Floats | None = None) -> Floats:
    """Every node's time in the replay with `weight` (the graph's own when None)."""
    w = (g.weight if weight is None else weight).tolist()
    src = g.src.tolist()
    ptr = g.ptr.tolist()
    at = g.anchor.tolist()
    # Nodes in number order are a topological order: each in-edge's source is already placed.
    for v in range(len(at)):
        best = at[v]
        for e in range(ptr[v], ptr[v + 1]):
            x = at[src[e]] + w[e]
            if x > best:
                best = x
        at[v] = best
    return np.asarray(at, dtype=np.float64)


def replay_step_us(g: StepGraph, weight: Floats | None = None) -> float:
    """The replayed window: from its start to its end node."""
    return float(replay(g, weight)[g.end] - g.low_us)


def path_edges(g: StepGraph) -> Ints:
    """The binding edges from the window's end back to its start, in time order."""
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
