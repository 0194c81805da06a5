"""The job's critical path: every rank's graph, joined where the ranks meet at a collective.

A collective cannot end on any rank before it has started on every rank. Each call matched across
ranks (the Ranks view's meeting points: communication kernels, else the collectives' CPU ops) gets
a meeting node: an edge from every rank's arrival (the call's start) into it, weighing nothing,
and one from it to every rank's completion (its end), weighing the transfer: the rank's end minus
the last arrival. That is 2 × ranks edges a call where an edge from every arrival to every
completion would be ranks²; `longest.py` solves it as that pairwise graph (the same path, the same
choice among equals) and leaves the meeting nodes out of the path. The rank's own span of the call
is weighed the same way, so the time a rank spent waiting for the others is not charged to the
collective: the longest path reaches the completion through the rank that arrived last, and the
work that made it late.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.core.rules import Rules
from htatui.analysis.views.critical_path.graph import COLLECTIVE, OPERATOR, EdgeArrays, Nodes
from htatui.analysis.views.critical_path.path import RankGraph
from htatui.analysis.views.critical_path.window import Window
from htatui.analysis.views.ranks.meeting import CALL_KEY, KERNELS, SOURCES, source_calls, without_mismatched


def _numbers(total: int) -> type[np.signedinteger]:
    """The smallest integer type that numbers `total` nodes or rows (and −1)."""
    return np.int32 if total < np.iinfo(np.int32).max else np.int64


JOB_COLUMNS = ("rank", "index", "cat", "name", "collective_name", "hstream")
"""What the job's graph keeps of each row once its rank's calls are found: the path's rows are
named and typed (`path_frame`), the what-ifs find events by (rank, index)."""


@dataclass(frozen=True)
class JobPart:
    """One rank's share of the job: its graph, trimmed to what the job reads (`JOB_COLUMNS`, node
    numbers as int32), and its collective calls from its best source (`rank_calls`), each saying
    whether its row has nodes (`has_nodes`: only those can meet another rank's)."""

    graph: RankGraph
    calls: pl.DataFrame | None

    @property
    def meets(self) -> bool:
        """Whether any call of the rank can meet another rank's (has nodes); a rank whose calls
        cannot is a piece of the job's graph alone, its part of the job's graph its own graph."""
        return self.calls is not None and bool(self.calls["has_nodes"].any())


def job_part(g: RankGraph, hta_compat: bool, rules: Rules) -> JobPart:
    """The rank's part of the job, taken as soon as its graph is built, so that the job holds
    only this of each rank (a rank's window has 26 columns; the calls need most of them)."""
    calls = rank_calls(g.window.events, hta_compat, rules)
    if calls is not None:
        pos = calls["pos"].to_numpy()
        calls = calls.with_columns(has_nodes=pl.Series((g.nodes.start_of[pos] >= 0) & (g.nodes.end_of[pos] >= 0)))
    events = g.window.events.select(JOB_COLUMNS)
    window = Window(start_us=g.window.start_us, end_us=g.window.end_us, events=events, full=events)
    nodes = Nodes(
        event=g.nodes.event.astype(_numbers(events.height)),
        ts=g.nodes.ts,
        is_start=g.nodes.is_start,
        start_of=g.nodes.start_of.astype(_numbers(len(g.nodes.ts))),
        end_of=g.nodes.end_of.astype(_numbers(len(g.nodes.ts))),
    )
    return JobPart(RankGraph(window, nodes, g.edges, g.weight, g.meetings), calls)


def combine(graphs: list[RankGraph]) -> RankGraph:
    """The ranks' graphs side by side: node and row numbers offset, edges in rank order.

    `graphs` is emptied as it goes: each rank's arrays are freed once copied into the job's, so
    the job's graph is never held twice.
    """
    nodes_total = sum(len(g.nodes.ts) for g in graphs)
    rows_total = sum(g.window.events.height for g in graphs)
    edges_total = sum(len(g.edges.src) for g in graphs)
    node_type, row_type = _numbers(nodes_total), _numbers(rows_total)
    start_us = min(g.window.start_us for g in graphs)
    end_us = max(g.window.end_us for g in graphs)
    frames = [g.window.events for g in graphs]
    nodes = Nodes(
        event=np.empty(nodes_total, row_type),
        ts=np.empty(nodes_total, np.float64),
        is_start=np.empty(nodes_total, bool),
        start_of=np.empty(rows_total, node_type),
        end_of=np.empty(rows_total, node_type),
    )
    edges = EdgeArrays(
        src=np.empty(edges_total, node_type),
        dst=np.empty(edges_total, node_type),
        kind=np.empty(edges_total, np.int8),
        zero=np.empty(edges_total, bool),
        event=np.empty(edges_total, row_type),
    )
    weight = np.empty(edges_total, np.float64)
    row_off = node_off = edge_off = 0
    graphs.reverse()
    while graphs:
        g = graphs.pop()
        n, rows, m = len(g.nodes.ts), g.window.events.height, len(g.edges.src)
        at_node, at_row, at_edge = (
            slice(node_off, node_off + n),
            slice(row_off, row_off + rows),
            slice(edge_off, edge_off + m),
        )
        nodes.event[at_node] = g.nodes.event.astype(row_type) + row_off
        nodes.ts[at_node] = g.nodes.ts
        nodes.is_start[at_node] = g.nodes.is_start
        for into, own in ((nodes.start_of, g.nodes.start_of), (nodes.end_of, g.nodes.end_of)):
            into[at_row] = np.where(own >= 0, own.astype(node_type) + node_off, -1)
        edges.src[at_edge] = g.edges.src.astype(node_type) + node_off
        edges.dst[at_edge] = g.edges.dst.astype(node_type) + node_off
        edges.kind[at_edge] = g.edges.kind
        edges.zero[at_edge] = g.edges.zero
        charged = g.edges.event.astype(row_type)
        edges.event[at_edge] = np.where(charged >= 0, charged + row_off, -1)
        weight[at_edge] = g.weight
        del g, charged
        row_off, node_off, edge_off = row_off + rows, node_off + n, edge_off + m
    events = pl.concat(frames, how="vertical_relaxed")
    window = Window(start_us=start_us, end_us=end_us, events=events, full=events)
    return RankGraph(window, nodes, edges, weight)


def rank_calls(events: pl.DataFrame, hta_compat: bool, rules: Rules) -> pl.DataFrame | None:
    """The rank's collective calls from its best source, each with its row (`pos`) and `source`;
    None when it has none. A rank's calls depend on it alone (`meeting.source_calls`)."""
    events = events.with_columns(pos=pl.int_range(pl.len(), dtype=pl.Int64))
    for source in SOURCES:
        calls = source_calls(events, hta_compat, rules, source, None)
        if calls.height == 0:
            continue
        on_device = pl.col("hstream") != -1 if source == KERNELS else pl.col("hstream") == -1
        rows = events.filter(on_device).select("rank", "ts", "end", "pos")
        rows = rows.unique(["rank", "ts", "end"], keep="first", maintain_order=True)
        return calls.join(rows, on=["rank", "ts", "end"], how="inner").with_columns(source=pl.lit(source))
    return None


MATCHED_SCHEMA: dict[str, pl.DataType] = {
    "part": pl.Int64(),
    "pos": pl.Int64(),
    "group": pl.UInt32(),
    "transfer_us": pl.Float64(),
    "has_nodes": pl.Boolean(),
}


def matched_calls(calls: list[pl.DataFrame | None]) -> pl.DataFrame:
    """The collective calls two or more ranks share, from every part's calls in rank order: the
    part and its row there, group number, transfer (µs), and whether the row has nodes; by group
    then part and row."""
    # A rank whose calls matched none of its rows (a broken trace) has none: `frame["source"][0]` below.
    found = [
        part.with_columns(part=pl.lit(i, pl.Int64)) for i, part in enumerate(calls) if part is not None and part.height
    ]
    if not found:
        return pl.DataFrame(schema=MATCHED_SCHEMA)
    # The job's best source: the first any rank has calls of (`meeting.meeting_points`); a rank's
    # best source is never better than it, so a rank with a worse one has none of its calls.
    sources = {str(frame["source"][0]) for frame in found}
    chosen = next(source for source in SOURCES if source in sources)
    matched = (
        pl.concat(found, how="vertical_relaxed")
        .filter(pl.col("source") == chosen)
        .pipe(without_mismatched)  # a rank with more or fewer calls in a group's step pairs wrongly
        .with_columns(
            ranks=pl.col("rank").n_unique().over(CALL_KEY),
            last_arrival=pl.col("ts").max().over(CALL_KEY),
            group=pl.struct(CALL_KEY).rank("dense"),
        )
        .filter(pl.col("ranks") >= 2)
    )
    return matched.select(
        "part",
        "pos",
        "group",
        transfer_us=pl.max_horizontal(pl.col("end") - pl.col("last_arrival"), pl.lit(0.0)),
        has_nodes="has_nodes",
    ).sort("group", "part", "pos")


def pieces(matched: pl.DataFrame, parts: list[int]) -> list[list[int]]:
    """`parts` (part numbers, ascending) grouped into the job graph's connected pieces: two parts
    are in one piece when a call meets on both (a meeting node: two or more of its rows with
    nodes, `meeting_edges`). Pieces by their first part."""
    parent = {part: part for part in parts}

    def top(part: int) -> int:
        while parent[part] != part:
            parent[part] = parent[parent[part]]
            part = parent[part]
        return part

    meeting = matched.filter("has_nodes").filter(pl.len().over("group") >= 2)
    for members in meeting.group_by("group").agg("part")["part"].to_list():
        first = top(members[0])
        for other in members[1:]:
            parent[top(other)] = first
    by_top: dict[int, list[int]] = {}
    for part in parts:
        by_top.setdefault(top(part), []).append(part)
    return sorted(by_top.values())


def piece_calls(matched: pl.DataFrame, members: list[int], heights: list[int]) -> pl.DataFrame:
    """The matched calls of a piece's parts (`members`, ascending; `heights`: their windows' rows),
    rows numbered in the piece's joined frame (`combine`): `join_ranks`' calls."""
    offsets = pl.DataFrame(
        {"part": members, "offset": [sum(heights[:i]) for i in range(len(heights))]},
        schema={"part": pl.Int64(), "offset": pl.Int64()},
    )
    return (
        matched.join(offsets, on="part", how="inner")
        .select(pl.col("pos") + pl.col("offset"), "group", "transfer_us")
        .sort("group", "pos")
    )


def join_ranks(parts: list[JobPart], calls: pl.DataFrame) -> RankGraph:
    """One graph for the ranks of `parts` (module docstring), in rank order, joined at `calls`
    (`piece_calls`); `parts` is emptied (each rank's graph is freed as soon as it is copied into
    the job's)."""
    graphs = [part.graph for part in parts]
    parts.clear()
    g = combine(graphs)
    if calls.height == 0:
        return g
    pos = calls["pos"].to_numpy()
    start, end = g.nodes.start_of[pos].astype(np.int64), g.nodes.end_of[pos].astype(np.int64)
    transfer = calls["transfer_us"].to_numpy()
    weight = own_spans_weighed(g, start, end, transfer)
    meeting_src, meeting_dst, meeting_event, meeting_weight, meetings = meeting_edges(
        calls["group"].to_numpy(), start, end, pos, transfer, len(g.nodes.ts)
    )
    count = len(meeting_src)
    node_type = _numbers(len(g.nodes.ts) + meetings)
    edges = EdgeArrays(
        src=np.concatenate([g.edges.src.astype(node_type), meeting_src.astype(node_type)]),
        dst=np.concatenate([g.edges.dst.astype(node_type), meeting_dst.astype(node_type)]),
        kind=np.concatenate([g.edges.kind, np.full(count, COLLECTIVE, np.int8)]),
        zero=np.concatenate([g.edges.zero, np.zeros(count, bool)]),
        event=np.concatenate([g.edges.event, meeting_event.astype(g.edges.event.dtype)]),
    )
    return RankGraph(g.window, g.nodes, edges, np.concatenate([weight, meeting_weight]), meetings)


def own_spans_weighed(g: RankGraph, start: np.ndarray, end: np.ndarray, transfer: np.ndarray) -> np.ndarray:
    """The graph's weights with each call's own span (its start → end operator edge, the last one
    added when there are two) weighing the call's transfer: the wait is the late rank's to explain."""
    weight = g.weight.copy()
    # Only the operator edges out of a call's start can be its own span (the rest are never looked up).
    ops = np.flatnonzero((g.edges.kind == OPERATOR) & np.isin(g.edges.src, start[start >= 0]))
    src, dst = g.edges.src[ops].astype(np.int64), g.edges.dst[ops].astype(np.int64)
    size = len(g.nodes.ts) + 1
    keys, last_reversed = np.unique((src * size + dst)[::-1], return_index=True)
    last = ops[len(ops) - 1 - last_reversed]
    wanted = start * size + end
    at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    hit = (start >= 0) & (end >= 0) & (keys[at] == wanted) if len(keys) else np.zeros(len(wanted), bool)
    weight[last[at[hit]]] = transfer[hit]
    return weight


def meeting_edges(
    group: np.ndarray, start: np.ndarray, end: np.ndarray, row: np.ndarray, transfer: np.ndarray, first: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Each call's meeting node (numbered from `first`) and its edges: every rank's start into it,
    then out of it to every rank's end, ranks in the calls' order; the edges' sources, destinations,
    charged rows (−1 for the edges in) and weights (0 in, the rank's transfer out), and the count
    of meetings. Calls with fewer than two ranks that have nodes get none (no rank to wait for)."""
    has = (start >= 0) & (end >= 0)
    group, start, end, row, transfer = group[has], start[has], end[has], row[has], transfer[has]
    _, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
    shared = counts[inverse] >= 2
    inverse, start, end, row, transfer = inverse[shared], start[shared], end[shared], row[shared], transfer[shared]
    kept, meeting = np.unique(inverse, return_inverse=True)
    node = first + meeting
    size = len(node)
    # Sorted by meeting, edges in before edges out, each in the calls' order.
    order = np.lexsort((np.arange(2 * size), np.repeat([0, 1], size), np.concatenate([meeting, meeting])))
    src = np.concatenate([start, node])[order]
    dst = np.concatenate([node, end])[order]
    event = np.concatenate([np.full(size, -1, np.int64), row])[order]
    weight = np.concatenate([np.zeros(size), transfer])[order]
    return src.astype(np.int64), dst.astype(np.int64), event.astype(np.int64), weight.astype(np.float64), len(kept)
