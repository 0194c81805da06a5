"""ProfilerStep spans per rank and straggler detection across ranks (docs/semantics-counters.md, steps).

`compute` lists every ProfilerStep#N span of each rank with `used` telling whether the step
survives the last-step rule (HTA drops the final step when a rank has two or more).
`stragglers` is HTA's default straggler method: pick the communication kernel (per stream and
name) whose duration varies most across ranks, then in every step mark the ranks that start it
latest. Corrected mode finds NCCL ≥ 2.19 `ncclDevKernel_*` (and RCCL/HCCL) kernels by
`kernel_type`, counts step 0, and never fails: with fewer than two ranks, no usable steps or no
long communication kernel it returns an empty frame and says why. HTA-compatible mode matches
only names starting with `ncclKernel`, like HTA 0.6.1 (issue #360).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.columns import RANK, STEP, ColumnSpec, TableColumns
from htatui.analysis.core.kernel_types import COMMUNICATION, kernel_type
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.prepare import prepare
from htatui.analysis.core.rules import Rules
from htatui.trace.model import TraceSet
from htatui.trace.step_sources import step_spans

SPEC = TableColumns(
    RANK,
    STEP,
    ColumnSpec("start_us", pl.Float64(), "the host ProfilerStep span's start (the job's time base)", "key"),
    ColumnSpec("dur_us", pl.Float64(), "the host ProfilerStep span's length", "key"),
    ColumnSpec("used", pl.Boolean(), "whether the scope's steps count it", "key"),
)
COLUMNS = SPEC.schema

STRAGGLER_SPEC = TableColumns(
    RANK,
    ColumnSpec(
        "straggler_score", pl.Int64(), "HTA's score: steps in which the rank was among the latest starters", "key"
    ),
    ColumnSpec("is_straggler", pl.Boolean(), "HTA's verdict: among the --num-candidates highest scores", "key"),
)
STRAGGLER_COLUMNS = STRAGGLER_SPEC.schema

NOT_ENOUGH_RANKS = "not enough ranks: straggler detection needs ≥ 2"


@dataclass(frozen=True)
class StepsOptions(CommonOptions):
    """Steps view knobs (none beyond the common ones)."""


@dataclass(frozen=True)
class StragglerOptions(CommonOptions):
    """Straggler detection knobs (HTA's defaults)."""

    num_candidates: int = knob(2, flag="--num-candidates", help="stragglers: how many ranks to name", kind="int")
    """How many ranks to mark per step (the k latest starters) and to report as stragglers."""
    profiler_steps: tuple[int, ...] | None = None
    """Steps to analyse (None = every used step)."""
    min_normalized_duration: float = 0.01
    """Ignore communication kernels shorter than this fraction of the mean step time."""


StragglerResult = NotedTable
"""Straggler scores per rank, or an empty frame and the reason."""


def _empty_stragglers(message: str) -> StragglerResult:
    return StragglerResult(frame=pl.DataFrame(schema=STRAGGLER_COLUMNS), message=message)


def compute(traces: TraceSet, options: StepsOptions) -> pl.DataFrame:
    """rank, step, start_us, dur_us, used: each rank's host ProfilerStep spans; used when the scope counts it."""
    # Only the steps are read, so no event column needs filtering.
    prepared = prepare(traces, options, columns=("rank",))
    frames: list[pl.DataFrame] = []
    for rank, rank_steps in prepared.steps.items():
        rank_trace = traces.ranks[rank]
        spans = step_spans(rank_trace.events.select("ph", "cat", "name", "ts", "end", "dur"))
        if options.hta_compat and rank_trace.meta.fractional_ts:
            spans = hta.ns_rounded(spans)
        used = pl.Series(rank_steps.used, dtype=pl.Int64).implode()
        frames.append(
            spans.unique("step", keep="first", maintain_order=True).select(
                rank=pl.lit(rank, dtype=pl.Int32),
                step="step",
                start_us="ts",
                dur_us="dur",
                used=pl.col("step").is_in(used),
            )
        )
    if not frames:
        return pl.DataFrame(schema=COLUMNS)
    out = pl.concat(frames, how="vertical").sort("rank", "step")
    return out.select([pl.col(name).cast(dtype) for name, dtype in COLUMNS.items()])


def profiler_steps(traces: TraceSet, options: CommonOptions) -> list[int]:
    """The used steps of all chosen ranks, sorted (HTA's get_profiler_steps)."""
    prepared = prepare(traces, options, columns=("rank",))
    return sorted({step for steps in prepared.steps_used.values() for step in steps})


_STRAGGLER_READS = ("rank", "index", "cat", "name", "stream", "iteration", "ts", "end", "dur", "collective_name")
"""What the late-start detection reads (kernel typing included): a copy of only these, not of every column."""


LATE_KERNEL_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "stream": pl.Int64(),
    "iteration": pl.Int64(),
    "name": pl.Utf8(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
}
"""A rank's communication kernels inside its steps: what the late-start method picks from."""

LATE_SPAN_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "iteration": pl.Int64(),
    "ts_min": pl.Float64(),
    "end_max": pl.Float64(),
}
"""Per rank and step, its first start and last end (the steps' extent the method measures in)."""


def late_start_inputs(events: pl.DataFrame, rules: Rules) -> tuple[pl.DataFrame, pl.DataFrame]:
    """What the corrected late-start method reads of prepared events (`LATE_KERNEL_COLUMNS`,
    `LATE_SPAN_COLUMNS`): a rank's rows from that rank alone, so they can be made a rank at a time."""
    stepped = events.filter(pl.col("iteration").is_not_null())
    spans = stepped.group_by("rank", "iteration").agg(ts_min=pl.col("ts").min(), end_max=pl.col("end").max())
    kernels = stepped.filter(pl.col("cat") == "kernel").filter(kernel_type(False, rules) == COMMUNICATION)
    return (
        kernels.select([pl.col(c).cast(t) for c, t in LATE_KERNEL_COLUMNS.items()]),
        spans.select([pl.col(c).cast(t) for c, t in LATE_SPAN_COLUMNS.items()]).sort("rank", "iteration"),
    )


def stragglers(traces: TraceSet, options: StragglerOptions) -> StragglerResult:
    """Per rank: straggler_score (how many analysed steps marked the rank as one of the
    `num_candidates` latest starters of the chosen communication kernel) and is_straggler
    (among the top `num_candidates` scores, ties broken by lower rank). An empty frame and a
    message when detection is not possible."""
    prepared = prepare(traces, options, columns=_STRAGGLER_READS)
    if not options.hta_compat:
        kernels, spans = late_start_inputs(prepared.events, options.scope.rules)
        return late_starts(kernels, spans, prepared.steps_used, options)
    ranks = sorted(prepared.steps_used)
    if len(ranks) < 2:
        return _empty_stragglers(NOT_ENOUGH_RANKS)
    wanted, missing = _wanted_steps(prepared.steps_used, options)
    if missing is not None:
        return missing
    events = prepared.events.filter(pl.col("iteration").is_in(pl.Series(wanted, dtype=pl.Int64).implode()))
    n_iterations = events["iteration"].n_unique()
    t_min = events["ts"].min()
    t_max = events["end"].max()
    if not isinstance(t_min, float) or not isinstance(t_max, float) or n_iterations == 0 or t_max <= t_min:
        return _empty_stragglers("no events inside the chosen steps")
    mean_iter_time = (t_max - t_min) / n_iterations
    long_enough = pl.col("dur") >= mean_iter_time * options.min_normalized_duration
    is_comm = (
        pl.col("name").cat.starts_with("ncclKernel") & (pl.col("stream").fill_null(-1) > 0) & (pl.col("iteration") > 0)
    )
    long_comm = events.filter(is_comm & long_enough)
    if long_comm.height == 0:
        return _empty_stragglers(_no_long_comm(events, options))
    return _scores(long_comm, t_min, mean_iter_time, ranks, options)


def late_starts(
    kernels: pl.DataFrame, spans: pl.DataFrame, steps_used: dict[int, list[int]], options: StragglerOptions
) -> StragglerResult:
    """The corrected late-start scores from the ranks' `late_start_inputs` and the steps each uses."""
    ranks = sorted(steps_used)
    if len(ranks) < 2:
        return _empty_stragglers(NOT_ENOUGH_RANKS)
    wanted, missing = _wanted_steps(steps_used, options)
    if missing is not None:
        return missing
    in_wanted = pl.col("iteration").is_in(pl.Series(wanted, dtype=pl.Int64).implode())
    spans = spans.filter(in_wanted)
    n_iterations = spans["iteration"].n_unique()
    t_min = spans["ts_min"].min()
    t_max = spans["end_max"].max()
    if not isinstance(t_min, float) or not isinstance(t_max, float) or n_iterations == 0 or t_max <= t_min:
        return _empty_stragglers("no events inside the chosen steps")
    mean_iter_time = (t_max - t_min) / n_iterations
    kernels = kernels.filter(in_wanted)
    long_comm = kernels.filter(pl.col("dur") >= mean_iter_time * options.min_normalized_duration)
    if long_comm.height == 0:
        return _empty_stragglers(_no_long_comm_message(kernels.height > 0, options))
    return _scores(long_comm, t_min, mean_iter_time, ranks, options)


def _wanted_steps(
    steps_used: dict[int, list[int]], options: StragglerOptions
) -> tuple[list[int], StragglerResult | None]:
    """The steps to analyse, or the empty answer saying there are none."""
    available = sorted({step for steps in steps_used.values() for step in steps})
    wanted = available if options.profiler_steps is None else [s for s in options.profiler_steps if s in available]
    if wanted:
        return wanted, None
    return wanted, _empty_stragglers(
        f"no usable ProfilerStep: requested {list(options.profiler_steps or [])}, available {available}"
        if options.profiler_steps is not None
        else "no ProfilerStep markers on the chosen ranks: straggler detection needs steps"
    )


def _scores(
    long_comm: pl.DataFrame, t_min: float, mean_iter_time: float, ranks: list[int], options: StragglerOptions
) -> StragglerResult:
    """Per rank, how many steps marked it among the latest starters of the most variable kernel."""
    k = max(1, options.num_candidates)
    keys = ["rank", "stream", "iteration", "name"]
    order = ["rank", "index"] if options.hta_compat else ["rank", "ts", "index"]
    last = (
        long_comm.sort(order)
        .group_by(keys)
        .agg(pl.col("ts").last(), pl.col("dur").last())
        .with_columns(
            metric=(pl.col("ts") - t_min) / mean_iter_time,
            duration=pl.col("dur") / mean_iter_time,
        )
    )
    spread = (
        last.group_by("stream", "iteration", "name")
        .agg(std=pl.col("duration").std())
        .group_by("stream", "name")
        .agg(mean_std=pl.col("std").drop_nans().mean())
        .drop_nulls("mean_std")
        .sort("stream", "name")
    )
    if spread.height == 0:
        return _empty_stragglers("no communication kernel ran on two or more ranks in the chosen steps")
    best = spread.filter(pl.col("mean_std") == pl.col("mean_std").max()).head(1)
    candidates = last.join(best.select("stream", "name"), on=["stream", "name"], how="semi")
    if not options.hta_compat:
        candidates = candidates.filter(pl.col("iteration").is_not_null())
    # Per step, the k-th largest start is the threshold; ranks at or above it are marked.
    marked = candidates.with_columns(
        threshold=pl.col("metric").sort(descending=True).get(pl.min_horizontal(pl.len(), k) - 1).over("iteration")
    ).with_columns(mark=(pl.col("metric") >= pl.col("threshold")).cast(pl.Int64))
    scores = marked.group_by("rank").agg(straggler_score=pl.col("mark").sum())
    everyone = pl.DataFrame({"rank": pl.Series(ranks, dtype=pl.Int32)})
    frame = (
        everyone.join(scores.with_columns(pl.col("rank").cast(pl.Int32)), on="rank", how="left")
        .with_columns(pl.col("straggler_score").fill_null(0))
        .sort(["straggler_score", "rank"], descending=[True, False])
        .with_row_index("_position")
        .with_columns(is_straggler=pl.col("_position") < k)
    )
    if not options.hta_compat:
        frame = frame.with_columns(is_straggler=pl.col("is_straggler") & (pl.col("straggler_score") > 0))
    else:
        # HTA ranks only the ranks that ran the chosen kernel.
        ran = scores["rank"].cast(pl.Int32).implode()
        top = frame.filter(pl.col("rank").is_in(ran)).head(k)["rank"]
        frame = frame.with_columns(is_straggler=pl.col("rank").is_in(top.implode()))
    frame = frame.sort("rank").select([pl.col(c).cast(t) for c, t in STRAGGLER_COLUMNS.items()])
    return StragglerResult(frame=frame)


def _no_long_comm(events: pl.DataFrame, options: StragglerOptions) -> str:
    """Why no kernel qualified: none communicates on the GPU at all (gloo, CPU collectives), or none is long enough."""
    kernels = events.filter(pl.col("cat") == "kernel")
    if options.hta_compat:
        any_comm = kernels.filter(pl.col("name").cat.starts_with("ncclKernel")).height > 0
    else:
        any_comm = kernels.filter(kernel_type(False, options.scope.rules) == COMMUNICATION).height > 0
    return _no_long_comm_message(any_comm, options)


def _no_long_comm_message(any_comm: bool, options: StragglerOptions) -> str:
    if not any_comm:
        return (
            "no communication kernels on the GPU in the chosen steps: a gloo or CPU-only job communicates "
            "on the host, which HTA's method cannot see (--view stragglers reads it)"
        )
    return (
        "no communication kernels long enough in the chosen steps "
        f"(each must last at least {options.min_normalized_duration:g} of the mean step)"
    )


def stragglers_message(traces: TraceSet, options: StragglerOptions) -> str | None:
    """Why straggler detection returned nothing, or None when it produced scores."""
    return stragglers(traces, options).message
