"""Rules across ranks: the straggler the others wait for, and communication nothing hides.

docs/diagnosis/straggler.md and docs/diagnosis/exposed_comm.md.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.diagnosis.change import Change
from htatui.analysis.diagnosis.common import COMMUNICATION_BOUND
from htatui.analysis.diagnosis.context import Context
from htatui.analysis.diagnosis.finding import Evidence, Finding

EXPLAINED_PCT = 50.0
"""The stragglers table's own rule: a phase explains a delay when its excess is at least half of it."""

_LOADING = ("data", "loader", "batch")


def straggler(ctx: Context) -> list[Finding]:
    """Each rank the others wait for at the collectives (the Ranks page's stragglers), with its phase."""
    table = ctx.read("stragglers")
    if "is_straggler" not in table.columns:
        return []
    minimum = ctx.settings.number("straggler", "min_delay_pct")
    found = []
    for row in table.filter(pl.col("is_straggler")).iter_rows(named=True):
        rank = int(row["rank"])
        per_step = ctx.per_step(float(row["delay_us"]), rank)
        if ctx.pct(per_step) < minimum:
            continue
        phase = row["cause_phase"]
        explained = phase is not None and (row["cause_pct"] or 0.0) >= EXPLAINED_PCT
        if explained:
            what = (
                f"rank {rank} holds up the other ranks: its {phase} runs {row['cause_excess_us']:,.0f} µs past theirs"
            )
        else:
            what = f"rank {rank} holds up the other ranks, and none of its phases explains why"
        held = sorted(int(step) for step in str(row["steps"] or "").split(",") if step)
        steps = (
            f"step{'s' if len(held) > 1 else ''} {format_ranges(held, separator=',')}" if held else ctx.steps_text(rank)
        )
        found.append(
            Finding(
                "straggler",
                what,
                " · ".join(part for part in (f"rank {rank}", steps, phase if explained else "") if part),
                f"the others waited {row['delay_us']:,.0f} µs for it ({row['calls_last']} calls it came to last, "
                f"{row['delay_pct']:.0f} % of all waiting); {row['cause'] or 'no phase compared'}",
                _straggler_change(rank, str(phase) if explained else None),
                per_step,
                Evidence("ranks", "stragglers", "main", (("rank", rank),)),
                rank,
                Change("rank", str(rank), to_median=True),
            )
        )
    return found


def _straggler_change(rank: int, phase: str | None) -> str:
    if phase is None:
        return (
            f"look outside the recorded ranges on rank {rank}: a slow or busy host, its network link, an unlabelled "
            "stall (py-spy on that process, the node's health); enter on the Ranks page compares its phases"
        )
    if phase == "GPU compute" or phase.startswith("kernel "):
        return (
            f"find why rank {rank}'s GPU is slower: a throttled or different GPU (clocks, temperature), another "
            "process on it, or more work on this rank (uneven batches or shards)"
        )
    if any(word in phase.lower() for word in _LOADING):
        return f"rank {rank} loads its data slower: more DataLoader workers there, or even out the shards"
    return f"{phase} takes longer on rank {rank} than on the others: compare it on the Ranks page (enter)"


def exposed_comm(ctx: Context) -> list[Finding]:
    """Communication no computation hides, on the rank that waits least: the transfer every rank pays."""
    minimum = ctx.settings.number("exposed_comm", "min_pct")
    factor = ctx.settings.number("exposed_comm", "factor")
    kernel_types = ctx.read("kernel-types")
    by_kernels = kernel_types.filter((pl.col("rank") != "all") & (pl.col("kernel_type") == "COMMUNICATION"))
    if by_kernels.height:
        exposed = by_kernels.select(rank=pl.col("rank").cast(pl.Int32), total_us="duration_us")
        how = "communication kernels ran with no computation beside them"
        see_table, see_key = "kernel-types", "kernel_type"
        on_host = False
    elif kernel_types.filter(pl.col("kernel_type").str.contains("COMMUNICATION")).height:
        return []  # communication kernels, every one beside computation: nothing exposed
    else:
        matrix = ctx.read("rank-steps")
        if matrix.height == 0 or matrix["comm_us"].sum() == 0:
            return []
        # The CPU collectives' time, less the waits for other ranks (the straggler's share).
        exposed = matrix.group_by("rank").agg(total_us=(pl.col("comm_us") - pl.col("wait_us")).clip(0.0).sum())
        how = "the collectives ran on the host (gloo or another CPU backend), less their waits for other ranks"
        see_table, see_key = "rank-steps", "step"
        on_host = True
    rows = [(int(rank), ctx.per_step(float(total), int(rank))) for rank, total in exposed.iter_rows()]
    per_step = pl.DataFrame(rows, schema={"rank": pl.Int32(), "us": pl.Float64()}, orient="row").sort("us", "rank")
    rank, least = int(per_step["rank"][0]), float(per_step["us"][0])
    if ctx.pct(least) < minimum:
        return []
    if on_host:
        first = min(int(step) for step in ctx.read("rank-steps").filter(pl.col("rank") == rank)["step"].to_list())
        row: tuple[tuple[str, str | int | float], ...] = (("rank", rank), (see_key, first))
        page = "ranks"
    else:
        row = (("rank", str(rank)), (see_key, "COMMUNICATION"))
        page = "kernels"
    ranks = [int(r) for r in per_step["rank"].to_list()]
    return [
        Finding(
            "exposed_comm",
            f"communication nothing hides costs {least:,.0f} µs a step ({ctx.pct(least):.1f} % of the step)",
            ctx.where(ranks, rank),
            f"{how}: {least:,.0f} µs a step on rank {rank}, the rank that waits least"
            + (
                f" (the most: rank {int(per_step['rank'][-1])}, {float(per_step['us'][-1]):,.0f} µs)"
                if len(ranks) > 1
                else ""
            ),
            _comm_change(on_host and _gloo_with_gpu(ctx)),
            least * (1.0 - factor),
            Evidence(page, see_table, "main", row),
            rank,
            Change("bound_by", COMMUNICATION_BOUND, factor),
        )
    ]


def _gloo_with_gpu(ctx: Context) -> bool:
    """Whether the job runs on GPUs with gloo as its backend (distributedInfo): NCCL would do better."""
    backends = {(ctx.traces.ranks[rank].meta.distributed_info or {}).get("backend") for rank in ctx.ranks}
    return backends == {"gloo"} and ctx.read("temporal").height > 0


def _comm_change(gloo: bool) -> str:
    if gloo:
        return (
            "communicate on the GPU: the NCCL backend for GPU tensors (gloo copies them through the host); "
            "then overlap it with backward (DDP buckets), or communicate less often (gradient accumulation)"
        )
    return (
        "overlap it with computation (DDP's bucket_cap_mb and gradient_as_bucket_view, FSDP's forward and backward "
        "prefetch), send fewer and larger messages, or less (gradient accumulation, compression hooks); the "
        "Collectives table on the Ranks page shows each one's bus bandwidth"
    )
