"""Small helpers the rules share: the bound types the step model names, ranks in words, and
the worst rank of a per-rank table."""

from __future__ import annotations

from typing import Any

import polars as pl

from htatui.analysis.core.ranges import format_ranges

COMMUNICATION_BOUND = "communication"
"""The step model's bound types of GPU and CPU communication together."""
CPU_BOUND = "cpu_bound"
LAUNCH_OVERHEAD = "gpu_kernel_launch_overhead"
"""Bound types of the step model's edges (`report --view critical-path`)."""


def ranks_text(ranks: list[int], worst: int) -> str:
    """'rank 2' or 'rank 2 (of ranks 0-3)': the rank a finding shows, and the others it holds on."""
    if len(ranks) <= 1:
        return f"rank {worst}"
    return f"rank {worst} (of ranks {format_ranges(sorted(ranks), separator=',')})"


def worst_row(frame: pl.DataFrame, column: str) -> dict[str, Any]:
    """The row with the largest `column` (ties: the first)."""
    return frame.sort(column, descending=True, maintain_order=True).row(0, named=True)


def short_name(name: str, limit: int = 60) -> str:
    """A kernel or op name cut to `limit` characters for a sentence (the row keeps the full name)."""
    return name if len(name) <= limit else name[: limit - 1] + "…"
