"""Rules where the GPU waits for the host: host-bound steps, storms of small kernels, and GPU idle
at the step's edges. docs/diagnosis/host_bound.md, kernel_storm.md and step_gaps.md."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from htatui.analysis.diagnosis.change import Change
from htatui.analysis.diagnosis.common import CPU_BOUND, LAUNCH_OVERHEAD, worst_row
from htatui.analysis.diagnosis.context import Context, Holes
from htatui.analysis.diagnosis.finding import Evidence, Finding

HOST_BOUND_CHANGE = (
    'launch less from Python: CUDA graphs (torch.compile(mode="reduce-overhead"), torch.cuda.graphs), '
    "torch.compile to fuse small ops, a larger batch so each launch does more; keep host work (logging, "
    ".item(), data preparation) out of the step"
)


def host_bound(ctx: Context) -> list[Finding]:
    """The GPU idles much of its span, most of it waiting for the host to launch work."""
    min_idle = ctx.settings.number("host_bound", "min_idle_pct")
    min_wait = ctx.settings.number("host_bound", "min_host_wait_pct")
    factor = ctx.settings.number("host_bound", "factor")
    temporal = ctx.read("temporal")
    streams = ctx.read("idle", "by-stream")
    rows: list[dict[str, Any]] = []
    for rank, idle_us, idle_pct in temporal.select("rank", "idle_us", "idle_pct").iter_rows():
        own = streams.filter(pl.col("rank") == rank)
        if idle_pct is None or idle_pct < min_idle or own.height == 0:
            continue
        # The stream doing the most work: its idle says what the GPU waited for.
        busiest_stream = _busiest_stream(ctx, rank)
        working = own.filter(pl.col("stream") == busiest_stream) if busiest_stream is not None else own.clear()
        busiest = (working if working.height else own.sort("total_us", descending=True)).row(0, named=True)
        if (busiest["host_wait_pct"] or 0.0) < min_wait:
            continue
        waited = ctx.per_step(idle_us * busiest["host_wait_pct"] / 100.0, rank)
        rows.append({"rank": rank, "us": waited, "idle_pct": idle_pct, **busiest})
    if not rows:
        return []
    worst = worst_row(pl.DataFrame(rows), "us")
    rank, waited = int(worst["rank"]), float(worst["us"])
    return [
        Finding(
            "host_bound",
            f"the GPU waits for the host: idle {worst['idle_pct']:.0f} % of the time, "
            f"{worst['host_wait_pct']:.0f} % of that for the host to launch work",
            ctx.where([int(r["rank"]) for r in rows], rank),
            f"{waited:,.0f} µs a step of GPU idle with nothing launched; stream {worst['stream']}: host wait "
            f"{worst['host_wait_us']:,.0f} of {worst['total_us']:,.0f} µs idle",
            HOST_BOUND_CHANGE,
            waited * (1.0 - factor),
            Evidence("idle", "idle", "by-stream", (("rank", rank), ("stream", int(worst["stream"])))),
            rank,
            Change("bound_by", CPU_BOUND, factor),
        )
    ]


def _busiest_stream(ctx: Context, rank: int) -> int | None:
    """The stream with the most GPU time on the rank."""
    gpu = ctx.facts(rank).kernels.filter(pl.col("stream").is_not_null())
    if gpu.height == 0:
        return None
    totals = gpu.group_by("stream").agg(pl.col("dur").sum()).sort(["dur", "stream"], descending=[True, False])
    return int(totals["stream"][0])


def kernel_storm(ctx: Context) -> list[Finding]:
    """Many launches a step of kernels that run shorter than it takes to launch them."""
    min_launches = ctx.settings.number("kernel_storm", "min_launches_per_step")
    max_gap = ctx.settings.number("kernel_storm", "max_gap_us")
    max_median = ctx.settings.number("kernel_storm", "max_median_kernel_us")
    minimum = ctx.settings.number("kernel_storm", "min_pct")
    factor = ctx.settings.number("kernel_storm", "factor")
    rows: list[dict[str, Any]] = []
    for row in ctx.read("launch", "summary").iter_rows(named=True):
        rank = int(row["rank"])
        launches = ctx.per_step(float(row["count"]), rank)
        cpu_us = launches * float(row["cpu_mean_us"] or 0.0)
        median = row["gpu_p50_us"]
        if launches < min_launches or median is None or median > max_median or ctx.pct(cpu_us) < minimum:
            continue
        bubbles = ctx.per_step(_bubbles(ctx, rank, max_median, max_gap), rank)
        rows.append({**row, "launches": launches, "cpu_us": cpu_us, "bubbles": bubbles})
    if not rows:
        return []
    worst = worst_row(pl.DataFrame(rows), "bubbles")
    rank = int(worst["rank"])
    return [
        Finding(
            "kernel_storm",
            f"a storm of small kernels: {worst['launches']:,.0f} launches a step, half of them under "
            f"{worst['gpu_p50_us']:.1f} µs on the GPU",
            ctx.where([int(r["rank"]) for r in rows], rank),
            f"launch calls {worst['cpu_mean_us']:.1f} µs each, {worst['cpu_us']:,.0f} µs a step on the host; "
            f"{worst['bubbles']:,.0f} µs a step of GPU idle before the short kernels",
            "fewer, larger kernels: torch.compile (it fuses elementwise chains), CUDA graphs to launch a step's "
            'kernels at once (torch.compile(mode="reduce-overhead")), fused or foreach optimizers (fused=True)',
            float(worst["bubbles"]) * (1.0 - factor),
            Evidence("launch", "launch", "summary", (("rank", rank),)),
            rank,
            Change("bound_by", LAUNCH_OVERHEAD, factor),
        )
    ]


def _bubbles(ctx: Context, rank: int, short_us: float, max_gap_us: float) -> float:
    """The GPU idle just before each short kernel, up to `max_gap_us` each (a launch's bubble;
    a longer wait is the host_bound rule's)."""
    short = ctx.facts(rank).kernels.filter(pl.col("dur") < short_us)
    if short.height == 0:
        return 0.0
    return float(ctx.idle_before(rank, short["ts"]).clip(0.0, max_gap_us).sum())


def step_gaps(ctx: Context) -> list[Finding]:
    """GPU idle at each step's edges: before its first GPU work and after its last."""
    minimum = ctx.settings.number("step_gaps", "min_pct")
    steps = ctx.read("steps").filter(pl.col("used"))
    rows: list[dict[str, Any]] = []
    for rank in ctx.ranks:
        own = steps.filter(pl.col("rank") == rank)
        busy = ctx.gpu_busy(rank)
        if own.height == 0 or busy.height == 0:
            continue
        holes = Holes(ctx.loader_spans(rank))
        lead = tail = 0.0
        worst_step, worst_us = None, -1.0
        for step, start, stop, first, last in _step_edges(own, busy):
            if first is None or last is None:
                continue
            before = holes.length_outside(start, max(start, first))
            after = holes.length_outside(last, max(last, stop))
            lead, tail = lead + before, tail + after
            if before + after > worst_us:
                worst_step, worst_us = step, before + after
        count = max(own.height, 1)
        rows.append(
            {"rank": rank, "us": (lead + tail) / count, "lead": lead / count, "tail": tail / count, "step": worst_step}
        )
    found = [r for r in rows if ctx.pct(r["us"]) >= minimum and r["step"] is not None]
    if not found:
        return []
    worst = worst_row(pl.DataFrame(found), "us")
    rank = int(worst["rank"])
    return [
        Finding(
            "step_gaps",
            f"the GPU idles at the step's edges: {worst['us']:,.0f} µs a step ({ctx.pct(float(worst['us'])):.1f} %)",
            ctx.where([int(r["rank"]) for r in found], rank),
            f"{worst['lead']:,.0f} µs a step from the step's start to its first GPU work, {worst['tail']:,.0f} µs from "
            f"its last GPU work to the step's end (the most in step {worst['step']})",
            "start the next step's GPU work earlier: prefetch the next batch to the GPU during this one (non_blocking "
            "copies from pinned memory), keep logging, checkpointing and metric reductions off the step boundary, "
            "optimizer.zero_grad(set_to_none=True)",
            float(worst["us"]),
            Evidence("ranks", "rank-steps", "main", (("rank", rank), ("step", int(worst["step"])))),
            rank,
        )
    ]


def _step_edges(
    steps: pl.DataFrame, busy: pl.DataFrame
) -> Iterator[tuple[int, float, float, float | None, float | None]]:
    """step, start, end, and the start of its first and the end of its last GPU busy interval
    (None when none overlaps it) for each step, found by binary search: `busy` is sorted and
    disjoint, so its ends rise with its starts."""
    starts, ends = busy["ts"].to_numpy(), busy["end"].to_numpy()
    step_starts = steps["start_us"].to_numpy()
    stops = step_starts + steps["dur_us"].to_numpy()
    # The busy intervals overlapping [start, stop) are first:after, those ending after the start
    # and starting before the stop.
    first = np.searchsorted(ends, step_starts, side="right")
    after = np.searchsorted(starts, stops, side="left")
    for step, start, stop, lo, hi in zip(
        steps["step"].to_list(), step_starts.tolist(), stops.tolist(), first.tolist(), after.tolist(), strict=True
    ):
        edges = (float(starts[lo]), float(ends[hi - 1])) if hi > lo else (None, None)
        yield step, start, stop, *edges
