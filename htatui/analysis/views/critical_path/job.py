"""The job's critical path: every rank's graph, joined where the ranks meet at a collective.

A collective cannot end on any rank before it has started on every rank. For each call matched
across ranks (the Ranks view's meeting points: communication kernels, else the collectives' CPU
ops), every rank's arrival (the call's start) gets an edge to every rank's completion (its end),
weighing the transfer: the rank's end minus the last arrival. The rank's own span of the call is
weighed the same way, so the time a rank spent waiting for the others is not charged to the
collective: the longest path reaches the completion through the rank that arrived last, and the
work that made it late.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from htatui.analysis.views.critical_path.graph import COLLECTIVE, OPERATOR, Edges, Nodes
from htatui.analysis.views.critical_path.path import RankGraph
from htatui.analysis.views.critical_path.window import Window
from htatui.analysis.views.ranks.meeting import CALL_KEY, KERNELS, meeting_points


def combine(graphs: dict[int, RankGraph]) -> RankGraph:
    """The ranks' graphs side by side: node and row numbers offset, edges in rank order."""
    frames, event, ts, is_start, start_of, end_of = [], [], [], [], [], []
    edges = Edges()
    weights = []
    row_off = node_off = 0
    for g in graphs.values():
        frames.append(g.window.events)
        n = len(g.nodes.ts)
        event.append(g.nodes.event + row_off)
        ts.append(g.nodes.ts)
        is_start.append(g.nodes.is_start)
        start_of.append(np.where(g.nodes.start_of >= 0, g.nodes.start_of + node_off, -1))
        end_of.append(np.where(g.nodes.end_of >= 0, g.nodes.end_of + node_off, -1))
        edges.src.extend((np.asarray(g.edges.src, np.int64) + node_off).tolist())
        edges.dst.extend((np.asarray(g.edges.dst, np.int64) + node_off).tolist())
        edges.kind.extend(g.edges.kind)
        edges.zero.extend(g.edges.zero)
        edges.event.extend([e + row_off if e >= 0 else -1 for e in g.edges.event])
        weights.append(g.weight)
        row_off += g.window.events.height
        node_off += n
    events = pl.concat(frames, how="vertical_relaxed")
    nodes = Nodes(
        event=np.concatenate(event),
        ts=np.concatenate(ts),
        is_start=np.concatenate(is_start),
        start_of=np.concatenate(start_of),
        end_of=np.concatenate(end_of),
    )
    window = Window(
        start_us=min(g.window.start_us for g in graphs.values()),
        end_us=max(g.window.end_us for g in graphs.values()),
        events=events,
        full=events,
    )
    return RankGraph(window, nodes, edges, np.concatenate(weights))


def matched_calls(g: RankGraph, hta_compat: bool) -> pl.DataFrame:
    """The collective calls two or more ranks share: row, start and end node, group number, transfer (µs)."""
    events = g.window.events.with_columns(pos=pl.int_range(pl.len(), dtype=pl.Int64))
    calls, source = meeting_points(events, hta_compat)
    if source is None or calls.height == 0:
        return pl.DataFrame(schema={"pos": pl.Int64(), "group": pl.UInt32(), "transfer_us": pl.Float64()})
    on_device = pl.col("hstream") != -1 if source == KERNELS else pl.col("hstream") == -1
    rows = events.filter(on_device).select("rank", "ts", "end", "pos").unique(["rank", "ts", "end"], keep="first")
    found = calls.join(rows, on=["rank", "ts", "end"], how="inner")
    found = found.with_columns(
        ranks=pl.col("rank").n_unique().over(CALL_KEY),
        last_arrival=pl.col("ts").max().over(CALL_KEY),
        group=pl.struct(CALL_KEY).rank("dense"),
    ).filter(pl.col("ranks") >= 2)
    return found.select(
        "pos", "group", transfer_us=pl.max_horizontal(pl.col("end") - pl.col("last_arrival"), pl.lit(0.0))
    ).sort("group", "pos")


def join_ranks(graphs: dict[int, RankGraph], hta_compat: bool) -> RankGraph:
    """One graph for the job (module docstring)."""
    g = combine(graphs)
    calls = matched_calls(g, hta_compat)
    if calls.height == 0:
        return g
    start = g.nodes.start_of[calls["pos"].to_numpy()]
    end = g.nodes.end_of[calls["pos"].to_numpy()]
    transfer = calls["transfer_us"].to_numpy()
    group = calls["group"].to_numpy()
    weight = g.weight.copy()
    # A call's own span weighs its transfer too: the wait is the late rank's to explain.
    own = {
        (s, d): i
        for i, (s, d, k) in enumerate(zip(g.edges.src, g.edges.dst, g.edges.kind, strict=True))
        if k == OPERATOR
    }
    for s, d, t in zip(start.tolist(), end.tolist(), transfer.tolist(), strict=True):
        if (s, d) in own:
            weight[own[(s, d)]] = t
    added: list[float] = []
    for members in np.split(np.arange(len(group)), np.flatnonzero(np.diff(group)) + 1):
        for r in members.tolist():
            for q in members.tolist():
                if q != r and start[q] >= 0 and end[r] >= 0:
                    g.edges.add(int(start[q]), int(end[r]), COLLECTIVE, int(g.nodes.event[end[r]]))
                    added.append(float(transfer[r]))
    return RankGraph(g.window, g.nodes, g.edges, np.concatenate([weight, np.asarray(added)]))
