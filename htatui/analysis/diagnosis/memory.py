"""The memory rule: device memory close to its capacity, or live memory growing every step.
docs/diagnosis/memory.md."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from htatui.analysis.diagnosis.context import Context
from htatui.analysis.diagnosis.finding import Evidence, Finding
from htatui.analysis.memory import usage
from htatui.trace.memory_inputs import MemoryInputError, read_memory

GIB = 1024**3
MIB = 1024**2


def memory(ctx: Context) -> list[Finding]:
    """Peak reserved memory near the device's capacity; live memory at each step start that only grows."""
    found: list[Finding] = []
    for rank in ctx.ranks:
        trace = ctx.traces.ranks[rank]
        path = trace.path
        if not isinstance(path, Path) or not ctx.facts(rank).memory_events:
            continue
        try:
            analysis = usage.analyse(read_memory(path))
        except MemoryInputError:
            continue
        found += _near_capacity(ctx, rank, analysis) + _growing(ctx, rank, analysis)
    return found


def _capacity(ctx: Context, rank: int, device: str) -> int | None:
    """The device's memory in bytes from the trace's deviceProperties ('cuda:0' → id 0)."""
    index = device.rsplit(":", 1)[-1]
    for props in ctx.traces.ranks[rank].meta.device_properties:
        total = props.get("totalGlobalMem") if isinstance(props, dict) else None
        if str(props.get("id")) == index and isinstance(total, int) and total > 0:
            return total
    return None


def _near_capacity(ctx: Context, rank: int, analysis: usage.MemoryAnalysis) -> list[Finding]:
    ceiling = ctx.settings.number("memory", "max_peak_pct")
    found = []
    for row in analysis.summary.iter_rows(named=True):
        device = str(row["device"])
        capacity = _capacity(ctx, rank, device)
        peak = row["reserved_peak_bytes"] or row["peak_bytes"]
        if capacity is None or not peak or 100.0 * peak / capacity < ceiling:
            continue
        found.append(
            Finding(
                "memory",
                f"memory is close to the device's capacity: {peak / GIB:,.1f} of {capacity / GIB:,.1f} GiB at the peak",
                f"rank {rank} · {device}",
                f"reserved peak {peak / GIB:,.2f} GiB ({100.0 * peak / capacity:.0f} % of {capacity / GIB:,.1f} GiB); "
                f"allocated peak {row['peak_bytes'] / GIB:,.2f} GiB",
                "make room before it runs out: activation checkpointing (torch.utils.checkpoint), bf16 autocast, a "
                "smaller micro-batch with gradient accumulation; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                "against fragmentation",
                0.0,
                Evidence("memory", "", "", (("device", device),)),
                rank,
            )
        )
    return found


def _growing(ctx: Context, rank: int, analysis: usage.MemoryAnalysis) -> list[Finding]:
    least = ctx.settings.number("memory", "min_growth_mib") * MIB
    growth = usage.growth(analysis)
    found = []
    for device, leaking in growth.leaking.items():
        points = growth.points.filter(pl.col("device") == device)
        grown = float(points["live_bytes"][-1] - points["live_bytes"][0]) if points.height else 0.0
        if not leaking or grown < least:
            continue
        found.append(
            Finding(
                "memory",
                f"live memory grows every step: +{grown / MIB:,.0f} MiB over {points.height} steps (a probable leak)",
                f"rank {rank} · {device}",
                f"live bytes at each {growth.basis.removesuffix('s')}: "
                + ", ".join(f"{value / MIB:,.0f}" for value in points["live_bytes"].to_list())
                + " MiB",
                "find what stays alive across steps (the Memory page lists the growing sites): losses kept without "
                ".item() or .detach(), lists of tensors, caches, hooks that hold their inputs",
                0.0,
                Evidence("memory", "", "", (("device", device),)),
                rank,
            )
        )
    return found
