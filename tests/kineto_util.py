"""Tiny hand-made Kineto traces for tests: write a list of event dicts as a trace file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

Event = dict[str, Any]


def write_trace(
    path: Path,
    events: list[dict[str, Any]],
    *,
    rank: int | None = None,
    base_ns: int | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write `events` as a Kineto-style trace (gzip when the name ends in .gz)."""
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Test GPU", "numSms": 108}]}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 8}
    doc["traceEvents"] = events
    if base_ns is not None:
        doc["baseTimeNanoseconds"] = base_ns
    doc.update(extra or {})
    text = json.dumps(doc, indent=1).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


def named(args: dict[str, Any]) -> dict[str, Any]:
    """Args whose names are no identifiers ("Input Dims"), typed for `**` (so mypy does not match
    their values against a helper's own keywords)."""
    return args


def kernel(
    name: str, ts: float, dur: float, *, stream: int = 7, corr: int | None = None, **args: Any
) -> dict[str, Any]:
    a: dict[str, Any] = {"device": 0, "stream": stream, **args}
    if corr is not None:
        a["correlation"] = corr
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": a}


def runtime(name: str, ts: float, dur: float, corr: int, *, tid: int = 1) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "External id": corr},
    }


def cpu_op(name: str, ts: float, dur: float, *, tid: int = 1, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return cpu_op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")


def traces_of(tmp_path: Path, *ranks: list[Event]) -> TraceSet:
    """One Kineto JSON file per rank (rank-N.json with distributedInfo.rank N), loaded."""
    for rank, events in enumerate(ranks):
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": len(ranks)},
            "deviceProperties": [{"id": 0, "name": "Test GPU", "numSms": 108}],
            "traceEvents": events,
        }
        with (tmp_path / f"rank-{rank}.json").open("w") as fh:
            json.dump(doc, fh)
    return load_traces([tmp_path], use_cache=False, max_workers=1)


def device(cat: str, name: str, ts: float, dur: float, *, stream: int = 7, corr: int | None = None) -> Event:
    args: dict[str, Any] = {"device": 0, "stream": stream}
    if corr is not None:
        args["correlation"] = corr
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}


def context_sync(ts: float, dur: float, corr: int) -> Event:
    """A CUDA context synchronisation: a `cuda_sync` row on stream -1 (the host waits for the device)."""
    return {
        "ph": "X",
        "cat": "cuda_sync",
        "name": "Context Sync",
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": -1, "correlation": corr},
    }


ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def meeting_rank(arrival: float) -> list[Event]:
    """A rank that meets the others at an all-reduce: `work` [0, arrival] launches two all-reduces,
    the first runs arrival–5100, the second 5100–5200 (queued behind it); the host syncs to 5204,
    then `after` [5210, 5220]."""
    return [
        cpu_op("work", 0, arrival),
        runtime("cudaLaunchKernel", arrival - 10, 5, 1),
        kernel(ALL_REDUCE, arrival, 5100 - arrival, corr=1),
        runtime("cudaLaunchKernel", arrival - 4, 2, 3),
        kernel(ALL_REDUCE, 5100, 100, corr=3),
        runtime("cudaDeviceSynchronize", arrival + 1, 5203 - arrival, 2),
        context_sync(5200, 4, 2),
        cpu_op("after", 5210, 10),
    ]
