"""The one straggler answer: per step and over the job, the rank the others waited for most, and
the phase that explains its delay (with the share it explains, or that none does)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.columns import RANK, STEP, ColumnSpec, TableColumns
from htatui.analysis.views.ranks.phases import phase_excess

_CAUSE = (
    ColumnSpec(
        "cause",
        pl.Utf8(),
        "the phase that made the rank late: its share of the delay, its excess and the others' median",
        "key",
        sentence=True,
    ),
    ColumnSpec("cause_phase", pl.Utf8(), "that phase's name (a record_function range, an op, GPU compute …)", "low"),
    ColumnSpec("cause_excess_us", pl.Float64(), "the phase's time over the other ranks' median", "low"),
    ColumnSpec("cause_pct", pl.Float64(), "the share of the delay the excess explains (at most 100)", "low"),
)
STRAGGLER_SPEC = TableColumns(
    RANK,
    ColumnSpec("is_straggler", pl.Boolean(), "the rank held up at least one step most: the verdict"),
    ColumnSpec("steps", pl.Utf8(), "the steps it held up most", "low"),
    ColumnSpec(
        "delay_us", pl.Float64(), "Σ of the others' exposed waits for it at the collectives it was last to", "key"
    ),
    ColumnSpec("delay_pct", pl.Float64(), "its share of the job's delay"),
    ColumnSpec("calls_last", pl.Int64(), "collectives it was the last rank to reach", "low"),
    *_CAUSE,
)
STRAGGLER_COLUMNS = STRAGGLER_SPEC.schema
"""`is_straggler`: the rank held up at least one step most; `delay_pct`: its share of the job's
delay; `cause_pct`: the share of its delay its cause phase explains (at most 100)."""
"""`is_straggler`: the rank held up at least one step most; `delay_pct`: its share of the job's
delay; `cause_pct`: the share of its delay its cause phase explains (at most 100)."""


VIEW_STRAGGLER_SPEC = STRAGGLER_SPEC + TableColumns(
    ColumnSpec("hta_late_starts", pl.Int64(), "HTA's late-start score for the rank (one more signal)", "low"),
    ColumnSpec("straggler_score", pl.Int64(), "--hta-compat: HTA 0.6.1's late-start score (its own table)"),
)
"""The `stragglers` view: the analysis's columns and HTA's late-start score as one more signal (and
in compat mode HTA's own table: rank, straggler_score, is_straggler)."""
VIEW_STRAGGLER_COLUMNS = {
    name: dtype for name, dtype in VIEW_STRAGGLER_SPEC.schema.items() if name != "straggler_score"
}


METHOD = "who the others waited for at collectives"
"""htatui's straggler method, named with every answer."""


EXPLAINS = 50.0
"""A phase is the cause when its excess explains at least this % of the delay ("most of it")."""


STEP_STRAGGLER_SPEC = TableColumns(
    STEP,
    RANK,
    ColumnSpec("delay_us", pl.Float64(), "Σ of the others' exposed waits for the rank in the step", "key"),
    *_CAUSE,
)
STEP_STRAGGLER_COLUMNS = STEP_STRAGGLER_SPEC.schema


def _fmt_us(value: float) -> str:
    return f"{value:,.0f} µs" if abs(value) >= 10 else f"{value:,.1f} µs"


@dataclass(frozen=True)
class Cause:
    """What made a rank late: its phase with the most excess over the others' median, and the
    share of the delay that excess explains."""

    text: str
    phase: str | None = None
    excess_us: float | None = None
    pct: float | None = None


def _cause(phases: pl.DataFrame, rank: int, steps: list[int], delay_us: float) -> Cause:
    """The cause of `rank`'s `delay_us` over `steps`; "no phase explains this delay" when the
    phase with the most excess explains less than EXPLAINS % of it."""
    best = phase_excess(phases, rank, steps).filter(pl.col("excess_us") > 0).head(1)
    if best.height == 0:
        return Cause("no phase explains this delay (none is longer than on the other ranks)")
    phase, excess = str(best["phase"][0]), float(best["excess_us"][0])
    pct = min(100.0, 100.0 * excess / delay_us) if delay_us > 0 else None
    mine, median = _fmt_us(best["rank_us"][0]), _fmt_us(best["others_median_us"][0])
    # The share comes first: at 80 columns the end of a cause is what gets cut.
    detail = f"+{_fmt_us(excess)}, {mine} vs median {median}"
    if pct is None or pct < EXPLAINS:
        share = "" if pct is None else f", {pct:.0f} % of it"
        return Cause(f"no phase explains this delay (largest: {phase}{share}: {detail})", phase, excess, pct)
    return Cause(f"{phase}: {pct:.0f} % of the delay ({detail})", phase, excess, pct)


def step_leaders(delays: pl.DataFrame) -> pl.DataFrame:
    """step, rank, delay_us: per step, the rank that made the others wait longest (delay > 0)."""
    per_step = delays.group_by("step", "rank").agg(delay_us=pl.col("delay_us").sum()).filter(pl.col("delay_us") > 0)
    return (
        per_step.sort(["step", "delay_us", "rank"], descending=[False, True, False], nulls_last=True)
        .group_by("step", maintain_order=True)
        .agg(pl.col("rank").first(), pl.col("delay_us").first())
        .sort("step")
    )


def per_step_stragglers(delays: pl.DataFrame, phases: pl.DataFrame) -> pl.DataFrame:
    """step, rank, delay_us, cause…: each step's straggler and the phase that made it late."""
    rows = []
    for step_number, rank, delay in step_leaders(delays).iter_rows():
        cause = _cause(phases, rank, [step_number], float(delay)) if step_number is not None else Cause("")
        rows.append(
            {
                "step": step_number,
                "rank": rank,
                "delay_us": float(delay),
                "cause": cause.text,
                "cause_phase": cause.phase,
                "cause_excess_us": cause.excess_us,
                "cause_pct": cause.pct,
            }
        )
    return pl.DataFrame(rows, schema=STEP_STRAGGLER_COLUMNS)


def too_few_ranks(rank_count: int, job_ranks: int | None) -> str:
    """'the job has one rank', or 'one of the job's 8 ranks is chosen' when the scope picked it."""
    count = {0: "no", 1: "one"}.get(rank_count, str(rank_count))
    if job_ranks is not None and job_ranks > rank_count:
        verb = "is" if rank_count == 1 else "are"
        return f"{count} of the job's {job_ranks} ranks {verb} chosen"
    return f"the job has {count} rank{'' if rank_count == 1 else 's'}"


def find_stragglers(
    delays: pl.DataFrame, phases: pl.DataFrame, rank_count: int, source: str | None, job_ranks: int | None = None
) -> tuple[pl.DataFrame, str | None]:
    """`job_ranks`: how many ranks the job has (the scope may pick fewer, `rank_count`)."""
    empty = pl.DataFrame(schema=STRAGGLER_COLUMNS)
    if rank_count < 2:
        return empty, f"{too_few_ranks(rank_count, job_ranks)}: stragglers need two or more"
    if source is None:
        return empty, (
            "no collectives found (no communication kernels, no CPU collectives by the communication "
            "rules: gloo:/nccl: ranges, _C::shm_* ops, c10d:: ops; --comm-rules adds your own)"
        )
    if delays.height == 0:
        return empty, f"no {source} matched across two or more ranks"
    # Per step, the rank that made the others wait longest is that step's straggler.
    step_top = step_leaders(delays)
    totals = delays.group_by("rank").agg(delay_us=pl.col("delay_us").sum(), calls_last=pl.len())
    job_delay = float(totals.filter(pl.col("delay_us") > 0)["delay_us"].sum())
    rows = []
    for rank, delay, calls_last in totals.sort(["delay_us", "rank"], descending=[True, False]).iter_rows():
        if not delay or delay <= 0:
            continue
        its_steps = sorted(s for s in step_top.filter(pl.col("rank") == rank)["step"].to_list() if s is not None)
        # The cause is looked for in the steps it held up (or, if it led no step, where it was ever last).
        late_steps = its_steps or sorted(
            {s for s in delays.filter(pl.col("rank") == rank)["step"].to_list() if s is not None}
        )
        cause = _cause(phases, rank, late_steps, float(delay)) if late_steps else Cause("")
        rows.append(
            {
                "rank": rank,
                "is_straggler": bool(its_steps),
                "steps": ",".join(map(str, its_steps)) or None,
                "delay_us": float(delay),
                "delay_pct": 100.0 * float(delay) / job_delay,
                "calls_last": calls_last,
                "cause": cause.text,
                "cause_phase": cause.phase,
                "cause_excess_us": cause.excess_us,
                "cause_pct": cause.pct,
            }
        )
    frame = pl.DataFrame(rows, schema=STRAGGLER_COLUMNS) if rows else empty
    return frame, None if rows else f"no rank arrived late at the {source}"
