"""Compare two jobs: per-name counts and times of kernels and CPU ops, and the headline views.

`compare` answers "which kernels and ops got slower, appeared or vanished"; `summary` answers
"did idle time, overlap or launch delay move". Both pick ranks and steps on each side the same
way (`select_sides`). Default semantics are corrected; `hta_compat=True` reproduces HTA 0.6.1's
`TraceDiff.compare_traces` (first rank, first iteration, `stream != -1` split, name-only
grouping). docs/semantics-diff.md lists every difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.names import shorten_name
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare, rank_steps_of
from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.core.scope import Scope, Steps
from htatui.trace.kineto import GPU_ACTIVITY_CATS, HOST_WORK_CATS, PROFILER_STEP
from htatui.trace.model import TraceSet

By = Literal["all", "kernel", "op"]
Status = Literal["added", "removed", "slower", "faster", "unchanged"]

KERNEL = "kernel"
OP = "op"
MIXED = "mixed"
"""Compat mode groups by name across kinds (as HTA does); a name seen on both sides of the
`stream != -1` split gets kind "mixed"."""

STEP_NAME = "ProfilerStep#*"
"""Default mode folds every ProfilerStep#N into one name, so the row compares step time."""

DIFF_COLUMNS = (
    "name",
    "kind",
    "base_count",
    "base_total_us",
    "test_count",
    "test_total_us",
    "delta_count",
    "delta_us",
    "delta_pct",
    "status",
)
DIFF_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.Utf8(),
    "kind": pl.Utf8(),
    "base_count": pl.Float64(),
    "base_total_us": pl.Float64(),
    "test_count": pl.Float64(),
    "test_total_us": pl.Float64(),
    "delta_count": pl.Float64(),
    "delta_us": pl.Float64(),
    "delta_pct": pl.Float64(),
    "status": pl.Utf8(),
}
SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "view": pl.Utf8(),
    "metric": pl.Utf8(),
    "base": pl.Float64(),
    "test": pl.Float64(),
    "delta": pl.Float64(),
}


@dataclass(frozen=True)
class DiffOptions(CommonOptions):
    """What to compare and how; the scope (ranks, steps, mode) is every view's.

    rank: one rank on both sides, or None for every rank of each side averaged (per-name counts
    and totals divided by the number of ranks on that side); compat mode's None is HTA's
    "first rank of each side". test_rank: a different rank for the test side (None = rank).
    The scope's ranks restrict the averaged set when rank is None.
    The scope's steps: default = the steps both sides count in every view (each rank's last step
    left out), by number, else by position when they share none (compat: HTA's default, the first
    step of each side); all = each side's whole trace; some steps = those steps on both sides.
    noise_pct / noise_us: a name is "unchanged" when its total moved by at most noise_pct % of
    the base total or by at most noise_us µs.
    """

    rank: int | None = None
    test_rank: int | None = None
    by: By = "all"
    short_names: bool = False
    noise_pct: float = 5.0
    noise_us: float = 2.0


@dataclass(frozen=True)
class Side:
    """The ranks and steps chosen on one side (steps None = the whole trace)."""

    label: str
    ranks: tuple[int, ...]
    steps: tuple[int, ...] | None
    available_steps: tuple[int, ...]
    hta_compat: bool = False
    rules: Rules = SHIPPED_RULES

    @property
    def scope(self) -> Scope:
        """The side's scope, which every view of the side runs with."""
        steps = Steps("all") if self.steps is None else Steps.of(self.steps)
        return Scope(ranks=self.ranks, steps=steps, hta_compat=self.hta_compat, rules=self.rules)


@dataclass(frozen=True)
class Selection:
    base: Side
    test: Side
    notes: tuple[str, ...]

    @property
    def description(self) -> str:
        """One line per side plus notes, for stderr and the screen's header."""
        lines = [_describe_side(self.base), _describe_side(self.test), *self.notes]
        return "\n".join(lines)


@dataclass(frozen=True)
class DiffResult:
    """The per-name table and how each side was chosen."""

    frame: pl.DataFrame
    selection: Selection

    @property
    def description(self) -> str:
        return self.selection.description


def _describe_side(side: Side) -> str:
    ranks = ", ".join(map(str, side.ranks))
    rank_text = f"rank {ranks}" if len(side.ranks) == 1 else f"ranks {ranks} (averaged)"
    if side.steps is None:
        step_text = "whole trace (no ProfilerStep)" if not side.available_steps else "whole trace"
    else:
        count = len(side.steps)
        step_text = f"step{'s' if count != 1 else ''} {format_ranges(side.steps)}"
    return f"{side.label}: {rank_text}, {step_text}"


# ---- choosing ranks and steps ---------------------------------------------------------


def _chosen_ranks(traces: TraceSet, rank: int | None, options: DiffOptions, label: str) -> tuple[int, ...]:
    available = traces.rank_ids
    if not available:
        raise ValueError(f"{label} has no ranks")
    if rank is not None:
        if rank not in traces.ranks:
            raise ValueError(f"rank {rank} is not in the {label} trace (ranks: {format_ranges(available)})")
        return (rank,)
    if options.hta_compat:
        return (available[0],)
    if options.ranks is not None:
        chosen = tuple(r for r in options.ranks if r in traces.ranks)
        if not chosen:
            raise ValueError(f"none of ranks {list(options.ranks)} is in the {label} trace")
        return chosen
    return tuple(available)


def _step_numbers(
    traces: TraceSet, ranks: tuple[int, ...], options: DiffOptions
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The steps a side's ranks count under the default scope and the steps that leaves out
    (each rank's last step, as in every view); compat: every step of the job (HTA's symbol table)."""
    if options.hta_compat:
        found = {step for rank in traces.rank_ids for step in _every_step(traces, (rank,), hta_compat=True)}
        return tuple(sorted(found)), ()
    default = Scope(ranks=ranks)
    used: set[int] = set()
    left_out: set[int] = set()
    for rank in ranks:
        rank_steps = rank_steps_of(traces, rank, default)
        used.update(rank_steps.used)
        left_out.update(rank_steps.left_out)
    return tuple(sorted(used)), tuple(sorted(left_out - used))


def _every_step(traces: TraceSet, ranks: tuple[int, ...], *, hta_compat: bool = False) -> tuple[int, ...]:
    """Every ProfilerStep number of these ranks (compat: GPU-side copies counted, as HTA does)."""
    scope = Scope(ranks=ranks, hta_compat=hta_compat)
    return tuple(sorted({s for rank in ranks for s in rank_steps_of(traces, rank, scope).available}))


def select_sides(base: TraceSet, test: TraceSet, options: DiffOptions) -> Selection:
    """Ranks and steps of each side, following options (see DiffOptions); raises ValueError."""
    if options.by not in ("all", KERNEL, OP):
        raise ValueError(f"by must be 'all', 'kernel' or 'op', not {options.by!r}")
    base_ranks = _chosen_ranks(base, options.rank, options, "base")
    test_rank = options.test_rank if options.test_rank is not None else options.rank
    test_ranks = _chosen_ranks(test, test_rank, options, "test")
    base_avail, base_dropped = _step_numbers(base, base_ranks, options)
    test_avail, test_dropped = _step_numbers(test, test_ranks, options)
    notes: list[str] = []
    steps = options.scope.steps
    if steps.kind == "default":
        for label, dropped in (("base", base_dropped), ("test", test_dropped)):
            if dropped:
                notes.append(
                    f"{label}: last step {format_ranges(dropped)} left out (as in every view; --steps all keeps it)"
                )
    base_steps: tuple[int, ...] | None
    test_steps: tuple[int, ...] | None
    if steps.kind == "some":
        every_base = base_avail if options.hta_compat else _every_step(base, base_ranks)
        every_test = test_avail if options.hta_compat else _every_step(test, test_ranks)
        base_steps = tuple(s for s in every_base if steps.holds(s))
        test_steps = tuple(s for s in every_test if steps.holds(s))
        for label, chosen_steps, avail in (("base", base_steps, every_base), ("test", test_steps, every_test)):
            if not chosen_steps:
                raise ValueError(f"step {steps} is not in the {label} trace (steps: {format_ranges(avail)})")
    elif steps.kind == "all":
        if options.hta_compat:
            base_steps, test_steps = base_avail, test_avail
        else:
            base_steps = test_steps = None
            notes.append("steps: each side's whole trace (--steps all)")
    elif options.hta_compat:
        base_steps, test_steps = base_avail[:1], test_avail[:1]
        notes.append("steps: the first step of each side (HTA's default)")
    else:
        common = tuple(sorted(set(base_avail) & set(test_avail)))
        if common:
            base_steps = test_steps = common
            notes.append(f"steps: the {len(common)} step(s) both sides have")
        elif base_avail and test_avail:
            k = min(len(base_avail), len(test_avail))
            base_steps, test_steps = base_avail[:k], test_avail[:k]
            notes.append(
                f"steps: no step numbers in common; aligned by position "
                f"(base {format_ranges(base_steps)} ↔ test {format_ranges(test_steps)})"
            )
        else:
            base_steps, test_steps = base_avail, test_avail
    # A side without ProfilerSteps is compared whole (HTA refuses it; we say so instead).
    sides = []
    chosen: tuple[int, ...] | None
    for label, ranks, avail, chosen in (
        ("base", base_ranks, base_avail, base_steps),
        ("test", test_ranks, test_avail, test_steps),
    ):
        if not avail and steps.kind != "some":
            if options.hta_compat:
                raise ValueError(f"the {label} trace has no ProfilerStep (HTA's TraceDiff needs one)")
            notes.append(f"{label}: no ProfilerStep in the trace; every event is compared")
            chosen = None
        sides.append(Side(label, ranks, chosen, avail, options.hta_compat, options.scope.rules))
    return Selection(base=sides[0], test=sides[1], notes=tuple(notes))


# ---- per-name comparison --------------------------------------------------------------


def _compat_iteration() -> pl.Expr:
    """HTA's iteration (docs/semantics.md): GPU-side rows without a launch, and device rows on
    stream 0 that are not Triton cpu_ops, get none."""
    stream = pl.col("stream").fill_null(-1)
    cat = pl.col("cat").cast(pl.Utf8)
    no_iteration = ((stream == 0) & (cat != "cpu_op")) | ((stream > 0) & pl.col("correlation").is_null())
    return pl.when(no_iteration).then(None).otherwise(pl.col("iteration")).alias("iteration")


def _side_rows(traces: TraceSet, side: Side, options: DiffOptions) -> pl.DataFrame:
    """(name, kind, dur) of every compared event of one side: its scope's rows (compat: HTA's)."""
    frames = []
    scoped = CommonOptions(side.scope)
    for rank in side.ranks:
        rank_trace = traces.ranks[rank]
        cat = pl.col("cat").cast(pl.Utf8)
        if options.hta_compat:
            events = rank_trace.events.filter((pl.col("ph") == "X") & pl.col("dur").is_not_null())
            # HTA keeps every timed row with a category except the "Trace" span.
            events = events.filter(cat.is_not_null() & (cat != hta.TRACE_SPAN_CAT))
            if rank_trace.meta.fractional_ts:
                events = hta.ns_rounded(events)
            events = events.with_columns(_compat_iteration())
            stream = pl.col("stream").fill_null(-1)
            kind = pl.when(stream != -1).then(pl.lit(KERNEL)).otherwise(pl.lit(OP))
            if side.steps is not None:
                events = events.filter(pl.col("iteration").is_in(list(side.steps)))
        else:
            events = prepare(traces, scoped.with_ranks((rank,)), columns=("cat", "name", "dur")).events
            events = events.filter(cat.is_in([*GPU_ACTIVITY_CATS, *HOST_WORK_CATS]) & pl.col("dur").is_not_null())
            kind = pl.when(cat.is_in(GPU_ACTIVITY_CATS)).then(pl.lit(KERNEL)).otherwise(pl.lit(OP))
        frames.append(events.select(name=pl.col("name").cast(pl.Utf8), kind=kind, dur=pl.col("dur")))
    rows = (
        pl.concat(frames, how="vertical")
        if frames
        else pl.DataFrame(schema={"name": pl.Utf8, "kind": pl.Utf8, "dur": pl.Float64})
    )
    if options.by != "all":
        rows = rows.filter(pl.col("kind") == options.by)
    if not options.hta_compat:
        rows = rows.with_columns(
            name=pl.when(pl.col("name").str.contains(PROFILER_STEP.pattern))
            .then(pl.lit(STEP_NAME))
            .otherwise(pl.col("name"))
        )
    if options.short_names and rows.height:
        names = rows["name"].unique().to_list()
        short = {n: shorten_name(n) for n in names if n is not None}
        rows = rows.with_columns(name=pl.col("name").replace_strict(short, default=pl.col("name")))
    return rows


def _summarise(rows: pl.DataFrame, n_ranks: int, hta_compat: bool) -> pl.DataFrame:
    """count and total µs per name (and kind), divided by the side's rank count."""
    keys = ["name"] if hta_compat else ["name", "kind"]
    kind_agg = (
        pl.when(pl.col("kind").n_unique() > 1).then(pl.lit(MIXED)).otherwise(pl.col("kind").first())
        if hta_compat
        else None
    )
    aggs: list[pl.Expr] = [
        (pl.len().cast(pl.Float64) / n_ranks).alias("count"),
        (pl.col("dur").sum() / n_ranks).alias("total_us"),
    ]
    if kind_agg is not None:
        aggs.append(kind_agg.alias("kind"))
    return rows.group_by(keys).agg(aggs)


def status_expr(noise_pct: float, noise_us: float) -> pl.Expr:
    """added / removed / slower / faster / unchanged, from counts and totals."""
    delta = pl.col("delta_us")
    within_noise = (delta.abs() <= noise_us) | (
        (pl.col("base_total_us") > 0) & (delta.abs() <= pl.col("base_total_us").abs() * noise_pct / 100.0)
    )
    return (
        pl.when((pl.col("base_count") == 0) & (pl.col("test_count") > 0))
        .then(pl.lit("added"))
        .when((pl.col("base_count") > 0) & (pl.col("test_count") == 0))
        .then(pl.lit("removed"))
        .when(within_noise)
        .then(pl.lit("unchanged"))
        .when(delta > 0)
        .then(pl.lit("slower"))
        .otherwise(pl.lit("faster"))
    )


def compare(base: TraceSet, test: TraceSet, options: DiffOptions | None = None) -> DiffResult:
    """Per-name comparison: one row per (name, kind), sorted by |delta_us| descending.

    Raises ValueError when a requested rank or step is missing on a side.
    """
    options = options or DiffOptions()
    selection = select_sides(base, test, options)
    base_summary = _summarise(_side_rows(base, selection.base, options), len(selection.base.ranks), options.hta_compat)
    test_summary = _summarise(_side_rows(test, selection.test, options), len(selection.test.ranks), options.hta_compat)
    keys = ["name"] if options.hta_compat else ["name", "kind"]
    joined = base_summary.join(test_summary, on=keys, how="full", coalesce=True, suffix="_test")
    if options.hta_compat:
        joined = joined.with_columns(
            kind=pl.when(pl.col("kind").is_null())
            .then(pl.col("kind_test"))
            .when(pl.col("kind_test").is_null() | (pl.col("kind") == pl.col("kind_test")))
            .then(pl.col("kind"))
            .otherwise(pl.lit(MIXED))
        )
    frame = joined.select(
        pl.col("name"),
        pl.col("kind"),
        base_count=pl.col("count").fill_null(0.0),
        base_total_us=pl.col("total_us").fill_null(0.0),
        test_count=pl.col("count_test").fill_null(0.0),
        test_total_us=pl.col("total_us_test").fill_null(0.0),
    ).with_columns(
        delta_count=pl.col("test_count") - pl.col("base_count"),
        delta_us=pl.col("test_total_us") - pl.col("base_total_us"),
    )
    frame = frame.with_columns(
        delta_pct=pl.when(pl.col("base_total_us") != 0)
        .then(pl.col("delta_us") / pl.col("base_total_us") * 100.0)
        .otherwise(None),
        status=status_expr(options.noise_pct, options.noise_us),
    )
    frame = frame.sort(
        [pl.col("delta_us").abs(), pl.col("name"), pl.col("kind")],
        descending=[True, False, False],
        nulls_last=True,
    ).select([pl.col(c).cast(t) for c, t in DIFF_SCHEMA.items()])
    return DiffResult(frame=frame, selection=selection)


def top_changes(frame: pl.DataFrame, n: int = 10) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The n largest increases and the n largest decreases of delta_us (for the bars)."""
    increases = frame.filter(pl.col("delta_us") > 0).sort("delta_us", descending=True).head(n)
    decreases = frame.filter(pl.col("delta_us") < 0).sort("delta_us").head(n)
    return increases, decreases


def hta_counts_change(frame: pl.DataFrame) -> pl.Series:
    """HTA's counts_change_categories: '+', '-' or '=' from delta_count."""
    return frame.select(
        pl.when(pl.col("delta_count") > 0)
        .then(pl.lit("+"))
        .when(pl.col("delta_count") < 0)
        .then(pl.lit("-"))
        .otherwise(pl.lit("="))
        .alias("counts_change")
    )["counts_change"]
