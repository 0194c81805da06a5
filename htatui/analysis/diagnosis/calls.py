"""Rules on what the host calls inside the step: calls that wait for the GPU, copies from pageable
memory, and the data loader. docs/diagnosis/sync.md, pageable_copy.md and data_loader.md."""

from __future__ import annotations

from typing import Any

import polars as pl

from htatui.analysis.core.intervals import merge_intervals
from htatui.analysis.diagnosis.change import Change
from htatui.analysis.diagnosis.common import short_name, worst_row
from htatui.analysis.diagnosis.context import Context, without
from htatui.analysis.diagnosis.finding import Evidence, Finding


def sync(ctx: Context) -> list[Finding]:
    """Host calls inside the step that wait for the GPU (.item(), stream and device syncs, cudaMemcpy)."""
    minimum = ctx.settings.number("sync", "min_pct")
    factor = ctx.settings.number("sync", "factor")
    rows: list[dict[str, Any]] = []
    for rank in ctx.ranks:
        calls = ctx.facts(rank).sync_calls
        if calls.height == 0:
            continue
        # Nested matches (.item() → _local_scalar_dense → cudaStreamSynchronize) count once.
        spans = merge_intervals(calls.select("ts", "end"), [])
        waited = ctx.per_step(float((spans["end"] - spans["ts"]).sum()), rank)
        # The outermost call of each span names it; the name with the most time leads.
        outer = (
            calls.join(spans.select("ts"), on="ts", how="semi").sort("dur", descending=True).unique("ts", keep="first")
        )
        names = outer.group_by("name").agg(n=pl.len(), us=pl.col("dur").sum())
        top = worst_row(names, "us")
        idle = ctx.per_step(_idle_after(ctx, rank, spans["end"]), rank)
        if ctx.pct(idle) < minimum:
            continue
        rows.append({"rank": rank, "waited": waited, "idle": idle, "calls": ctx.per_step(spans.height, rank), **top})
    if not rows:
        return []
    worst = worst_row(pl.DataFrame(rows), "idle")
    rank, name = int(worst["rank"]), str(worst["name"])
    return [
        Finding(
            "sync",
            f"the host waits for the GPU {worst['calls']:,.0f} times a step ({name} and the like), then the GPU "
            "idles until the host launches again",
            ctx.where([int(r["rank"]) for r in rows], rank, name),
            f"{worst['waited']:,.0f} µs a step in synchronising calls ({ctx.pct(float(worst['waited'])):.1f} % of the "
            f"step); the GPU idle after them: {worst['idle']:,.0f} µs a step",
            "keep values on the GPU inside the step: no .item(), .cpu(), .tolist() or printing a tensor (log every N "
            'steps, accumulate on the GPU); torch.cuda.set_sync_debug_mode("warn") names each sync; copies with '
            "non_blocking=True into pinned memory",
            float(worst["idle"]),
            Evidence("ops", "ops", "main", (("rank", rank), ("name", name))),
            rank,
            Change("name", name, factor),
        )
    ]


def _idle_after(ctx: Context, rank: int, ends: pl.Series) -> float:
    """The GPU idle from each call's end until its next work, outside data loading (the data_loader rule's)."""
    gaps = pl.DataFrame({"ts": ends, "end": ends + ctx.idle_after(rank, ends)}).filter(pl.col("end") > pl.col("ts"))
    left = without(gaps, ctx.loader_spans(rank))
    return float((left["end"] - left["ts"]).sum()) if left.height else 0.0


def pageable_copy(ctx: Context) -> list[Finding]:
    """Copies between the GPU and pageable host memory (synchronous with the host, slower than pinned)."""
    minimum = ctx.settings.number("pageable_copy", "min_pct")
    factor = ctx.settings.number("pageable_copy", "factor")
    rows: list[dict[str, Any]] = []
    for rank in ctx.ranks:
        copies = ctx.facts(rank).pageable
        if copies.height == 0:
            continue
        names = copies.group_by("name").agg(n=pl.len(), us=pl.col("dur").sum())
        total = ctx.per_step(float(names["us"].sum()), rank)
        if ctx.pct(total) < minimum:
            continue
        rows.append(
            {
                "rank": rank,
                "total": total,
                "count": ctx.per_step(float(names["n"].sum()), rank),
                **worst_row(names, "us"),
            }
        )
    if not rows:
        return []
    worst = worst_row(pl.DataFrame(rows), "total")
    rank, name = int(worst["rank"]), str(worst["name"])
    return [
        Finding(
            "pageable_copy",
            f"copies to or from pageable host memory: {worst['count']:,.0f} a step, "
            f"{worst['total']:,.0f} µs on the GPU",
            ctx.where([int(r["rank"]) for r in rows], rank, name),
            f"{name}: {worst['n']:,} copies, {worst['us']:,.0f} µs over the steps; a copy from pageable memory is "
            "staged through a pinned buffer and makes the host wait",
            "pin the host buffers: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, "
            "non_blocking=True)",
            float(worst["total"]) * (1.0 - factor),
            Evidence("kernels", "kernels", "main", (("rank", rank), ("name", name))),
            rank,
            Change("name", name, factor),
        )
    ]


def data_loader(ctx: Context) -> list[Finding]:
    """The data loader's share of the step (TensorBoard's profiler recommended more workers above 5 %)."""
    patterns = ctx.settings.names("data_loader", "names")
    minimum = ctx.settings.number("data_loader", "min_pct")
    factor = ctx.settings.number("data_loader", "factor")
    matrix = ctx.read("rank-steps")
    phases = [c for c in matrix.columns if c.endswith("_us") and _loads(c.removesuffix("_us"), patterns)]
    if not phases or matrix.height == 0:
        return []
    rows: list[dict[str, Any]] = []
    for rank in ctx.ranks:
        own = matrix.filter(pl.col("rank") == rank)
        if own.height == 0:
            continue
        totals = {phase: float(own[phase].fill_null(0.0).sum()) for phase in phases}
        phase = max(totals, key=lambda p: totals[p])
        share = 100.0 * totals[phase] / float(own["step_us"].sum()) if own["step_us"].sum() else 0.0
        if share < minimum:
            continue
        name = phase.removesuffix("_us")
        spans = ctx.facts(rank).loading.filter(pl.col("name") == name)
        idle = ctx.per_step(ctx.idle_within(rank, spans), rank)
        step = int(own.sort(phase, descending=True)["step"][0])
        rows.append(
            {
                "rank": rank,
                "name": name,
                "share": share,
                "us": ctx.per_step(totals[phase], rank),
                "idle": idle,
                "step": step,
            }
        )
    if not rows:
        return []
    worst = worst_row(pl.DataFrame(rows), "idle")
    rank, name = int(worst["rank"]), str(worst["name"])
    return [
        Finding(
            "data_loader",
            f"the data loader takes {worst['share']:.1f} % of the step ({worst['us']:,.0f} µs)",
            ctx.where([int(r["rank"]) for r in rows], rank, short_name(name)),
            f"{name}: {worst['us']:,.0f} µs a step, the GPU idle {worst['idle']:,.0f} µs of it",
            "load ahead of the step: DataLoader(num_workers=N, pin_memory=True, persistent_workers=True, "
            "prefetch_factor=2 or more); move decoding and augmentation out of the training process",
            float(worst["idle"]) * (1.0 - factor),
            Evidence("ranks", "rank-steps", "main", (("rank", rank), ("step", int(worst["step"])))),
            rank,
            Change("annotation", name, factor),
        )
    ]


def _loads(phase: str, patterns: tuple[str, ...]) -> bool:
    return any(pl.Series([phase]).str.contains(pattern)[0] for pattern in patterns)
