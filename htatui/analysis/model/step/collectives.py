"""Collectives in a step graph: where a rank arrives at a call, where it completes, and the wait.

A call's *arrival* and *completion* are its device work's start and end, or, for a host call (a
gloo range on a worker thread, a `c10d::` op), the ends of its longest stretch of own time: the
exchange, after the copies and syncs around it. Its own edge between them becomes a TRANSFER
that weighs the rank's transfer only: its completion minus the last arrival.

One rank's graph (`anchor_calls`): the last arrival of the other ranks is a node anchored at its
time, the wait for it a COLLECTIVE_WAIT edge. The job's graph (`meet_calls`): one meeting node per
call, every rank's arrival into it, out of it to every rank's completion, so the path crosses to
the rank that arrived last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from htatui.analysis.model.step.graph import Floats, Ints, Kind


@dataclass
class EdgeArrays:
    """A graph's edges as parallel arrays (mutable: collectives rewrite some)."""

    src: Ints
    dst: Ints
    kind: Ints
    charged: Ints
    intrinsic: Floats

    def extend(self, src: Ints, dst: Ints, kind: Ints | int, charged: Ints | int, intrinsic: Floats | float) -> None:
        n = len(src)
        self.src = np.concatenate([self.src, np.asarray(src, np.int64)])
        self.dst = np.concatenate([self.dst, np.asarray(dst, np.int64)])
        self.kind = np.concatenate([self.kind, np.broadcast_to(np.asarray(kind, np.int64), n)])
        self.charged = np.concatenate([self.charged, np.broadcast_to(np.asarray(charged, np.int64), n)])
        self.intrinsic = np.concatenate([self.intrinsic, np.broadcast_to(np.asarray(intrinsic, np.float64), n)])


def call_spans(edges: EdgeArrays, times: Floats, call_rows: Ints, on_device: np.ndarray) -> tuple[Ints, Ints, Ints]:
    """Each call row's arrival node, completion node and own edge (−1 when it has none), as the
    module docstring says."""
    arrival = np.full(len(call_rows), -1, dtype=np.int64)
    completion = np.full(len(call_rows), -1, dtype=np.int64)
    own = np.full(len(call_rows), -1, dtype=np.int64)
    if len(call_rows) == 0:
        return arrival, completion, own
    wanted = np.isin(edges.charged, call_rows)
    own_kinds = np.isin(edges.kind, [Kind.KERNEL, Kind.OPERATOR, Kind.ANNOTATION, Kind.BLOCKING])
    candidates = np.flatnonzero(wanted & own_kinds)
    span = times[edges.dst[candidates]] - times[edges.src[candidates]]
    # The longest own stretch of each call (its only one for device work).
    order = np.lexsort((-span, edges.charged[candidates]))
    picked = candidates[order]
    first = np.ones(len(picked), dtype=bool)
    first[1:] = edges.charged[picked][1:] != edges.charged[picked][:-1]
    best = dict(zip(edges.charged[picked][first].tolist(), picked[first].tolist(), strict=True))
    for i, row in enumerate(call_rows.tolist()):
        edge = best.get(row)
        if edge is None:
            continue
        own[i] = edge
        arrival[i], completion[i] = edges.src[edge], edges.dst[edge]
    return arrival, completion, own


def anchor_calls(
    edges: EdgeArrays, times: Floats, own: Ints, arrival: Ints, completion: Ints, last_arrival: Floats, add_node: object
) -> None:
    """One rank's calls: each own edge a TRANSFER of (completion − the later of its own arrival
    and the last arrival), and where another rank arrived later an anchored node at that time
    with a COLLECTIVE_WAIT edge into it and a TRANSFER out (`add_node(time, anchor)` → node)."""
    for i in np.flatnonzero(own >= 0).tolist():
        edge, start, done = int(own[i]), int(arrival[i]), int(completion[i])
        t_start, t_done = float(times[start]), float(times[done])
        last = float(last_arrival[i]) if np.isfinite(last_arrival[i]) else t_start
        met = min(max(last, t_start), t_done)
        transfer = t_done - met
        edges.kind[edge] = Kind.TRANSFER
        edges.intrinsic[edge] = transfer
        if met > t_start and met < t_done:
            node = add_node(met, met)  # type: ignore[operator]
            row = edges.charged[edge]
            edges.extend(np.array([start]), np.array([node]), Kind.COLLECTIVE_WAIT, row, 0.0)
            edges.extend(np.array([node]), np.array([done]), Kind.TRANSFER, row, transfer)


def meet_calls(
    edges: EdgeArrays, times: Floats, own: Ints, arrival: Ints, completion: Ints, group: Ints, add_node: object
) -> int:
    """The job's calls: a meeting node per group of two or more ranks' calls, MEETING edges in from
    every arrival and TRANSFER edges out to every completion (each weighing that rank's transfer),
    each own edge a TRANSFER of the same; returns the count of meetings."""
    have = own >= 0
    meetings = 0
    for g in np.unique(group[have]).tolist():
        members = np.flatnonzero(have & (group == g))
        if len(members) < 2:
            continue
        last = float(times[arrival[members]].max())
        node = add_node(last, -np.inf)  # type: ignore[operator]
        meetings += 1
        transfer = np.maximum(times[completion[members]] - last, 0.0)
        rows = edges.charged[own[members]]
        edges.kind[own[members]] = Kind.TRANSFER
        edges.intrinsic[own[members]] = transfer
        edges.extend(arrival[members], np.full(len(members), node), Kind.MEETING, -1, 0.0)
        edges.extend(np.full(len(members), node), completion[members], Kind.TRANSFER, rows, transfer)
    return meetings
