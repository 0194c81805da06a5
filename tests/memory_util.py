"""Hand-made CUDA memory snapshots and memory-event traces for the memory tests."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

ALLOCATOR = {
    "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long)",
    "filename": "CUDACachingAllocator.cpp",
    "line": 0,
}
LIBRARY = {"name": "linear", "filename": "/usr/lib/python3.11/site-packages/torch/nn/functional.py", "line": 3}
MODEL = [ALLOCATOR, LIBRARY, {"name": "forward", "filename": "/home/me/model.py", "line": 10}]
LOSS = [ALLOCATOR, {"name": "compute_loss", "filename": "/home/me/loss.py", "line": 5}]
MODEL_SITE = "forward (/home/me/model.py:10)"
LOSS_SITE = "compute_loss (/home/me/loss.py:5)"


def entry(
    action: str, addr: int, size: int, time_us: int, frames: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "action": action,
        "addr": addr,
        "size": size,
        "stream": 0,
        "time_us": time_us,
        "frames": frames or [],
        **extra,
    }


def snapshot_a() -> dict[str, Any]:
    """Segment 1000 (4096 B) allocated in the trace; segment 9000 (1024 B) and its 300-B block, and
    a 256-B block at 5000 freed in the trace, existed before it. Allocated after each event:
    556 (pre-existing 300 + 256), 1068, 2092, 2092, 1580, 3628 (peak), 3372, 3372 (an OOM asking 8192)."""
    trace = [
        entry("segment_alloc", 1000, 4096, 10),
        entry("alloc", 1000, 512, 11, MODEL),
        entry("alloc", 1512, 1024, 12, LOSS),
        entry("free_requested", 1000, 512, 13, MODEL),
        entry("free_completed", 1000, 512, 14, MODEL),
        entry("alloc", 2536, 2048, 15, MODEL),
        entry("free_completed", 5000, 256, 16, LOSS),
        entry("oom", 0, 8192, 17, MODEL, device_free=100),
    ]
    segments = [
        {
            "device": 0,
            "address": 1000,
            "total_size": 4096,
            "allocated_size": 3072,
            "stream": 0,
            "segment_type": "large",
            "blocks": [
                {"address": 1000, "size": 512, "requested_size": 512, "state": "inactive", "frames": []},
                {"address": 1512, "size": 1024, "requested_size": 1000, "state": "active_allocated", "frames": LOSS},
                {
                    "address": 2536,
                    "size": 2048,
                    "requested_size": 2048,
                    "state": "active_pending_free",
                    "frames": MODEL,
                },
                {"address": 4584, "size": 512, "requested_size": 512, "state": "inactive", "frames": []},
            ],
        },
        {
            "device": 0,
            "address": 9000,
            "total_size": 1024,
            "allocated_size": 300,
            "stream": 0,
            "segment_type": "small",
            "blocks": [
                {"address": 9000, "size": 300, "requested_size": 300, "state": "active_awaiting_free", "frames": []},
                {"address": 9300, "size": 724, "requested_size": 724, "state": "inactive", "frames": []},
            ],
        },
    ]
    return {"segments": segments, "device_traces": [trace], "allocator_settings": {}, "external_annotations": []}


def leaking_snapshot(steps: int = 3, leak: bool = True) -> dict[str, Any]:
    """Each step (annotation START at 10k+5) follows one 100-B allocation at 10k+1 that is kept when `leak`,
    and a 50-B temporary at 10k+2 that is always freed at 10k+3."""
    trace: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for k in range(1, steps + 1):
        base = 10 * k
        trace.append(entry("alloc", 100 * k, 100, base + 1, MODEL))
        trace.append(entry("alloc", 5000 + k, 50, base + 2, LOSS))
        trace.append(entry("free_completed", 5000 + k, 50, base + 3, LOSS))
        if not leak:
            trace.append(entry("free_completed", 100 * k, 100, base + 4, MODEL))
        annotations.append({"stage": "START", "name": "Optimizer.step#SGD.step", "device": 0, "time_us": base + 5})
        annotations.append({"stage": "END", "name": "Optimizer.step#SGD.step", "device": 0, "time_us": base + 6})
    return {"segments": [], "device_traces": [trace], "external_annotations": annotations}


def write_pickle(path: Path, obj: Any) -> Path:
    path.write_bytes(pickle.dumps(obj, protocol=4))
    return path


def memory_event(
    ts: float, delta: int, total: int, addr: int, reserved: int = 2000, device_type: int = 1
) -> dict[str, Any]:
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "args": {
            "Total Reserved": reserved,
            "Total Allocated": total,
            "Bytes": delta,
            "Device Id": 0,
            "Device Type": device_type,
            "Addr": addr,
        },
    }


def annotation(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}


def memory_trace_events() -> list[dict[str, Any]]:
    """1000 B live before profiling; ProfilerStep#1 [0,100) with forward [10,50) and backward [50,90),
    ProfilerStep#2 [100,200). Allocated: 1100 @5, 1400 @20 (peak), 1100 @60, 1150 @70, 1160 @110, 1060 @120."""
    return [
        annotation("ProfilerStep#1", 0, 100),
        annotation("forward", 10, 40),
        annotation("backward", 50, 40),
        annotation("ProfilerStep#2", 100, 100),
        memory_event(5, 100, 1100, 1),
        memory_event(20, 300, 1400, 2, reserved=3000),
        memory_event(60, -300, 1100, 2),
        memory_event(70, 50, 1150, 3),
        memory_event(110, 10, 1160, 4),
        memory_event(120, -100, 1060, 1),
    ]
