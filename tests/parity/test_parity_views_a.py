"""temporal, idle (+ interval stats), kernel-types, kernels and overlap in compat mode against
HTA 0.6.1 run in this test process on every folder of ../shared/traces that HTA can load.

Tolerance: 0.01 % of HTA's value or 1 µs for times; 0.01 % (or 1e-6 absolute) for the
percentages and ratios, which both sides round the same way. A NaN on HTA's side must be a
null (or NaN) on ours.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest
from parity_folders import FOLDERS

from htatui.analysis.core.scope import Scope
from htatui.analysis.views import idle, kernels, overlap, temporal
from htatui.trace import TraceSet

pytest.importorskip("hta", reason="HTA is not installed (pip install 'traceinsight==0.6.1' 'pandas<3')")
# HTA 0.6.1 warns about deprecated pandas downcasting and divides 0 by 0 (no communication).
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning", "ignore::RuntimeWarning")


Row = dict[str, Any]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _close(ours: Any, theirs: Any, *, time: bool) -> bool:
    if _missing(theirs) or _missing(ours):
        return _missing(theirs) and _missing(ours)
    absolute = 1.0 if time else 1e-6
    return abs(float(ours) - float(theirs)) <= max(absolute, 1e-4 * abs(float(theirs)))


def _compare(ours: dict[Any, Row], theirs: dict[Any, Row], columns: dict[str, tuple[str, bool]], what: str) -> None:
    """Same keys on both sides and every column (ours → (theirs, is_time)) within tolerance."""
    assert set(ours) == set(theirs), (
        f"{what}: keys differ; only ours {sorted(set(ours) - set(theirs), key=str)[:5]}, "
        f"only HTA {sorted(set(theirs) - set(ours), key=str)[:5]}"
    )
    problems = [
        f"{key}: {mine} {ours[key][mine]!r} vs HTA {hta} {theirs[key][hta]!r}"
        for key in ours
        for mine, (hta, is_time) in columns.items()
        if not _close(ours[key][mine], theirs[key][hta], time=is_time)
    ]
    assert not problems, f"{what}: {len(problems)} values differ:\n" + "\n".join(problems[:20])


def _rows(frame: Any, key: Callable[[Row], Any]) -> dict[Any, Row]:
    records = frame.to_dicts() if isinstance(frame, pl.DataFrame) else frame.to_dict("records")
    return {key(row): row for row in records}


@pytest.fixture(params=FOLDERS, ids=[f.replace("/", "-") for f in FOLDERS])
def pair(
    request: pytest.FixtureRequest, hta_analysis: Callable[[str], Any], load_shared: Callable[[str], TraceSet]
) -> tuple[str, Hta, TraceSet]:
    folder: str = request.param
    analysis = hta_analysis(folder)
    traces = load_shared(folder)
    hta_ranks = analysis.t.get_ranks()
    assert len(traces.rank_ids) == len(hta_ranks), f"{folder}: {traces.rank_ids} vs HTA's {hta_ranks}"
    # Rank numbers can differ where the file has none (HTA says 0, htatui reads the file name).
    return folder, Hta(analysis, dict(zip(hta_ranks, traces.rank_ids, strict=True))), traces


class Hta:
    """HTA's TraceAnalysis whose outputs are renumbered to htatui's rank ids."""

    def __init__(self, analysis: Any, ranks: dict[int, int]) -> None:
        self.analysis = analysis
        self.ranks = ranks

    def call(self, method: str, **kwargs: Any) -> Any:
        """HTA's result with ranks renumbered, or None when HTA raises (no GPU rows on a rank)."""
        try:
            result = getattr(self.analysis, method)(visualize=False, **kwargs)
        except (IndexError, ValueError, KeyError):
            return None
        frames = result if isinstance(result, tuple) else (result,)
        renumbered = tuple(
            f.assign(rank=f["rank"].map(self.ranks)) if f is not None and "rank" in f.columns else f for f in frames
        )
        return renumbered if isinstance(result, tuple) else renumbered[0]


def test_temporal(pair: tuple[str, Hta, TraceSet]) -> None:
    folder, hta, traces = pair
    ours = temporal.compute(traces, temporal.TemporalOptions(scope=Scope(hta_compat=True)))
    theirs = hta.call("get_temporal_breakdown")
    if theirs is None:  # HTA raises on a rank without GPU rows; we give no row for it
        assert ours["rank"].to_list() != traces.rank_ids
        return
    columns = {
        "idle_us": ("idle_time(us)", True),
        "compute_us": ("compute_time(us)", True),
        "non_compute_us": ("non_compute_time(us)", True),
        "span_us": ("kernel_time(us)", True),
        "idle_pct": ("idle_time_pctg", False),
        "compute_pct": ("compute_time_pctg", False),
        "non_compute_pct": ("non_compute_time_pctg", False),
    }
    _compare(_rows(ours, lambda r: r["rank"]), _rows(theirs, lambda r: r["rank"]), columns, f"{folder} temporal")


def test_idle(pair: tuple[str, Hta, TraceSet]) -> None:
    folder, hta, traces = pair
    options = idle.IdleOptions(scope=Scope(hta_compat=True))
    ours = idle.compute(traces, options)
    ours_stats = idle.interval_stats(traces, options)
    theirs = hta.call("get_idle_time_breakdown", ranks=hta.analysis.t.get_ranks(), show_idle_interval_stats=True)
    if theirs is None:  # HTA raises when a rank has no GPU rows
        assert ours.height == 0 and ours_stats.height == 0
        return
    breakdown, stats = theirs[0], theirs[1].reset_index()
    key = lambda r: (r["rank"], r["stream"], r.get("category", r.get("idle_category")))  # noqa: E731
    columns = {"idle_us": ("idle_time", True), "idle_pct": ("idle_time_ratio", False)}
    breakdown["idle_time_ratio"] = breakdown["idle_time_ratio"] * 100.0  # HTA's ratio as our %
    _compare(_rows(ours, key), _rows(breakdown, key), columns, f"{folder} idle")
    stat_columns = {
        "count": ("count", False),
        "mean_us": ("mean", True),
        "std_us": ("std", True),
        "min_us": ("min", True),
        "p25_us": ("25%", True),
        "p50_us": ("50%", True),
        "p75_us": ("75%", True),
        "max_us": ("max", True),
    }
    _compare(_rows(ours_stats, key), _rows(stats, key), stat_columns, f"{folder} idle interval stats")


def test_kernel_types_and_kernels(pair: tuple[str, Hta, TraceSet]) -> None:
    folder, hta, traces = pair
    type_df, kernel_df = hta.call("get_gpu_kernel_breakdown")
    ours_types = kernels.compute_types(traces, kernels.KernelTypesOptions(scope=Scope(hta_compat=True)))
    overall = ours_types.filter(pl.col("rank") == kernels.ALL_RANKS)
    _compare(
        _rows(overall, lambda r: r["kernel_type"]),
        _rows(type_df, lambda r: r["kernel_type"]),
        {"duration_us": ("sum", True), "pct": ("percentage", False)},
        f"{folder} kernel types",
    )
    # Per-rank rows add up to the overall row.
    per_rank = (
        ours_types.filter(pl.col("rank") != kernels.ALL_RANKS).group_by("kernel_type").agg(pl.col("duration_us").sum())
    )
    _compare(
        _rows(per_rank, lambda r: r["kernel_type"]),
        _rows(overall, lambda r: r["kernel_type"]),
        {"duration_us": ("duration_us", True)},
        f"{folder} kernel types per rank",
    )
    ours = kernels.compute(traces, kernels.KernelsOptions(scope=Scope(hta_compat=True)))
    key = lambda r: (int(r["rank"]), r["kernel_type"], r["name"])  # noqa: E731
    columns = {
        "sum_us": ("sum (us)", True),
        "mean_us": ("mean (us)", True),
        "min_us": ("min (us)", True),
        "max_us": ("max (us)", True),
        "std_us": ("stddev", True),
    }
    _compare(_rows(ours, key), _rows(kernel_df, key), columns, f"{folder} kernels")


def test_overlap(pair: tuple[str, Hta, TraceSet]) -> None:
    folder, hta, traces = pair
    ours = overlap.compute(traces, overlap.OverlapOptions(scope=Scope(hta_compat=True)))
    theirs = hta.call("get_comm_comp_overlap")
    assert theirs is not None
    # HTA gives every rank a row (NaN without communication); we give no row to a rank without
    # any GPU activity, so HTA's rows for those ranks must be NaN.
    active = set(temporal.compute(traces, temporal.TemporalOptions(scope=Scope(hta_compat=True)))["rank"].to_list())
    their_rows = _rows(theirs, lambda r: r["rank"])
    for rank in set(their_rows) - active:
        assert _missing(their_rows.pop(rank)["comp_comm_overlap_pctg"])
    _compare(
        _rows(ours, lambda r: r["rank"]),
        their_rows,
        {"overlap_pct": ("comp_comm_overlap_pctg", False)},
        f"{folder} overlap",
    )
