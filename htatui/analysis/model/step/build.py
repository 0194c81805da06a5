"""One rank's part of a step graph: its rows in the window, and the edges within the rank.

The host threads' walks and their joins (`host.py`), the device work, its launches, stream
waits and syncs (`device.py`), and gloo's enqueue: a `c10d::` collective op hands the call to a
worker thread, whose `gloo:` range starts after it (the k-th op of a kind to the k-th range of
that kind in the process).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.core.comm_rules import comm_rules
from htatui.analysis.core.kernel_types import COMMUNICATION, kernel_type
from htatui.analysis.core.rules import Rules
from htatui.analysis.model.step import device, host
from htatui.analysis.model.step.graph import EdgeBuffer, Kind, RankPart
from htatui.analysis.model.step.rows import window_rows

NS_DECIMALS = 3
"""Kineto's times are µs with nanosecond decimals."""


@dataclass(frozen=True)
class Window:
    """The time window of one rank's part (µs, the rank's clock) and the row that ends it: the
    file index of the ProfilerStep whose end is the step's end (None: the window has no step,
    its lanes' last nodes end it)."""

    low_us: float
    high_us: float
    step_index: int | None = None


def rank_part(rank: int, events: pl.DataFrame, window: Window, rules: Rules) -> RankPart:
    """The rank's rows in `window` (rows.READS of its events) and every edge within the rank, by
    the communication rules in `rules`."""
    rows = window_rows(events, window.low_us, window.high_us)
    rows = rows.with_columns(comm=_communication(rows, rules))
    times = np.empty(2 * rows.height, dtype=np.float64)
    times[0::2], times[1::2] = rows["ts"].to_numpy(), rows["end"].to_numpy()
    # To the nanosecond the trace records: ts + dur can land a fraction of a ns past the start
    # of what waited for it, which would order the dependency after its effect.
    times = np.round(times, NS_DECIMALS)
    seq = np.zeros(len(times), dtype=np.int64)
    edges = EdgeBuffer()
    clamped: dict[str, int] = {}
    walk = host.walk_threads(rows, times, seq)
    device.device_edges(rows, times, seq, edges, clamped)
    synced = device.sync_edges(rows, times, edges)
    host.host_edges(rows, times, walk, edges, synced)
    enqueued = _enqueue_edges(rows, times, edges, rules)
    joined = host.cross_thread_edges(rows, times, walk, edges, enqueued)
    end_node = -1
    if window.step_index is not None:
        found = np.flatnonzero(rows["index"].to_numpy() == window.step_index)
        if len(found):
            end_node = int(2 * found[0] + 1)
    part = RankPart(
        rank=rank,
        rows=rows,
        times=times,
        seq=seq,
        edges=edges,
        low_us=window.low_us,
        high_us=window.high_us,
        end_node=end_node,
        lane_last=_lane_last(rows, times),
        clamped=clamped,
        waits=np.unique(np.concatenate([np.asarray(sorted(synced | enqueued), np.int64), joined])),
    )
    return part


def _communication(rows: pl.DataFrame, rules: Rules) -> pl.Series:
    """Whether each row is communication work (the communication rules, run once per distinct
    device name and collective name)."""
    device = rows.filter("on_device").select("cat", "name", "collective_name").unique()
    typed = device.with_columns(comm=kernel_type(False, rules) == COMMUNICATION)
    found = rows.join(typed, on=["cat", "name", "collective_name"], how="left", nulls_equal=True, maintain_order="left")
    return found["comm"].fill_null(False)


def _lane_last(rows: pl.DataFrame, times: np.ndarray) -> np.ndarray:
    """Each lane's last node (its latest end)."""
    if rows.height == 0:
        return np.zeros(0, dtype=np.int64)
    ends = rows.select("lane", node=2 * pl.col("row") + 1, t=pl.Series(times[1::2]))
    return ends.sort("t", "node").group_by("lane").agg(pl.col("node").last())["node"].to_numpy().astype(np.int64)


def _enqueue_edges(rows: pl.DataFrame, times: np.ndarray, edges: EdgeBuffer, rules: Rules) -> set[int]:
    """FORK edges from each `c10d::` collective op to the worker's range of that call (module
    docstring); returns the ranges' start nodes."""
    host_rows = rows.filter(~pl.col("on_device")).select("row", "pid", "lane", "name", "ts")
    # The comm rules' tiers: c10d ops, and the process group's ranges (gloo:…, a custom backend's).
    comm = comm_rules(rules)
    ops = host_rows.filter(pl.col("name").str.contains(comm.host_regex("c10d")))
    ranges = host_rows.filter(pl.col("name").str.contains(comm.host_regex("range")))
    if ops.height == 0 or ranges.height == 0:
        return set()

    def kind(name: pl.Expr) -> pl.Expr:
        # c10d::_allgather_base_ and gloo:all_gather are one kind.
        bare = name.str.replace(r"^[A-Za-z0-9]+:+", "").str.replace_all("_", "").str.to_lowercase()
        return bare.str.replace(r"base$", "")

    ops = ops.with_columns(kind=kind(pl.col("name")), k=pl.int_range(pl.len()).over("pid", kind(pl.col("name"))))
    ranges = ranges.with_columns(kind=kind(pl.col("name")), k=pl.int_range(pl.len()).over("pid", kind(pl.col("name"))))
    paired = ops.join(ranges, on=["pid", "kind", "k"], suffix="_range").filter(
        (pl.col("lane") != pl.col("lane_range")) & (pl.col("ts") <= pl.col("ts_range"))
    )
    if paired.height == 0:
        return set()
    op = paired["row"].to_numpy()
    target = 2 * paired["row_range"].to_numpy()
    # From the op's end when it ended before the range began, else from its start.
    source = np.where(times[2 * op + 1] <= times[target], 2 * op + 1, 2 * op)
    edges.add(source, target, Kind.FORK, paired["row_range"].to_numpy(), 0.0)
    return set(target.tolist())
