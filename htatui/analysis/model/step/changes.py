"""Which edges of a step graph a what-if changes, as a user names them.

By *name*: every instance of an op (its whole time on its thread, children included) or of a
kernel (its run). By *annotation*: the time inside each instance of a range on its thread, and
the device work launched from inside it. By *rank*: all of a rank's own work. By *bound type*:
every edge of that type. Only work is scaled (ops, untraced host time, kernels; transfers by name
or bound type); waits follow from the replay.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from htatui.analysis.model.step.assemble import StepGraph
from htatui.analysis.model.step.graph import BOUND_TYPES, Bools, Kind

HOST_WORK = (Kind.OPERATOR, Kind.ANNOTATION)
DEVICE_WORK = (Kind.KERNEL,)

COMMUNICATION = "communication"
"""A bound-type key that stands for every communication type (GPU and CPU)."""


def edge_ranks(g: StepGraph) -> np.ndarray:
    """Each edge's rank: its destination's (a meeting node's edges in: their source's)."""
    rank = g.node_rank[g.dst]
    return np.where(rank >= 0, rank, g.node_rank[g.src])


def by_rank(g: StepGraph, rank: int | None) -> Bools:
    """Edges of `rank` (every edge when None)."""
    if rank is None:
        return np.ones(len(g.src), dtype=bool)
    found: Bools = edge_ranks(g) == rank
    return found


def work(g: StepGraph, with_transfer: bool = False) -> Bools:
    """Edges that are work: host ops and untraced host time, device work (and transfers)."""
    kinds = [*HOST_WORK, *DEVICE_WORK, *([Kind.TRANSFER] if with_transfer else [])]
    found: Bools = np.isin(g.kind, kinds)
    return found


def charged_to(g: StepGraph, rows: np.ndarray) -> Bools:
    """Edges charged to any of these rows (a mask over `g.rows`)."""
    found: Bools = (g.charged >= 0) & rows[np.maximum(g.charged, 0)]
    return found


def inside(g: StepGraph, rows: np.ndarray, with_device: bool = True) -> Bools:
    """Host work edges that start inside one of these host rows' spans on the row's own thread,
    and (`with_device`) device work launched from inside them."""
    chosen = g.rows.with_columns(_pick=pl.Series(rows)).filter("_pick" & ~pl.col("on_device"))
    found = np.zeros(len(g.src), dtype=bool)
    if chosen.height == 0:
        return found
    lanes = g.rows["lane"].to_numpy()
    rank_of_row = g.rows["rank"].to_numpy()
    row_of_src = g.node_row[g.src]
    start = g.time[g.src]
    host = np.isin(g.kind, HOST_WORK) & (row_of_src >= 0)
    device = (g.kind == Kind.KERNEL) & (g.charged >= 0)
    launch = g.rows["launch"].to_numpy()
    # A host edge's thread and rank, and a kernel's launching call's thread, rank and start.
    lane_of = np.where(host, lanes[np.maximum(row_of_src, 0)], "")
    rank_of = np.where(host, rank_of_row[np.maximum(row_of_src, 0)], -1)
    launched = device & (launch[np.maximum(g.charged, 0)] >= 0) & with_device
    call = launch[np.maximum(g.charged, 0)]
    lane_of = np.where(launched, lanes[np.maximum(call, 0)], lane_of)
    rank_of = np.where(launched, rank_of_row[np.maximum(call, 0)], rank_of)
    when = np.where(launched, g.time[g.start_of[np.maximum(call, 0)]], start)
    candidates = host | launched
    for (rank, lane), spans in chosen.group_by("rank", "lane"):
        s = np.sort(spans["ts"].to_numpy())
        e = spans["end"].to_numpy()[np.argsort(spans["ts"].to_numpy())]
        here = candidates & (lane_of == lane) & (rank_of == rank)
        at = np.searchsorted(s, when[here], side="right") - 1
        # Spans of one name on one thread may nest: the latest that started holds it when any does.
        reach = np.maximum.accumulate(e) if len(e) else e
        hit = (at >= 0) & (when[here] < reach[np.maximum(at, 0)])
        found[np.flatnonzero(here)[hit]] = True
    return found


def by_bound(g: StepGraph, key: str) -> Bools:
    """Edges of this bound type (`communication`: GPU and CPU communication)."""
    if key == COMMUNICATION:
        wanted = [BOUND_TYPES.index(b) for b in ("gpu_communication_bound", "cpu_communication_bound")]
    elif key in BOUND_TYPES:
        wanted = [BOUND_TYPES.index(key)]
    else:
        return np.zeros(len(g.src), dtype=bool)
    return np.isin(g.bound, wanted)


def named_rows(g: StepGraph, name: str) -> np.ndarray:
    """A mask over `g.rows`: the rows called `name`."""
    return (g.rows["name"] == name).to_numpy()


def scaled(weight: np.ndarray, mask: Bools, factor: float) -> np.ndarray:
    """`weight` with the masked edges × factor."""
    return np.where(mask, weight * factor, weight)
