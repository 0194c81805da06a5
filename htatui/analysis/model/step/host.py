"""Host edges of a step graph: each thread's events walked depth first, and the threads joined.

Consecutive nodes of a thread's walk are joined by an edge charged to the event the time between
them lies in: an op's or call's own work (OPERATOR), an annotation's or Python function's time
outside its children (ANNOTATION: untraced host work), the thread's time between its outermost
events (IDLE), or the wait inside a blocking call (BLOCKING). Across threads of one process, a
thread that goes on right after another thread's event ended (JOIN: a worker's completion, the
autograd engine's end), and a thread woken from idle right after another thread's node (FORK:
the autograd engine started by the main thread, a collective handed to gloo's worker).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.model import op_nesting
from htatui.analysis.model.step.graph import Bools, EdgeBuffer, Floats, Ints, Kind
from htatui.trace.kineto import PROFILER_STEP

ANNOTATION_CATS = ("user_annotation", "python_function")
"""Host ranges whose own time is untraced work of the program (its Python, a sleep), not a call's."""

BLOCKING_CALLS = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpyAsync",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyAsync",
    "hipMemcpyWithStream",
)
"""Calls that can block the thread until device work ends (a copy only when it waits for its own)."""

JOIN_MIN_GAP_US = 20.0
"""A thread's pause shorter than this is not looked at for another thread's completion."""

HANDOFF_SLACK_US = 500.0
"""How soon after another thread's event a thread must go on for that event to explain it…"""

HANDOFF_SLACK_SHARE = 0.05
"""…or, for a long pause, within this share of the pause (a thread that waited 200 ms for the
autograd engine may take a few ms to go on)."""

FORK_SLACK_US = 2000.0
"""How soon after another thread's node a thread woken from idle must start for that node to
have woken it (the autograd engine can take half a millisecond to start backward)."""

JOIN_BUSY_SHARE = 0.25
"""The share of a pause the other thread must have been busy for its event's end to explain it."""


def nesting(lane: Ints, ts: Floats, end: Floats) -> tuple[Ints, Ints, Ints]:
    """Parent (−1 none), depth and last descendant of host rows sorted by (lane, ts, longest first)."""
    n = len(ts)
    first = np.zeros(n, dtype=np.int64)
    if n:
        changes = np.flatnonzero(lane[1:] != lane[:-1]) + 1
        first[changes] = changes
        first = np.maximum.accumulate(first)
    parent = op_nesting.previous_reaching(first, end, ts, end > ts)
    depth = op_nesting.depths(parent)
    last = op_nesting.next_not_above(depth) - 1
    return parent, depth, last


def tour(host: pl.DataFrame) -> tuple[Ints, Bools, Ints, Ints, tuple[Ints, Ints]]:
    """The depth-first walk of every thread: per visit, the row, whether it enters it, the row
    the time before the visit lies in (−1: between outermost events) and the lane; and each host
    row with its parent row (−1 none), parents before children.

    `host`: row, lane code, ts, end of the host rows.
    """
    ordered = host.sort("lane_code", "ts", -pl.col("end"), "row")
    rows = ordered["row"].to_numpy()
    lane = ordered["lane_code"].to_numpy()
    parent, depth, last = nesting(lane, ordered["ts"].to_numpy(), ordered["end"].to_numpy())
    n = len(rows)
    pos = np.arange(n, dtype=np.int64)
    # Enter at pos; leave, deepest first, just before pos last + 1.
    at = np.concatenate([pos, last + 1])
    enter = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    deep = np.concatenate([np.zeros(n, np.int64), -depth])
    item = np.concatenate([pos, pos])
    lanes = np.concatenate([lane, lane])
    order = np.lexsort((deep, enter, at, lanes))
    item, entering, lanes = item[order], enter[order].astype(bool), lanes[order]
    parent_row = np.where(parent >= 0, rows[np.maximum(parent, 0)], -1)
    inside = np.where(entering, parent_row[item], rows[item])
    return rows[item], entering, inside, lanes, (rows, parent_row)


@dataclass(frozen=True)
class Walk:
    """Every thread's depth-first walk: per visit, its node, its lane, and the row the time
    before it lies in (−1: between the thread's outermost events)."""

    node: Ints
    lane: Ints
    inside: Ints


def walk_threads(rows: pl.DataFrame, times: Floats, seq: Ints) -> Walk:
    """The threads' walks; `times` (2 per row) made monotone along each thread and `seq` set to
    each node's place in its walk."""
    host = rows.filter(~pl.col("on_device")).select(
        "row", "ts", "end", lane_code=pl.col("lane").rank("dense").cast(pl.Int64)
    )
    if host.height == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Walk(empty, empty, empty)
    row, entering, inside, lane, (rows_in_order, parents) = tour(host)
    steps = rows["name"].str.contains(PROFILER_STEP.pattern).to_numpy()
    _clip_to_parents(times, rows_in_order, np.where(steps[rows_in_order], -1, parents))
    node = np.where(entering, 2 * row, 2 * row + 1)
    # Nanosecond artefacts (a child ending after its parent) must not run a thread backwards.
    walk_times = times[node]
    cuts = np.flatnonzero(np.diff(lane)) + 1
    for part in np.split(np.arange(len(node)), cuts):
        walk_times[part] = np.maximum.accumulate(walk_times[part])
    times[node] = walk_times
    seq[node] = np.arange(len(node), dtype=np.int64)
    return Walk(node, lane, inside)


def _clip_to_parents(times: Floats, rows: Ints, parents: Ints) -> None:
    """A child that ends after its parent (a Python function past its step's end) ends with it:
    the parent's span is what was measured (a ProfilerStep, whose span is the step, is given no
    parent). Parents come before their children in `rows`."""
    has = parents >= 0
    if not has.any():
        return
    end = times[2 * rows + 1].copy()
    position = np.empty(int(rows.max()) + 1, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    parent_at = np.where(has, position[np.maximum(parents, 0)], 0)
    # One pass per level of nesting: a parent's clipped end reaches its children next pass.
    while True:
        clipped = np.where(has, np.minimum(end, end[parent_at]), end)
        if (clipped == end).all():
            break
        end = clipped
    times[2 * rows + 1] = np.maximum(end, times[2 * rows])


def host_edges(rows: pl.DataFrame, times: Floats, walk: Walk, edges: EdgeBuffer, synced: set[int]) -> None:
    """The walks' edges into `edges` (module docstring). `synced`: the end nodes of blocking
    calls that waited for device work (their edge in is a BLOCKING wait)."""
    node, lane, inside = walk.node, walk.lane, walk.inside
    if len(node) < 2:
        return
    same = lane[1:] == lane[:-1]
    src, dst, held = node[:-1][same], node[1:][same], inside[1:][same]
    cat = rows["cat"].to_numpy()
    held_cat = np.where(held >= 0, cat[np.maximum(held, 0)], "")
    blocking = np.isin(dst, np.asarray(sorted(synced), dtype=np.int64))
    kind = np.where(
        held < 0,
        Kind.IDLE,
        np.where(blocking, Kind.BLOCKING, np.where(np.isin(held_cat, ANNOTATION_CATS), Kind.ANNOTATION, Kind.OPERATOR)),
    )
    # A thread's idle time is the program's: charged to the range of another thread around it.
    charged = held.copy()
    idle = np.flatnonzero(held < 0)
    charged[idle] = enclosing_ranges(rows, times[src[idle]], times[dst[idle]], dst[idle] // 2)
    intrinsic = np.where((kind == Kind.IDLE) | (kind == Kind.BLOCKING), 0.0, np.nan)
    edges.add(src, dst, kind, charged, intrinsic)


def enclosing_ranges(rows: pl.DataFrame, low: Floats, high: Floats, fallback: Ints) -> Ints:
    """For each idle stretch [low, high] of a thread: the innermost annotation of a step's thread
    of its process that holds it (as HTA hangs the autograd thread's events under the main
    thread's step), else `fallback` (the row the thread went on with)."""
    found = fallback.copy()
    host = rows.filter(~pl.col("on_device") & (pl.col("cat") == "user_annotation"))
    step_lanes = host.filter(pl.col("name").str.contains(PROFILER_STEP.pattern))["lane"].unique()
    ranges = host.filter(pl.col("lane").is_in(step_lanes.implode())).sort("ts", -pl.col("end"))
    if ranges.height == 0 or len(low) == 0:
        return found
    r_ts, r_end = ranges["ts"].to_numpy(), ranges["end"].to_numpy()
    r_lane = ranges["lane"].rank("dense").cast(pl.Int64).to_numpy()
    # Each range's parent among the step threads' ranges (nesting within its lane).
    order = np.lexsort((-r_end, r_ts, r_lane))
    parent_sorted, _, _ = nesting(r_lane[order], r_ts[order], r_end[order])
    parent = np.full(len(order), -1, dtype=np.int64)
    parent[order] = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], -1)
    pids = rows["pid"].to_numpy()
    r_pid = ranges["pid"].to_numpy()
    at = np.searchsorted(r_ts, low, side="right") - 1
    # The latest range to start before the stretch, or the first of its ancestors that holds it.
    for _ in range(MAX_RANGE_DEPTH):
        ok = (at >= 0) & (r_end[np.maximum(at, 0)] >= high) & (r_pid[np.maximum(at, 0)] == pids[fallback])
        if ok.all() or not (at >= 0).any():
            break
        at = np.where(ok | (at < 0), at, parent[np.maximum(at, 0)])
    ok = (at >= 0) & (r_end[np.maximum(at, 0)] >= high) & (r_pid[np.maximum(at, 0)] == pids[fallback])
    r_row = ranges["row"].to_numpy()
    return np.where(ok, r_row[np.maximum(at, 0)], found)


MAX_RANGE_DEPTH = 32
"""How many annotations deep an idle stretch's holder is looked for."""


class Busy:
    """Each lane's busy time (its outermost events), to ask how busy a lane was between two times."""

    def __init__(self, rows: pl.DataFrame, walk: Walk) -> None:
        top = walk.inside < 0
        entering = walk.node % 2 == 0
        starts = walk.node[top & entering] // 2
        ts, end = rows["ts"].to_numpy(), rows["end"].to_numpy()
        self.lanes: dict[int, tuple[Floats, Floats, Floats]] = {}
        lane = walk.lane[top & entering]
        for code in np.unique(lane).tolist():
            chosen = starts[lane == code]
            s, e = ts[chosen], end[chosen]
            order = np.argsort(s)
            s, e = s[order], e[order]
            self.lanes[int(code)] = (s, e, np.concatenate([[0.0], np.cumsum(e - s)]))

    def _before(self, code: int, t: float) -> float:
        s, e, total = self.lanes.get(code, (np.zeros(0), np.zeros(0), np.zeros(1)))
        i = int(np.searchsorted(s, t, side="right"))
        if i == 0:
            return 0.0
        return float(total[i - 1] + min(max(t - s[i - 1], 0.0), e[i - 1] - s[i - 1]))

    def share(self, code: int, low: float, high: float) -> float:
        """The share of [low, high] the lane was busy."""
        if high <= low:
            return 0.0
        return (self._before(code, high) - self._before(code, low)) / (high - low)


def cross_thread_edges(rows: pl.DataFrame, times: Floats, walk: Walk, edges: EdgeBuffer, explicit: set[int]) -> Ints:
    """JOIN and FORK edges between a process's threads (module docstring) into `edges`; returns
    the nodes that got one (their walk edge in becomes a wait). `explicit`: nodes whose handoff
    is known already (a gloo range's enqueue), left alone."""
    node, lane = walk.node, walk.lane
    if len(node) < 2:
        return np.zeros(0, dtype=np.int64)
    pid = rows["pid"].to_numpy()
    same = lane[1:] == lane[:-1]
    src, dst = node[:-1][same], node[1:][same]
    gap = times[dst] - times[src]
    ends = np.flatnonzero(~rows["on_device"].to_numpy())
    end_nodes = 2 * ends + 1
    lane_of_row = np.zeros(rows.height, dtype=np.int64)
    lane_of_row[node // 2] = lane
    got: list[int] = []
    # JOIN: a pause of a thread that ends right after another thread of its process, busy
    # meanwhile, finished an event (a poller's short calls explain nothing).
    busy = Busy(rows, walk)
    candidates = np.flatnonzero(gap >= JOIN_MIN_GAP_US)
    by_time = end_nodes[np.argsort(times[end_nodes], kind="stable")]
    end_times = times[by_time]
    joins_src, joins_dst, joins_charged = [], [], []
    held_before = walk.inside[1:][same]
    for i in candidates.tolist():
        v = int(dst[i])
        if v in explicit:
            continue
        t_v, t_u = float(times[v]), float(times[src[i]])
        at = int(np.searchsorted(end_times, t_v, side="right")) - 1
        own_lane, own_pid = lane_of_row[v // 2], pid[v // 2]
        slack = max(HANDOFF_SLACK_US, HANDOFF_SLACK_SHARE * (t_v - t_u))
        while at >= 0 and end_times[at] > t_u and t_v - end_times[at] <= slack:
            other = int(by_time[at])
            other_lane = lane_of_row[other // 2]
            if other_lane != own_lane and pid[other // 2] == own_pid:
                if busy.share(other_lane, t_u, float(end_times[at])) >= JOIN_BUSY_SHARE:
                    joins_src.append(other)
                    joins_dst.append(v)
                    # The latency is the waiting thread's own gap: charged to the range it lies in.
                    joins_charged.append(int(held_before[i]) if held_before[i] >= 0 else v // 2)
                    break
            at -= 1
    edges.add(
        np.asarray(joins_src, np.int64),
        np.asarray(joins_dst, np.int64),
        Kind.JOIN,
        np.asarray(joins_charged, np.int64),
        0.0,
    )
    got += joins_dst
    # FORK: a thread that wakes from idle (or first appears) right after another thread's node.
    held = walk.inside[1:][same]
    first_of_lane = np.concatenate([[0], np.flatnonzero(~same) + 1]) if len(node) else np.zeros(0, np.int64)
    wakes = [
        int(v)
        for v, h, g in zip(dst.tolist(), held.tolist(), gap.tolist(), strict=True)
        if h < 0 and g >= JOIN_MIN_GAP_US
    ]
    wakes += [int(node[i]) for i in first_of_lane.tolist() if node[i] % 2 == 0]
    all_nodes = np.concatenate([2 * ends, end_nodes])
    all_nodes = all_nodes[np.argsort(times[all_nodes], kind="stable")]
    all_times = times[all_nodes]
    forks_src, forks_dst = [], []
    joined = set(joins_dst)
    for v in wakes:
        if v in explicit or v in joined:
            continue
        t_v = float(times[v])
        at = int(np.searchsorted(all_times, t_v, side="left")) - 1
        own_lane, own_pid = lane_of_row[v // 2], pid[v // 2]
        while at >= 0 and t_v - all_times[at] <= FORK_SLACK_US:
            other = int(all_nodes[at])
            if lane_of_row[other // 2] != own_lane and pid[other // 2] == own_pid:
                forks_src.append(other)
                forks_dst.append(v)
                break
            at -= 1
    edges.add(
        np.asarray(forks_src, np.int64),
        np.asarray(forks_dst, np.int64),
        Kind.FORK,
        np.asarray(forks_dst, np.int64) // 2,
        0.0,
    )
    got += forks_dst
    return np.asarray(got, dtype=np.int64)
