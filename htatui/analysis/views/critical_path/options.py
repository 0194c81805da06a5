"""The critical-path view's options: which rank, which window, how much faster a what-if tries."""

from __future__ import annotations

from dataclasses import dataclass

from htatui.analysis.core.knobs import knob
from htatui.analysis.core.options import CommonOptions


@dataclass(frozen=True)
class CriticalPathOptions(CommonOptions):
    """Which rank and which annotation instance to follow (HTA's `critical_path_analysis` arguments)."""

    rank: int | None = knob(None, flag="--rank", help="critical-path: rank to follow (default: the first)", kind="int")
    annotation: str = knob(
        "",
        flag="--annotation",
        help="critical-path: window = an event whose name contains this (empty: the scope's steps)",
        kind="text",
    )
    instance: int = knob(0, flag="--instance", help="critical-path: which of those events, from 0", kind="int")
    faster_pct: float = knob(
        50.0,
        flag="--faster-pct",
        help="critical-path what-if: how much faster each event is tried",
        kind="float",
        minimum=0.0,
        maximum=100.0,
    )
    top_k: int | None = knob(
        20,
        flag="--top",
        help="critical-path --job and what-ifs: how many rows (all: every row)",
        kind="int",
        label="top-k",
        minimum=1,
    )
    data_loading: tuple[str, ...] = ()
    """Name patterns (regex) of host events charged to data loading rather than the CPU."""
