"""`htatui diff BASE TEST --fail-if 'step_us>+5%'`: thresholds on the change between two jobs, a
gate a training repository runs on a profiled smoke test.

A threshold is `METRIC OP CHANGE`: OP one of > >= < <=, CHANGE a signed number, relative to the
base with `%` (`step_us>+5%`: the mean step grew by more than 5 %), else in the metric's own unit
(`idle.host_wait_pct>+2`: two points more). Metrics: `step_us` (the mean step: each rank's mean
over the side's steps, averaged over its ranks), `kernels.sum_us` and `kernels.count` (the GPU
work of the Kernels table, kernels, copies and memsets, per rank), and every `diff --summary`
metric as VIEW.METRIC with the view's id (`temporal.idle_us`, `launch.delay_mean_us`,
`kernel-types.COMMUNICATION_us`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from htatui.analysis import registry
from htatui.analysis.core.scope import Scope
from htatui.analysis.diff.compare import Selection
from htatui.analysis.diff.summary import summary_from_sides, view_label
from htatui.errors import HtatuiError
from htatui.trace.model import TraceSet

OPERATORS = (">=", "<=", ">", "<")
_CHANGE = re.compile(r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>%|us|µs)?$")

OWN_METRICS = ("step_us", "kernels.sum_us", "kernels.count")
"""The gate's metrics besides `diff --summary`'s."""


class ThresholdError(HtatuiError, ValueError):
    """A threshold that cannot be read, or names no metric; the message is one line."""


@dataclass(frozen=True)
class Threshold:
    """`step_us>+5%`: the metric, the comparison, the limit and whether it is relative (%)."""

    text: str
    metric: str
    operator: str
    limit: float
    relative: bool

    def broken_by(self, change: float) -> bool:
        return {
            ">": change > self.limit,
            ">=": change >= self.limit,
            "<": change < self.limit,
            "<=": change <= self.limit,
        }[self.operator]


def parse_threshold(text: str) -> Threshold:
    """A threshold from its text; ThresholdError saying what is wrong with it."""
    for operator in OPERATORS:
        metric, found, limit = text.partition(operator)
        if found:
            break
    else:
        raise ThresholdError(f"--fail-if {text!r}: no comparison (use METRIC>CHANGE, e.g. 'step_us>+5%')")
    metric, limit = metric.strip(), limit.strip()
    match = _CHANGE.match(limit)
    if not metric or match is None:
        raise ThresholdError(
            f"--fail-if {text!r}: expected METRIC{operator}CHANGE with CHANGE a number, "
            "% for a change relative to the base (e.g. 'step_us>+5%', 'temporal.idle_us>+100')"
        )
    known = known_prefixes()
    if metric not in OWN_METRICS and metric.partition(".")[0] not in known:
        raise ThresholdError(
            f"--fail-if {text!r}: no metric {metric!r} (step_us, kernels.sum_us, kernels.count, or VIEW.METRIC "
            f"of `diff --summary` with VIEW one of {', '.join(known)})"
        )
    return Threshold(text, metric, operator, float(match["number"]), match["unit"] == "%")


def known_prefixes() -> tuple[str, ...]:
    """The view ids of `diff --summary`'s metrics."""
    return tuple(view.id for view in registry.headline_views())


@dataclass(frozen=True)
class Verdict:
    """A threshold against the two sides' values of its metric."""

    threshold: Threshold
    base: float
    test: float

    @property
    def change(self) -> float:
        """test − base, in % of the base for a relative threshold (inf from a base of 0)."""
        delta = self.test - self.base
        if not self.threshold.relative:
            return delta
        if self.base == 0:
            return 0.0 if delta == 0 else math.copysign(math.inf, delta)
        return 100.0 * delta / abs(self.base)

    @property
    def broken(self) -> bool:
        return self.threshold.broken_by(self.change)

    def line(self) -> str:
        """'step_us>+5%: +7.20 % (base 16,110.42 → test 17,270.33)'."""
        unit = " %" if self.threshold.relative else ""
        return f"{self.threshold.text}: {self.change:+,.2f}{unit} (base {self.base:,.2f} → test {self.test:,.2f})"


def metric_values(base: TraceSet, test: TraceSet, selection: Selection) -> dict[str, tuple[float | None, float | None]]:
    """Each gate metric's (base, test) value over the sides `selection` chose."""
    values: dict[str, tuple[float | None, float | None]] = {}
    by_label = {view_label(view.id): view.id for view in registry.headline_views()}
    for view, metric, b, t, _delta in summary_from_sides(base, test, selection).iter_rows():
        values[f"{by_label.get(view, view)}.{metric}"] = (b, t)
    sides = ((base, selection.base.scope), (test, selection.test.scope))
    values["step_us"] = tuple(_step_us(traces, scope) for traces, scope in sides)  # type: ignore[assignment]
    kernels = [_kernels(traces, scope) for traces, scope in sides]
    values["kernels.sum_us"] = (kernels[0][0], kernels[1][0])
    values["kernels.count"] = (kernels[0][1], kernels[1][1])
    return values


def _table(view_id: str, traces: TraceSet, scope: Scope, **knobs: object) -> pl.DataFrame:
    view = registry.view(view_id)
    return registry.frame_of(registry.make_table(view.main, traces, view.options(scope=scope, **knobs)))[0]


def _step_us(traces: TraceSet, scope: Scope) -> float | None:
    steps = _table("steps", traces, scope).filter(pl.col("used"))
    if steps.height == 0:
        return None
    return float(steps.group_by("rank").agg(pl.col("dur_us").mean())["dur_us"].mean())  # type: ignore[arg-type]


def _kernels(traces: TraceSet, scope: Scope) -> tuple[float | None, float | None]:
    """Σ time and count of the Kernels table (every name) per rank."""
    frame = _table("kernels", traces, scope, top_k=None)
    ranks = frame["rank"].n_unique()
    if ranks == 0:
        return None, None
    return float(frame["sum_us"].sum()) / ranks, float(frame["count"].sum()) / ranks


def judge(thresholds: Sequence[Threshold], values: dict[str, tuple[float | None, float | None]]) -> list[Verdict]:
    """Each threshold's verdict; ThresholdError for a metric neither side has."""
    verdicts = []
    for threshold in thresholds:
        base, test = values.get(threshold.metric, (None, None))
        if base is None or test is None:
            names = ", ".join(sorted(name for name in values if name.startswith(threshold.metric.partition(".")[0])))
            raise ThresholdError(
                f"--fail-if {threshold.text!r}: no value of {threshold.metric} on "
                f"{'both sides' if base is None and test is None else 'one side'}"
                + (f" (metrics of that view: {names})" if names else "")
            )
        verdicts.append(Verdict(threshold, base, test))
    return verdicts
