"""A step graph made whole: the ranks' parts side by side, their collectives joined, the window's
start and end, every node's binding edge, the replay's weights and each edge's bound type.

Nodes are numbered in time order (ties: along their lane), so every edge runs from a lower number
to a higher one and the numbering is a topological order; an edge that would run backwards (the
trace's clocks disagree) is left out and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from htatui.analysis.model.step import collectives
from htatui.analysis.model.step.collectives import EdgeArrays
from htatui.analysis.model.step.graph import (
    BOUND_TYPES,
    COLLECTIVE_WAIT,
    CPU_BOUND,
    CPU_COMMUNICATION,
    DATA_LOADING,
    GPU_COMMUNICATION,
    GPU_COMPUTE,
    HOST_GAP,
    KERNEL_OVERHEAD,
    LAUNCH_OVERHEAD,
    UNEXPLAINED_WAIT,
    Bools,
    Floats,
    Ints,
    Kind,
    RankPart,
    binding_edges,
)

BACKWARDS = "dependencies that would run backwards in time (the clocks disagree)"


@dataclass(frozen=True)
class RankCalls:
    """A rank's collective calls: their rows by file `index`, and either the last arrival of any
    rank at each (µs on this rank's clock: one rank's graph) or a `group` shared by the same call
    on every rank (the job's graph)."""

    index: Ints
    last_arrival_us: Floats | None = None
    group: Ints | None = None


@dataclass
class StepGraph:
    """A step's graph, numbered in topological order (module docstring).

    `rows` are the kept rows of every rank (rows.ROW_SCHEMA plus `rank`, `comm`), `node_row` the
    row of each node (−1: virtual). Edges are sorted by destination (`ptr[v]:ptr[v + 1]` are
    node v's in-edges); `weight` is what the replay adds, `span` the measured time between the
    edge's ends, `binding` whether it is its destination's binding edge, `bound` its bound type
    (an index into BOUND_TYPES, −1 none).
    """

    rows: pl.DataFrame
    time: Floats
    anchor: Floats
    node_row: Ints
    node_rank: Ints
    src: Ints
    dst: Ints
    kind: Ints
    charged: Ints
    weight: Floats
    span: Floats
    binding: Bools
    bound: Ints
    ptr: Ints
    start_of: Ints
    """Each row's start node (its end node: `end_of`)."""
    end_of: Ints
    start: int
    end: int
    low_us: float
    high_us: float
    clamped: dict[str, int] = field(default_factory=dict)
    cache: dict[str, object] = field(default_factory=dict)
    """What is worked out once per graph (the replay's plan, the measured replay, the path)."""

    @property
    def node_count(self) -> int:
        return len(self.time)

    @property
    def step_us(self) -> float:
        """The measured window: from its start to its end node."""
        return float(self.time[self.end] - self.low_us)


def assemble(
    parts: list[RankPart],
    calls: list[RankCalls | None],
    data_loading: tuple[str, ...] = (),
) -> StepGraph:
    """The step graph of `parts` (one rank's, or a job's: `calls` say how collectives join)."""
    times, anchors, node_row, node_rank, seqs, frames, firsts = [], [], [], [], [], [], []
    none = np.zeros(0, np.int64)
    edges = EdgeArrays(none, none, none, none, np.zeros(0))
    waits: list[Ints] = []
    ends: list[int] = []
    clamped: dict[str, int] = {}
    node_off = row_off = 0
    arrival_parts, completion_parts, own_parts, group_parts = [], [], [], []
    extra_times: list[float] = []
    extra_anchor: list[float] = []

    for part, rank_calls in zip(parts, calls, strict=True):
        src, dst, kind, charged, intrinsic = part.edges.arrays()
        n_nodes = len(part.times)
        local = EdgeArrays(src, dst, kind, charged, intrinsic)
        part_times = part.times
        if rank_calls is not None and len(rank_calls.index):
            call_rows = _rows_of(part.rows, rank_calls.index)
            keep = call_rows >= 0
            arrival, completion, own = collectives.call_spans(
                local, part_times, call_rows[keep], part.rows["on_device"].to_numpy()
            )
            if rank_calls.last_arrival_us is not None:
                collectives.anchor_calls(
                    local, part_times, own, arrival, completion, rank_calls.last_arrival_us[keep], part.add_node
                )
            elif rank_calls.group is not None:
                arrival_parts.append(np.where(arrival >= 0, arrival + node_off, -1))
                completion_parts.append(np.where(completion >= 0, completion + node_off, -1))
                own_parts.append(np.where(own >= 0, own + len(edges.src), -1))
                group_parts.append(rank_calls.group[keep])
        extra = len(part.extra_times)
        all_times = part.node_times()
        times.append(all_times)
        anchors.append(np.concatenate([np.full(n_nodes, -np.inf), np.asarray(part.extra_anchor, np.float64)]))
        rows_of_nodes = np.repeat(np.arange(part.rows.height, dtype=np.int64), 2)
        firsts.append(2 * np.arange(part.rows.height, dtype=np.int64) + node_off)
        node_row.append(np.concatenate([rows_of_nodes + row_off, np.full(extra, -1, np.int64)]))
        node_rank.append(np.full(n_nodes + extra, part.rank, np.int64))
        seqs.append(np.concatenate([part.seq, np.full(extra, np.iinfo(np.int32).max, np.int64)]))
        offset_charged = np.where(local.charged >= 0, local.charged + row_off, -1)
        edges.extend(local.src + node_off, local.dst + node_off, local.kind, offset_charged, local.intrinsic)
        waits.append(part.waits + node_off)
        if part.end_node >= 0:
            ends.append(part.end_node + node_off)
        else:
            ends.extend((part.lane_last + node_off).tolist())
        frames.append(part.rows.with_columns(rank=pl.lit(part.rank, pl.Int32)))
        for what, count in part.clamped.items():
            clamped[what] = clamped.get(what, 0) + count
        node_off += n_nodes + extra
        row_off += part.rows.height

    time = np.concatenate(times) if times else np.zeros(0)
    anchor = np.concatenate(anchors) if anchors else np.zeros(0)
    rows = pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()

    def add_node(t: float, a: float) -> int:
        extra_times.append(t)
        extra_anchor.append(a)
        return node_off + len(extra_times) - 1

    if group_parts:
        collectives.meet_calls(
            edges,
            time,
            np.concatenate(own_parts),
            np.concatenate(arrival_parts),
            np.concatenate(completion_parts),
            np.concatenate(group_parts),
            add_node,
        )
    low = min((p.low_us for p in parts), default=0.0)
    end_time = float(time[ends].max()) if ends else low
    start_node = add_node(low, low)
    end_node = add_node(max(end_time, low), -np.inf)
    edges.extend(np.asarray(ends, np.int64), np.full(len(ends), end_node), Kind.END, -1, 0.0)
    time = np.concatenate([time, np.asarray(extra_times, np.float64)])
    anchor = np.concatenate([anchor, np.asarray(extra_anchor, np.float64)])
    big = np.iinfo(np.int32).max
    seq = np.concatenate([*seqs, np.full(len(extra_times), big, np.int64)]) if seqs else np.full(len(extra_times), big)
    seq[start_node], seq[end_node] = -1, big + 1
    node_row_all = np.concatenate([*node_row, np.full(len(extra_times), -1, np.int64)])
    node_rank_all = np.concatenate([*node_rank, np.full(len(extra_times), -1, np.int64)])
    # A walk edge into a node another lane explains is a wait: it weighs nothing unless it binds.
    wait_nodes = np.concatenate(waits) if waits else np.zeros(0, np.int64)
    walk = np.isin(edges.kind, [Kind.OPERATOR, Kind.ANNOTATION]) & np.isin(edges.dst, wait_nodes)
    edges.intrinsic[walk] = 0.0

    # Number the nodes in time order (at equal times, after what they depend on); leave out
    # edges that would run backwards.
    level = _levels(time, edges.src, edges.dst)
    order = np.lexsort((np.arange(len(time)), seq, level, time))
    number = np.empty(len(order), dtype=np.int64)
    number[order] = np.arange(len(order))
    src, dst = number[edges.src], number[edges.dst]
    forward = src < dst
    if (~forward).any():
        clamped[BACKWARDS] = clamped.get(BACKWARDS, 0) + int((~forward).sum())
    src, dst = src[forward], dst[forward]
    kind, charged, intrinsic = edges.kind[forward], edges.charged[forward], edges.intrinsic[forward]
    time, anchor = time[order], anchor[order]
    node_row_all, node_rank_all = node_row_all[order], node_rank_all[order]
    start_node, end_node = int(number[start_node]), int(number[end_node])
    first_nodes = np.concatenate(firsts) if firsts else np.zeros(0, np.int64)
    start_of, end_of = number[first_nodes], number[first_nodes + 1]

    # Nodes after the window's start that nothing explains hang from the start.
    has_in = np.zeros(len(time), dtype=bool)
    has_in[dst] = True
    orphans = np.flatnonzero(~has_in & (time > low) & (np.arange(len(time)) != start_node))
    if len(orphans):
        orphan_charged = np.where(node_row_all[orphans] >= 0, node_row_all[orphans], -1)
        src = np.concatenate([src, np.full(len(orphans), start_node)])
        dst = np.concatenate([dst, orphans])
        kind = np.concatenate([kind, np.full(len(orphans), Kind.START, np.int64)])
        charged = np.concatenate([charged, orphan_charged])
        intrinsic = np.concatenate([intrinsic, np.full(len(orphans), np.nan)])
        has_in[orphans] = True
    # What nothing precedes (before the window) happens when it happened.
    anchor = np.where(has_in, anchor, time)

    by_dst = np.lexsort((src, dst))
    src, dst, kind, charged, intrinsic = src[by_dst], dst[by_dst], kind[by_dst], charged[by_dst], intrinsic[by_dst]
    binding, weight = binding_edges(time, src, dst, kind, intrinsic)
    # The wait for another rank's arrival is the anchor's to replay, not the edge's.
    weight = np.where(kind == Kind.COLLECTIVE_WAIT, 0.0, weight)
    span = time[dst] - time[src]
    ptr = np.zeros(len(time) + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=len(time)), out=ptr[1:])
    bound = bound_types(rows, kind, charged, binding, span, data_loading)
    return StepGraph(
        rows=rows,
        time=time,
        anchor=anchor,
        node_row=node_row_all,
        node_rank=node_rank_all,
        src=src,
        dst=dst,
        kind=kind,
        charged=charged,
        weight=weight,
        span=span,
        binding=binding,
        bound=bound,
        ptr=ptr,
        start_of=start_of,
        end_of=end_of,
        start=start_node,
        end=end_node,
        low_us=low,
        high_us=float(time[end_node]),
        clamped=clamped,
    )


LEVEL_ROUNDS = 64
"""How long a chain of edges between nodes of one time is followed (longer: a cycle, left out)."""


def _levels(time: Floats, src: Ints, dst: Ints) -> Ints:
    """Each node's place among the nodes of its time: one more than its latest predecessor of the
    same time (edges of zero span), so that equal times are numbered in dependency order."""
    level = np.zeros(len(time), dtype=np.int64)
    flat = np.flatnonzero(time[src] == time[dst])
    if len(flat) == 0:
        return level
    a, b = src[flat], dst[flat]
    for _ in range(LEVEL_ROUNDS):
        wanted = level[a] + 1
        if not (wanted > level[b]).any():
            break
        np.maximum.at(level, b, wanted)
    return level


def _rows_of(rows: pl.DataFrame, index: Ints) -> Ints:
    """The row of each file index (−1: not kept)."""
    where = dict(zip(rows["index"].to_list(), rows["row"].to_list(), strict=True))
    return np.asarray([where.get(int(i), -1) for i in index.tolist()], dtype=np.int64)


_CODE = {name: i for i, name in enumerate(BOUND_TYPES)}


OVERHEAD_LIMIT_US = 100.0
"""A device gap longer than this after what its work waited for (launch, the stream's previous
work, another stream) is no launch or kernel-to-kernel overhead: something the trace does not
show held the work (a CUDA graph's inner waits, another process on the GPU)."""


def bound_types(
    rows: pl.DataFrame, kind: Ints, charged: Ints, binding: Bools, span: Floats, data_loading: tuple[str, ...]
) -> Ints:
    """Each edge's bound type (index into BOUND_TYPES; −1 none): docs/semantics-critical-path.md."""
    n = len(kind)
    if rows.height:
        on_device = rows["on_device"].to_numpy()
        comm = rows["comm"].to_numpy()
        names = rows["name"].to_numpy()
    else:
        on_device = comm = np.zeros(0, dtype=bool)
        names = np.zeros(0, dtype=object)
    has = charged >= 0
    at = np.maximum(charged, 0)
    row_device = np.where(has, on_device[at] if len(on_device) else False, False)
    row_comm = np.where(has, comm[at] if len(comm) else False, False)
    loading = np.zeros(n, dtype=bool)
    if data_loading and len(names):
        pattern = re.compile("|".join(f"(?:{p})" for p in data_loading))
        matches = np.asarray([bool(pattern.search(str(name))) for name in names.tolist()], dtype=bool)
        loading = np.where(has, matches[at], False)
    code = np.full(n, -1, dtype=np.int64)
    table = {
        Kind.OPERATOR: _CODE[CPU_BOUND],
        Kind.ANNOTATION: _CODE[HOST_GAP],
        Kind.IDLE: _CODE[HOST_GAP],
        Kind.BLOCKING: _CODE[UNEXPLAINED_WAIT],
        Kind.LAUNCH: _CODE[LAUNCH_OVERHEAD],
        Kind.STREAM: _CODE[KERNEL_OVERHEAD],
        Kind.GPU_WAIT: _CODE[KERNEL_OVERHEAD],
        Kind.SYNC: _CODE[CPU_BOUND],
        Kind.FORK: _CODE[HOST_GAP],
        Kind.JOIN: _CODE[HOST_GAP],
        Kind.START: _CODE[UNEXPLAINED_WAIT],
        Kind.COLLECTIVE_WAIT: _CODE[COLLECTIVE_WAIT],
    }
    for k, c in table.items():
        code[kind == k] = c
    kernel = kind == Kind.KERNEL
    code[kernel] = np.where(row_comm[kernel], _CODE[GPU_COMMUNICATION], _CODE[GPU_COMPUTE])
    transfer = kind == Kind.TRANSFER
    code[transfer] = np.where(row_device[transfer], _CODE[GPU_COMMUNICATION], _CODE[CPU_COMMUNICATION])
    host_work = (kind == Kind.OPERATOR) | (kind == Kind.ANNOTATION)
    code[host_work & loading] = _CODE[DATA_LOADING]
    device_gap = np.isin(kind, [Kind.LAUNCH, Kind.STREAM, Kind.GPU_WAIT])
    code[device_gap & binding & (span > OVERHEAD_LIMIT_US)] = _CODE[UNEXPLAINED_WAIT]
    return code
