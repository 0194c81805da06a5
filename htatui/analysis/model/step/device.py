"""Device edges of a step graph: work on each stream, its launch, waits between streams, host syncs.

Each kernel, copy or memset is an edge from its start to its end (KERNEL). Its start depends on
its launching call's start (LAUNCH), on the previous work of its stream (STREAM) and, when its
launching thread called cudaStreamWaitEvent since its previous launch, on the work of another
stream of the device that ended last before it started (GPU_WAIT). A blocking host call's end
depends on the device work that ended last before it returned among the work launched before the
call began (SYNC; a copy call only on its own copy).

A device row that starts before its launching call (the GPU's and the host's clocks disagree by
a few µs) is moved to the call's start, and the count kept: a path never runs backwards in time.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from htatui.analysis.model.step.graph import EdgeBuffer, Floats, Ints, Kind
from htatui.analysis.model.step.host import BLOCKING_CALLS

STREAM_WAIT_CALLS = ("cudaStreamWaitEvent", "hipStreamWaitEvent", "cuStreamWaitEvent")
"""Calls that make a stream wait for work recorded on another (the event's stream is not in the trace)."""

COPY_CALLS = ("cudaMemcpy", "cudaMemcpyAsync", "hipMemcpy", "hipMemcpyAsync", "hipMemcpyWithStream")
"""Blocking calls that wait only for their own copy."""

CLAMPED_LAUNCH = "device work that starts before its launching call"


def device_edges(rows: pl.DataFrame, times: Floats, seq: Ints, edges: EdgeBuffer, clamped: dict[str, int]) -> None:
    """The device edges (module docstring) into `edges`; `times` of device nodes clamped to their
    launch and made monotone along each stream; `seq` set along each stream."""
    device = rows.filter("on_device").select("row", "lane", "launch", "ts")
    if device.height == 0:
        return
    row = device["row"].to_numpy()
    launch = device["launch"].to_numpy()
    has_launch = launch >= 0
    start, end = 2 * row, 2 * row + 1
    launch_start = np.where(has_launch, times[2 * np.maximum(launch, 0)], -np.inf)
    early = has_launch & (times[start] < launch_start)
    if early.any():
        clamped[CLAMPED_LAUNCH] = clamped.get(CLAMPED_LAUNCH, 0) + int(early.sum())
    times[start] = np.maximum(times[start], launch_start)
    times[end] = np.maximum(times[end], times[start])
    lane = device["lane"].rank("dense").to_numpy().astype(np.int64)
    order = np.lexsort((times[start], lane))
    row, launch, start, end, lane = row[order], launch[order], start[order], end[order], lane[order]
    # Along a stream: start, end, next start, … never backwards (overlaps of a few ns).
    walk = np.empty(2 * len(row), dtype=np.int64)
    walk[0::2], walk[1::2] = start, end
    walk_lane = np.repeat(lane, 2)
    cuts = np.flatnonzero(np.diff(walk_lane)) + 1
    walk_times = times[walk]
    for part in np.split(np.arange(len(walk)), cuts):
        walk_times[part] = np.maximum.accumulate(walk_times[part])
    times[walk] = walk_times
    seq[walk] = np.arange(len(walk), dtype=np.int64)
    edges.add(start, end, Kind.KERNEL, row)
    launched = launch >= 0
    edges.add(2 * launch[launched], start[launched], Kind.LAUNCH, row[launched], 0.0)
    follows = np.zeros(len(row), dtype=bool)
    follows[1:] = lane[1:] == lane[:-1]
    edges.add(end[:-1][follows[1:]], start[follows], Kind.STREAM, row[follows], 0.0)
    _stream_waits(rows, times, row, launch, start, end, lane, edges)


def _stream_waits(
    rows: pl.DataFrame, times: Floats, row: Ints, launch: Ints, start: Ints, end: Ints, lane: Ints, edges: EdgeBuffer
) -> None:
    """GPU_WAIT edges: device work launched after a cudaStreamWaitEvent on its launching thread
    (since that thread's previous launch) waits for the other stream's work that ended last
    before it started (the trace does not say which event, so the latest is taken)."""
    host = rows.filter(~pl.col("on_device"))
    waits = host.filter(pl.col("name").is_in(STREAM_WAIT_CALLS)).select("lane", "ts")
    if waits.height == 0:
        return
    launched = launch >= 0
    if not launched.any():
        return
    thread = rows["lane"].to_numpy()
    calls = pl.DataFrame(
        {
            "i": np.flatnonzero(launched),
            "lane": thread[launch[launched]],
            "ts": times[2 * launch[launched]],
        }
    ).sort("ts")
    # Each launch's previous launch on its thread, and the last stream wait before it there.
    calls = calls.with_columns(previous=pl.col("ts").shift(1).over("lane").fill_null(-np.inf))
    found = calls.join_asof(
        waits.sort("ts").rename({"ts": "wait_ts"}),
        left_on="ts",
        right_on="wait_ts",
        by="lane",
        strategy="backward",
        check_sortedness=False,
    ).filter(pl.col("wait_ts").is_not_null() & (pl.col("wait_ts") > pl.col("previous")))
    if found.height == 0:
        return
    by_end = np.argsort(times[end], kind="stable")
    end_times = times[end][by_end]
    end_lane = lane[by_end]
    # Per sorted end: the latest earlier end on another lane (the start of its run of one lane, − 1).
    run_start = np.zeros(len(by_end), dtype=np.int64)
    changes = np.flatnonzero(end_lane[1:] != end_lane[:-1]) + 1
    run_start[changes] = changes
    run_start = np.maximum.accumulate(run_start)
    waiting = found["i"].to_numpy()
    at = np.searchsorted(end_times, times[start[waiting]], side="right") - 1
    own = (at >= 0) & (end_lane[np.maximum(at, 0)] == lane[waiting])
    at = np.where(own, run_start[np.maximum(at, 0)] - 1, at)
    has = at >= 0
    edges.add(end[by_end[at[has]]], start[waiting[has]], Kind.GPU_WAIT, row[waiting[has]], 0.0)


def sync_edges(rows: pl.DataFrame, times: Floats, edges: EdgeBuffer) -> set[int]:
    """SYNC edges into blocking calls' ends (module docstring); returns the calls' end nodes that got one."""
    calls = rows.filter(~pl.col("on_device") & pl.col("name").is_in(BLOCKING_CALLS)).select("row", "name")
    device = rows.filter("on_device").select("row", "launch")
    if calls.height == 0 or device.height == 0:
        return set()
    d_row = device["row"].to_numpy()
    d_launch = device["launch"].to_numpy()
    d_end = times[2 * d_row + 1]
    d_launched_at = np.where(d_launch >= 0, times[2 * np.maximum(d_launch, 0)], -np.inf)
    by_end = np.argsort(d_end, kind="stable")
    end_sorted = d_end[by_end]
    own_copy = dict(zip(d_launch.tolist(), d_row.tolist(), strict=True))
    srcs, dsts = [], []
    for call, name in calls.iter_rows():
        t_start, t_end = times[2 * call], times[2 * call + 1]
        if name in COPY_CALLS:
            copy = own_copy.get(call)
            if copy is not None and t_start <= times[2 * copy + 1] <= t_end:
                srcs.append(2 * copy + 1)
                dsts.append(2 * call + 1)
            continue
        at = int(np.searchsorted(end_sorted, t_end, side="right")) - 1
        while at >= 0 and end_sorted[at] >= t_start:
            if d_launched_at[by_end[at]] < t_start:
                srcs.append(int(2 * d_row[by_end[at]] + 1))
                dsts.append(int(2 * call + 1))
                break
            at -= 1
    edges.add(np.asarray(srcs, np.int64), np.asarray(dsts, np.int64), Kind.SYNC, np.asarray(dsts, np.int64) // 2, 0.0)
    return set(dsts)
