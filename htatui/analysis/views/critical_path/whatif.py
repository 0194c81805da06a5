"""What if an event on the path were faster: the path recomputed with that event's own time cut.

Each of the path's longest events has its own time (the operator edges charged to it: a kernel's
span, an op's time outside its children; not the gap after a kernel) shortened by the given
share, and the longest path is solved again; the step can shrink by less than the cut when
another chain becomes the longest.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from htatui.analysis.views.critical_path import longest
from htatui.analysis.views.critical_path.columns import HTA_RANK_WHAT_IF_SPEC as RANK_WHAT_IF_SPEC
from htatui.analysis.views.critical_path.columns import HTA_WHAT_IF_SPEC as WHAT_IF_SPEC
from htatui.analysis.views.critical_path.graph import COLLECTIVE, OPERATOR
from htatui.analysis.views.critical_path.path import RankGraph

WHAT_IF_SCHEMA = WHAT_IF_SPEC.schema


def what_if(g: RankGraph, top: pl.DataFrame, faster_pct: float, count: int, others_us: float = -np.inf) -> pl.DataFrame:
    """The path's length with each of `top`'s first `count` events `faster_pct` % faster.

    `g` may be one piece of the job's graph (`pieces.py`): `others_us` is the longest path of the
    other pieces, which an event of this one does not change.
    """
    src, dst = g.edges.src, g.edges.dst
    solved = np.maximum(g.weight, 0.0)
    kind = np.asarray(g.edges.kind, np.int64)
    charged = np.where((kind == OPERATOR) | (kind == COLLECTIVE), np.asarray(g.edges.event, np.int64), -1)
    n = g.node_count
    now = max(others_us, longest.longest_path(n, src, dst, solved, g.meetings).length)
    rows = g.window.events.select("rank", "index").with_columns(row=pl.int_range(pl.len(), dtype=pl.Int64))
    tried = top.head(count).join(rows, on=["rank", "index"], how="left")
    keep = 1.0 - faster_pct / 100.0
    after = []
    for row in tried["row"].to_list():
        weight = np.where(charged == row, solved * keep, solved) if row is not None else solved
        after.append(max(others_us, longest.longest_path(n, src, dst, weight, g.meetings).length))
    table = tried.select("rank", "name", "bound_by", "time_us").with_columns(
        path_us=pl.lit(now, dtype=pl.Float64),
        path_if_faster_us=pl.Series(after, dtype=pl.Float64),
    )
    table = table.with_columns(saved_us=pl.col("path_us") - pl.col("path_if_faster_us")).with_columns(
        saved_pct=pl.when(pl.col("path_us") > 0).then(pl.col("saved_us") / pl.col("path_us") * 100).otherwise(0.0)
    )
    return table.select([pl.col(c).cast(t) for c, t in WHAT_IF_SCHEMA.items()])


RANK_WHAT_IF_SCHEMA = RANK_WHAT_IF_SPEC.schema


def _solve_subset(src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> float:
    """The longest path over just these edges (their nodes renumbered from 0)."""
    if len(src) == 0:
        return 0.0
    nodes = np.unique(np.concatenate([src, dst]))
    return longest.longest_path(len(nodes), np.searchsorted(nodes, src), np.searchsorted(nodes, dst), weight).length


def _own_edges(g: RankGraph) -> tuple[np.ndarray, np.ndarray]:
    """Each edge's rank (its source's; a meeting node's edges out: their end's) and whether it
    is the rank's own work (not a collective edge between ranks)."""
    src, dst = g.edges.src, g.edges.dst
    rank_of_row = g.window.events["rank"].to_numpy()
    real = len(g.nodes.ts)
    edge_rank = rank_of_row[g.nodes.event[np.where(src < real, src, dst)]]
    return edge_rank, ~(np.asarray(g.edges.kind, np.int64) == COLLECTIVE)


def own_paths(g: RankGraph) -> tuple[list[int], list[float]]:
    """The graph's ranks (those with edges, ascending) and each one's own path: its edges alone,
    collectives weighing their transfer."""
    solved = np.maximum(g.weight, 0.0)
    edge_rank, own = _own_edges(g)
    ranks = np.unique(edge_rank).tolist()
    src, dst = g.edges.src, g.edges.dst
    lengths = [_solve_subset(src[m], dst[m], solved[m]) for m in ((edge_rank == r) & own for r in ranks)]
    return ranks, lengths


def path_if_paced(g: RankGraph, rank: int, median: float, length: float) -> float:
    """The graph's path with the rank's own work scaled from its own path's `length` to `median`."""
    solved = np.maximum(g.weight, 0.0)
    edge_rank, own = _own_edges(g)
    scaled = np.where((edge_rank == rank) & own, solved * (median / length), solved)
    return longest.longest_path(g.node_count, g.edges.src, g.edges.dst, scaled, g.meetings).length


def slower_than(length: float, median: float) -> bool:
    """Whether a rank's own path is tried at the median's pace."""
    return not (length <= median or length == 0)


def rank_what_if(g: RankGraph) -> pl.DataFrame:
    """The job's path if each rank slower than the median did its own work at the median's pace."""
    ranks, lengths = own_paths(g)
    median = float(np.median(lengths)) if lengths else 0.0
    job_now = longest.longest_path(g.node_count, g.edges.src, g.edges.dst, np.maximum(g.weight, 0.0), g.meetings).length
    after = [
        path_if_paced(g, r, median, length) if slower_than(length, median) else job_now
        for r, length in zip(ranks, lengths, strict=True)
    ]
    return rank_table(ranks, lengths, median, job_now, after)


def rank_table(
    ranks: list[int], lengths: list[float], median: float, job_now: float, after: list[float]
) -> pl.DataFrame:
    """RANK_WHAT_IF_SCHEMA's table from each rank's own path and the job's path with it paced."""
    table = pl.DataFrame(
        {"rank": ranks, "own_path_us": lengths, "job_path_if_median_us": after},
        schema={"rank": pl.Int32(), "own_path_us": pl.Float64(), "job_path_if_median_us": pl.Float64()},
    ).with_columns(
        median_own_path_us=pl.lit(median, dtype=pl.Float64),
        job_path_us=pl.lit(job_now, dtype=pl.Float64),
    )
    table = table.with_columns(saved_us=pl.col("job_path_us") - pl.col("job_path_if_median_us")).with_columns(
        saved_pct=pl.when(pl.col("job_path_us") > 0)
        .then(pl.col("saved_us") / pl.col("job_path_us") * 100)
        .otherwise(0.0)
    )
    return table.select([pl.col(c).cast(t) for c, t in RANK_WHAT_IF_SCHEMA.items()])
