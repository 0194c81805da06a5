"""The device edges of the critical-path graph: kernel spans, launch and kernel–kernel delays, syncs.

Per stream, kernels in start order (syncs by their end): a launch-delay edge (call start → kernel
start) when the stream's queue was empty at the launch and is empty again at the kernel's start,
the previous kernel on the stream ended before the launch, and any GPU→GPU wait ended before it;
otherwise a kernel–kernel edge (previous end → start) when the gap is under 1.5 ms and any wait
ended before the previous kernel. Syncs add zero-weight edges from the kernel waited on to the end
of the blocking call (stream, context and event syncs) or to the start of the next kernel on the
waiting stream (Stream Wait Event). HTA 0.6.1's `_construct_graph_from_kernels`.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.views.critical_path.graph import KERNEL_KERNEL, LAUNCH, OPERATOR, SYNC, Edges, Nodes
from htatui.analysis.views.critical_path.window import STREAM_WAIT_EVENT, Window


def _launches(full: pl.DataFrame) -> pl.DataFrame:
    """Launch calls with a device row: row, pid, tid, ts, the device row and its stream, in time order."""
    device = full.filter(pl.col("hstream") != -1).select(
        pl.col("row").alias("partner"), kernel_stream=pl.col("hstream"), gpu=pl.col("pid")
    )
    calls = full.filter((pl.col("hstream") == -1) & pl.col("name").cast(pl.Utf8).is_in(hta.RUNTIME_LAUNCH_EVENTS))
    return calls.join(device, on="partner", how="inner").sort("ts", "row")


def queue_lengths(full: pl.DataFrame) -> np.ndarray:
    """Per row of `full`: a launch's or a device row's queue length on its stream just after it (NaN: neither)."""
    launches = _launches(full).sort("row")
    kernels = full.filter(pl.col("hstream") != -1).join(
        launches.select(pl.col("partner").alias("row")), on="row", how="semi"
    )
    rows = np.concatenate([launches["row"].to_numpy(), kernels["row"].to_numpy()])
    stream = np.concatenate([launches["kernel_stream"].to_numpy(), kernels["hstream"].to_numpy()])
    ts = np.concatenate([launches["ts"].to_numpy(), kernels["ts"].to_numpy()])
    delta = np.concatenate([np.ones(launches.height), -np.ones(kernels.height)])
    # pandas' sort_values(by="ts"): numpy's quicksort, ties falling as it leaves them.
    order = np.argsort(ts, kind="quicksort")
    rows, stream, delta = rows[order], stream[order], delta[order]
    by_stream = np.argsort(stream, kind="stable")
    length = np.empty(len(rows))
    for s in np.unique(stream):
        picked = by_stream[stream[by_stream] == s]
        length[picked] = np.cumsum(delta[picked])
    after = np.full(full.height, np.nan)
    after[rows] = length
    return after


def _event_sources(full: pl.DataFrame) -> dict[int, int]:
    """For each event sync / stream wait row: the device row it waits for (row → row).

    The event recorded is the last cudaEventRecord on the waiting call's thread before the call
    (the trace names it by `wait_on_cuda_event_record_corr_id`, a field htatui does not read; see
    docs/semantics-critical-path.md); the work it stands for is the last launch on the recorded
    stream before the record.
    """
    name = pl.col("name").cast(pl.Utf8)
    waits = full.filter(name.is_in(["Event Sync", STREAM_WAIT_EVENT]) & (pl.col("partner") >= 0))
    if waits.height == 0:
        return {}
    calls = full.select(pl.col("row").alias("partner"), call_ts=pl.col("ts"), call_pid="pid", call_tid="tid")
    waits = waits.join(calls, on="partner", how="left").select(
        "row", "wait_on_stream", "call_ts", "call_pid", "call_tid"
    )
    records = full.filter(name == "cudaEventRecord").select(record_ts=pl.col("ts"), call_pid="pid", call_tid="tid")
    waits = (
        waits.sort("call_ts")
        .join_asof(
            records.sort("record_ts"),
            left_on="call_ts",
            right_on="record_ts",
            by=["call_pid", "call_tid"],
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("record_ts").is_not_null() & pl.col("wait_on_stream").is_not_null())
    )
    launches = _launches(full).select(launch_ts="ts", wait_on_stream="kernel_stream", source="partner")
    found = waits.sort("record_ts").join_asof(
        launches.sort("launch_ts"),
        left_on="record_ts",
        right_on="launch_ts",
        by="wait_on_stream",
        strategy="backward",
        check_sortedness=False,
    )
    found = found.filter(pl.col("source").is_not_null())
    return dict(zip(found["row"].to_list(), found["source"].to_list(), strict=True))


def _wait_targets(full: pl.DataFrame) -> dict[int, int]:
    """For each Stream Wait Event row: the next device row launched on its stream from the waiting thread."""
    name = pl.col("name").cast(pl.Utf8)
    waits = full.filter((name == STREAM_WAIT_EVENT) & (pl.col("partner") >= 0))
    if waits.height == 0:
        return {}
    calls = full.select(pl.col("row").alias("partner"), call_ts=pl.col("ts"), pid="pid", tid="tid")
    waits = waits.select("row", "partner", kernel_stream="hstream").join(calls, on="partner", how="left")
    launches = _launches(full).select("pid", "tid", "kernel_stream", launch_ts="ts", target="partner")
    found = (
        waits.sort("call_ts")
        .join_asof(
            launches.sort("launch_ts"),
            left_on="call_ts",
            right_on="launch_ts",
            by=["pid", "tid", "kernel_stream"],
            strategy="forward",
            check_sortedness=False,
        )
        .filter(pl.col("target").is_not_null())
    )
    return dict(zip(found["row"].to_list(), found["target"].to_list(), strict=True))


def device_edges(window: Window, nodes: Nodes, edges: Edges, causal_launches: bool) -> None:
    """Add the device edges (module docstring) for the window's device rows and syncs.

    `causal_launches`: every kernel without a launch-delay edge gets a zero-weight one, so no
    kernel starts before its launch call (HTA leaves a kernel queued behind work from before the
    window, or after a gap over the threshold, with no edge in: a path could start at it).
    """
    full, kept = window.full, window.events
    queue = queue_lengths(full)
    full_ts = full["ts"].to_numpy()
    kept_of_full = np.full(full.height, -1, dtype=np.int64)
    kept_of_full[kept["row"].to_numpy()] = np.arange(kept.height)
    sources = _event_sources(full)
    targets = _wait_targets(full)
    name = pl.col("name").cast(pl.Utf8)
    rows = kept.with_columns(pos=pl.int_range(pl.len(), dtype=pl.Int64)).filter(
        ((pl.col("hstream") != -1) | name.is_in(hta.DEVICE_SYNCS)) & (pl.col("partner") >= 0)
    )
    is_sync = rows["cat"].cast(pl.Utf8) == "cuda_sync"
    sort_by = np.where(is_sync.to_numpy(), rows["end"].to_numpy(), rows["ts"].to_numpy())
    order = np.argsort(sort_by, kind="quicksort")
    last_end: dict[int, int] = {}
    kernel_sync: dict[int, int] = {}

    def call_end(call_row: int) -> int:
        k = kept_of_full[call_row]
        return int(nodes.end_of[k]) if k >= 0 else -1

    columns = [rows[c].to_list() for c in ("pos", "row", "partner", "hstream")]
    labels = rows["name"].cast(pl.Utf8).to_list()
    syncs = is_sync.to_list()
    for i in order.tolist():
        pos, row, partner, stream = (int(column[i]) for column in columns)
        label = labels[i]
        if syncs[i]:
            if label in ("Event Sync", STREAM_WAIT_EVENT):
                source = sources.get(row)
                if source is None:
                    continue
                if label == STREAM_WAIT_EVENT:
                    target = targets.get(row)
                    if target is not None:
                        kernel_sync[target] = source
                    continue
                k = kept_of_full[source]
                end, dst = (int(nodes.end_of[k]) if k >= 0 else -1), call_end(partner)
                if end >= 0 and dst >= 0:
                    edges.add(end, dst, SYNC)
                continue
            dst = call_end(partner)
            if dst < 0:
                continue
            waited = list(last_end.values()) if label == "Context Sync" else [last_end.get(stream, -1)]
            for node in waited:
                if node >= 0:
                    edges.add(node, dst, SYNC)
            continue
        start, end = int(nodes.start_of[pos]), int(nodes.end_of[pos])
        if start < 0:
            continue
        edges.add(start, end, OPERATOR, pos)
        sync_end = -1
        waits = row in kernel_sync
        if waits:
            k = kept_of_full[kernel_sync.pop(row)]
            sync_end = int(nodes.end_of[k]) if k >= 0 else -1
            if sync_end < 0:
                waits = False
            else:
                edges.add(sync_end, start, SYNC)
        previous = last_end.get(stream, -1)
        launch_ts = full_ts[partner]
        call_start = int(nodes.start_of[kept_of_full[partner]]) if kept_of_full[partner] >= 0 else -1
        if (
            queue[partner] == 1
            and queue[row] == 0
            and (previous < 0 or nodes.ts[previous] < launch_ts)
            and (not waits or nodes.ts[sync_end] < launch_ts)
        ):
            if call_start >= 0:
                edges.add(call_start, start, LAUNCH)
                call_start = -1
        elif (
            previous >= 0
            and nodes.ts[start] - nodes.ts[previous] < hta.KERNEL_KERNEL_DELAY_THRESHOLD_US
            and (not waits or nodes.ts[sync_end] < nodes.ts[previous])
        ):
            edges.add(previous, start, KERNEL_KERNEL, int(nodes.event[previous]))
        if causal_launches and call_start >= 0:
            edges.add(call_start, start, LAUNCH, zero=True)
        last_end[stream] = end
