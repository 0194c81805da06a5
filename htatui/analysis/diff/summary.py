"""`htatui diff --summary`: the registry's headline views run on both sides, metric by metric.

Each view runs with the side's scope, its chosen ranks and steps (`diff.select_sides`);
times and counts are per rank, percentages and means averaged over the ranks.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import polars as pl

from htatui.analysis import registry as views
from htatui.analysis.core.scope import Scope
from htatui.analysis.diff.compare import SUMMARY_SCHEMA, DiffOptions, Selection, Side, select_sides
from htatui.analysis.registry import headline_views
from htatui.trace.model import TraceSet


def view_label(view_id: str) -> str:
    """The `view` column of the summary: the registry's title in lower case ('kernel types')."""
    return views.view(view_id).title.lower()


Metric = tuple[str, str, float | None, bool]
"""(view, metric, value, additive): additive metrics (times, counts) are 0 where a side lacks
them (a kernel-type state or idle category that never happens); the rest stay null."""


def _finite(value: object) -> float | None:
    if value is None or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


ADDITIVE_PER_RANK = frozenset(
    {
        "span_us",
        "idle_us",
        "compute_us",
        "non_compute_us",
        "count",
        "runtime_outlier_count",
        "delay_outlier_count",
    }
)
"""Per-rank columns that are totals (averaged as Σ/ranks); the others are means of the ranks."""


def _per_rank(frame: pl.DataFrame, view: str, columns: list[str], n_ranks: int) -> list[Metric]:
    """One value per column of a one-row-per-rank table: µs and counts summed over the ranks and
    divided by the side's rank count; percentages and means averaged over the rows present."""
    out: list[Metric] = []
    for column in columns:
        if column not in frame.columns:
            continue
        values = frame[column].cast(pl.Float64)
        additive = column in ADDITIVE_PER_RANK
        value = values.sum() / n_ranks if additive and frame.height else values.mean()
        out.append((view, column, _finite(value), False))
    return out


def _table(view_id: str, table: str, traces: TraceSet, scope: Scope) -> pl.DataFrame:
    """A registered table of the view over the side's scope (the table `report` prints)."""
    view = views.view(view_id)
    return views.frame_of(views.make_table(view.table(table), traces, view.options(scope=scope)))[0]


def _temporal(traces: TraceSet, scope: Scope, n_ranks: int) -> list[Metric]:
    frame = _table("temporal", "main", traces, scope)
    columns = [
        "span_us",
        "idle_us",
        "compute_us",
        "non_compute_us",
        "idle_pct",
        "compute_pct",
        "non_compute_pct",
    ]
    return _per_rank(frame, view_label("temporal"), columns, n_ranks)


def _kernel_types(traces: TraceSet, scope: Scope, n_ranks: int) -> list[Metric]:
    from htatui.analysis.views import kernels

    frame = _table("kernel-types", "main", traces, scope)
    overall = frame.filter(pl.col("rank") == kernels.ALL_RANKS)
    label = view_label("kernel-types")
    out: list[Metric] = []
    for record in overall.iter_rows(named=True):
        state = str(record["kernel_type"])
        duration = _finite(record["duration_us"])
        out.append((label, f"{state}_us", None if duration is None else duration / n_ranks, True))
        out.append((label, f"{state}_pct", _finite(record["pct"]), True))
    return out


def _overlap(traces: TraceSet, scope: Scope, n_ranks: int) -> list[Metric]:
    frame = _table("overlap", "main", traces, scope)
    return _per_rank(frame, view_label("overlap"), ["overlap_pct"], n_ranks)


def _idle(traces: TraceSet, scope: Scope, n_ranks: int) -> list[Metric]:
    from htatui.analysis.views import idle

    frame = _table("idle", "main", traces, scope)
    totals = frame.group_by("category").agg(pl.col("idle_us").sum())
    by_category = {str(c): float(v) for c, v in totals.iter_rows()}
    grand = sum(by_category.values())
    label = view_label("idle")
    out: list[Metric] = [(label, "total_us", grand / n_ranks, True)]
    for category in idle.CATEGORIES:
        value = by_category.get(category, 0.0)
        out.append((label, f"{category}_us", value / n_ranks, True))
    for category in idle.CATEGORIES:
        share = 100.0 * by_category.get(category, 0.0) / grand if grand > 0 else None
        out.append((label, f"{category}_pct", share, False))
    return out


def _launch(traces: TraceSet, scope: Scope, n_ranks: int) -> list[Metric]:
    frame = _table("launch", "summary", traces, scope)
    columns = [
        "count",
        "cpu_mean_us",
        "gpu_mean_us",
        "delay_mean_us",
        "delay_p50_us",
        "delay_p90_us",
        "runtime_outlier_count",
        "delay_outlier_count",
    ]
    return _per_rank(frame, view_label("launch"), columns, n_ranks)


HEADLINE_METRICS: dict[str, Callable[[TraceSet, Scope, int], list[Metric]]] = {
    "temporal": _temporal,
    "kernel-types": _kernel_types,
    "overlap": _overlap,
    "idle": _idle,
    "launch": _launch,
}
"""The metrics each headline view of the registry contributes (views.View.headline)."""


def _side_metrics(traces: TraceSet, side: Side) -> list[Metric]:
    n_ranks = max(len(side.ranks), 1)
    out: list[Metric] = []
    for headline in headline_views():
        out.extend(HEADLINE_METRICS[headline.id](traces, side.scope, n_ranks))
    return out


def summary_from_sides(base: TraceSet, test: TraceSet, selection: Selection) -> pl.DataFrame:
    """The long frame of `summary` for the sides `selection` chose."""
    base_rows = _side_metrics(base, selection.base)
    test_rows = _side_metrics(test, selection.test)
    order: list[tuple[str, str]] = []
    additive: dict[tuple[str, str], bool] = {}
    values: dict[str, dict[tuple[str, str], float | None]] = {"base": {}, "test": {}}
    for side, rows in (("base", base_rows), ("test", test_rows)):
        for view, metric, value, is_additive in rows:
            key = (view, metric)
            if key not in additive:
                order.append(key)
            additive[key] = additive.get(key, False) or is_additive
            values[side][key] = value
    view_rank = {view_label(view.id): i for i, view in enumerate(headline_views())}
    order.sort(key=lambda key: view_rank.get(key[0], len(view_rank)))
    records = []
    for key in order:
        default = 0.0 if additive[key] else None
        b = values["base"].get(key, default)
        t = values["test"].get(key, default)
        records.append(
            {
                "view": key[0],
                "metric": key[1],
                "base": b,
                "test": t,
                "delta": None if b is None or t is None else t - b,
            }
        )
    return pl.DataFrame(records, schema=SUMMARY_SCHEMA)


def summary(base: TraceSet, test: TraceSet, options: DiffOptions | None = None) -> pl.DataFrame:
    """The headline views of both sides on the chosen ranks and steps: view, metric, base,
    test, delta (test − base).

    Each view runs with the side's scope (its chosen ranks and steps), the table `report` prints
    for that scope. Times and counts are per rank: summed over the side's ranks and divided by
    their number; percentages and means are averaged over the ranks.
    """
    options = options or DiffOptions()
    return summary_from_sides(base, test, select_sides(base, test, options))
