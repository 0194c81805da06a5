"""The critical-path graph of one rank's window: nodes, and the edges of the host threads.

Every host op, runtime/driver call (and data-loading event) and every device row with a launching
call has a start node and an end node, ordered by (time, file index, start before end). Edges are
kept as parallel integer arrays (`EdgeArrays`, built by `Edges`); their kinds are HTA 0.6.1's
(docs/semantics-critical-path.md). The device edges are in `device.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.model import callstack

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC, COLLECTIVE = range(6)
EDGE_TYPES = (
    "critical_path_operator",
    "critical_path_dependency",
    "critical_path_kernel_launch_delay",
    "critical_path_kernel_kernel_delay",
    "critical_path_sync_dependency",
    "critical_path_collective",
)
"""Edge kinds by code, spelled as HTA's CPEdgeType values (the collective edge between ranks is htatui's)."""

BLOCKING_CALLS = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventQuery",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpyAsync",
)
"""Calls that wait for the GPU: the edge into their end carries no weight (a sync edge explains the wait)."""

NODE_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")


@dataclass(frozen=True)
class EdgeArrays:
    """A graph's edges in the order added (HTA's tie-breaks): node numbers, kind code, whether
    the edge weighs nothing, and the row charged (−1 none); numpy arrays, 14 bytes an edge."""

    src: npt.NDArray[np.int32]
    dst: npt.NDArray[np.int32]
    kind: npt.NDArray[np.int8]
    zero: npt.NDArray[np.bool_]
    event: npt.NDArray[np.int32]


@dataclass
class Edges:
    """Edges as they are added: single edges in Python lists, runs of edges as arrays, joined in
    order by `arrays` (a Python int in a list costs ~40 bytes; a graph keeps only the arrays)."""

    _pending: tuple[list[int], list[int], list[int], list[bool], list[int]] = field(
        default_factory=lambda: ([], [], [], [], [])
    )
    _chunks: list[tuple[np.ndarray, ...]] = field(default_factory=list)

    def add(self, src: int, dst: int, kind: int, event: int = -1, zero: bool = False) -> None:
        srcs, dsts, kinds, zeros, events = self._pending
        srcs.append(src)
        dsts.append(dst)
        kinds.append(kind)
        zeros.append(zero or kind in (DEPENDENCY, SYNC))
        events.append(event)

    def extend(self, src: Ints, dst: Ints, kind: Ints, event: Ints, zero: npt.NDArray[np.bool_]) -> None:
        self._flush()
        self._chunks.append((src, dst, kind, zero | (kind == DEPENDENCY) | (kind == SYNC), event))

    def _flush(self) -> None:
        if self._pending[0]:
            self._chunks.append(tuple(np.asarray(column) for column in self._pending))
            self._pending = ([], [], [], [], [])

    def arrays(self) -> EdgeArrays:
        """The edges so far, in the order added."""
        self._flush()

        def column(i: int, dtype: type[np.generic]) -> np.ndarray:
            return np.concatenate([np.zeros(0, dtype), *(chunk[i] for chunk in self._chunks)]).astype(dtype)

        return EdgeArrays(
            src=column(0, np.int32),
            dst=column(1, np.int32),
            kind=column(2, np.int8),
            zero=column(3, np.bool_),
            event=column(4, np.int32),
        )


@dataclass
class Nodes:
    """Node arrays: the event (row of the window's frame), time (µs), and whether it is a start."""

    event: Ints
    ts: Floats
    is_start: npt.NDArray[np.bool_]
    start_of: Ints
    """Per window row: its start node, −1 when it has none."""
    end_of: Ints


def node_mask(events: pl.DataFrame, data_loading: tuple[str, ...]) -> pl.Series:
    """Which window rows get nodes: host ops and calls, data loading, launched device rows."""
    cat = pl.col("cat").cast(pl.Utf8)
    host = (pl.col("hstream") == -1) & cat.is_in(NODE_CATS)
    device = (pl.col("hstream") != -1) & (pl.col("partner") >= 0)
    loading = pl.lit(False)
    if data_loading:
        loading = pl.col("name").cast(pl.Utf8).str.contains("|".join(f"(?:{p})" for p in data_loading))
    return events.select((host | device | loading).fill_null(False)).to_series()


def make_nodes(events: pl.DataFrame, has_node: npt.NDArray[np.bool_]) -> Nodes:
    """A start and an end node for each row that has them, sorted by (time, file index, start first)."""
    rows = np.flatnonzero(has_node).astype(np.int64)
    ts = events["ts"].to_numpy()[rows]
    end = ts + events["dur"].to_numpy()[rows]
    index = events["index"].to_numpy()[rows]
    times = np.concatenate([ts, end])
    order = np.lexsort((np.repeat([0, 1], len(rows)), np.concatenate([index, index]), times))
    event = np.concatenate([rows, rows])[order]
    is_start = np.concatenate([np.ones(len(rows), bool), np.zeros(len(rows), bool)])[order]
    start_of = np.full(events.height, -1, dtype=np.int64)
    end_of = np.full(events.height, -1, dtype=np.int64)
    ids = np.arange(len(order), dtype=np.int64)
    start_of[event[is_start]] = ids[is_start]
    end_of[event[~is_start]] = ids[~is_start]
    return Nodes(event=event, ts=times[order], is_start=is_start, start_of=start_of, end_of=end_of)


def lock_edges(nodes: Nodes, takes_lock: npt.NDArray[np.bool_], edges: Edges) -> None:
    """The CUDA runtime lock's order: locked calls complete one at a time (HTA's completion order)."""
    pending: list[int] = []
    last = -1
    for node in np.flatnonzero(takes_lock[nodes.event]).tolist():
        if nodes.is_start[node]:
            pending.append(node)
        else:
            ev = int(nodes.event[node])
            while pending:
                previous = pending.pop()
                if nodes.event[previous] == ev:
                    edges.add(previous, node, OPERATOR, ev)
                else:
                    edges.add(previous, node, DEPENDENCY)
            if last >= 0 and not nodes.is_start[last]:
                edges.add(last, node, DEPENDENCY)
        last = node


def merged_threads(events: pl.DataFrame) -> pl.DataFrame:
    """The backward thread's rows moved onto the forward thread, when each is one thread (HTA)."""
    marked = events.filter(pl.col("cat").cast(pl.Utf8).is_in(["cpu_op", "user_annotation"]))
    names = marked["name"].cast(pl.Utf8)

    def only_tid(word: str) -> str | None:
        tids = marked.filter(names.str.contains(word, literal=True))["tid"].cast(pl.Utf8).unique()
        return tids[0] if len(tids) == 1 else None

    forward, backward = only_tid("forward"), only_tid("autograd")
    if forward is None or backward is None or forward == backward:
        return events
    tid = pl.col("tid").cast(pl.Utf8)
    return events.with_columns(tid=pl.when(tid == backward).then(pl.lit(forward)).otherwise(tid).cast(pl.Categorical))


def stack_edges(
    events: pl.DataFrame, nodes: Nodes, takes_lock: npt.NDArray[np.bool_], hta_compat: bool, edges: Edges
) -> None:
    """Each host thread's call stack walked depth first: an edge between consecutive nodes visited.

    Entering an event links the last node visited to its start (a zero-weight dependency between
    top-level events); leaving it links the last node to its end (zero weight for blocking calls).
    Pairs of locked calls are left to `lock_edges`.
    """
    stack = callstack.build(merged_threads(events).with_columns(rank=pl.lit(0, dtype=pl.Int32)), hta_compat)
    if stack.height == 0:
        return
    row_of_index = dict(zip(events["index"].to_list(), range(events.height), strict=True))
    row = np.array([row_of_index[i] for i in stack["index"].to_list()], dtype=np.int64)
    parent_pos = stack["parent"].fill_null(-1).to_numpy()
    parent_row = np.where(parent_pos >= 0, row[np.maximum(parent_pos, 0)], -1)
    pos = stack["pos"].to_numpy()
    last = stack["last"].to_numpy()
    depth = stack["local_depth"].to_numpy()
    thread = stack["thread"].to_numpy()
    n = len(pos)
    # The depth-first tour: enter at pos; leave, deepest first, just before pos last + 1.
    t_thread = np.concatenate([thread, thread])
    t_at = np.concatenate([pos, last + 1])
    t_enter = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    t_depth = np.concatenate([np.zeros(n, np.int64), -depth])
    t_item = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((t_depth, t_enter, t_at, t_thread))
    item = t_item[order]
    enter = t_enter[order].astype(bool)
    ev = row[item]
    keep = nodes.start_of[ev] >= 0
    item, enter, ev, thr = item[keep], enter[keep], ev[keep], t_thread[order][keep]
    node = np.where(enter, nodes.start_of[ev], nodes.end_of[ev])
    step = np.where(enter, 1, -1)
    first = np.ones(len(ev), bool)
    first[1:] = thr[1:] != thr[:-1]
    # Nodes open before this step on the thread (HTA's op_depth).
    running = np.cumsum(step)
    thread_start = np.maximum.accumulate(np.where(first, np.arange(len(ev)), 0))
    before = running - step - (running[thread_start] - step[thread_start])
    prev_node = np.roll(node, 1)
    prev_ev = np.roll(ev, 1)
    prev_parent = parent_row[np.roll(item, 1)]
    lock_pair = takes_lock[prev_ev] & takes_lock[ev] & (nodes.is_start[prev_node] | ~nodes.is_start[node])
    use = ~first & ~lock_pair
    kind = np.where(enter & (before == 0), DEPENDENCY, OPERATOR)
    zero = ~enter & np.isin(events["name"].cast(pl.Utf8).to_numpy()[ev], BLOCKING_CALLS)
    src_start = nodes.is_start[prev_node]
    dst_end = ~nodes.is_start[node]
    charged = np.where(src_start, prev_ev, np.where(dst_end, ev, prev_parent))
    charged = np.where(kind == OPERATOR, charged, -1)
    edges.extend(prev_node[use], node[use], kind[use], charged[use], zero[use])


def takes_lock_mask(events: pl.DataFrame) -> npt.NDArray[np.bool_]:
    return events["name"].cast(pl.Utf8).is_in(hta.LOCK_CALLS).fill_null(False).to_numpy()


def data_loading_pattern(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
