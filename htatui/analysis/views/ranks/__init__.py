"""Across ranks: the rank × step matrix, stragglers on every backend, and the collectives (the Ranks page).

The parts: where ranks meet and who waited (`meeting`), what each rank spent its steps on
(`phases`), the straggler verdict and its cause (`stragglers`), the collectives (`collectives`)
and the matrix (`matrix`); this module runs them once per job and scope (`analyse`) and gives
the report tables. They read each rank's small tables (`tables`: stored by an ingest, or made a
rank at a time from the events), never every rank's events at once. docs/semantics-ranks.md has the rules.

Corrected mode only: `stragglers` with `hta_compat` returns HTA 0.6.1's score table
(`steps.stragglers`), named as HTA's method.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.describe import scope_steps
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import NotedTable
from htatui.analysis.core.prepare import each_rank, prepare
from htatui.analysis.core.scope import ragged_note
from htatui.analysis.views import steps as steps_view
from htatui.analysis.views.ranks.collectives import collective_table
from htatui.analysis.views.ranks.matrix import step_matrix
from htatui.analysis.views.ranks.meeting import (
    SOURCES,
    best_source,
    call_delays,
    mismatch_note,
    mismatched_counts,
    realigned,
    skewed_clocks,
    source_calls,
    with_exposed_waits,
    with_waits,
    without_mismatched,
)
from htatui.analysis.views.ranks.phases import PHASE_COLUMNS, fold_cpu_phases, phase_excess
from htatui.analysis.views.ranks.stragglers import (
    METHOD,
    STEP_STRAGGLER_COLUMNS,
    VIEW_STRAGGLER_COLUMNS,
    find_stragglers,
    per_step_stragglers,
    too_few_ranks,
)
from htatui.analysis.views.ranks.tables import READS, job_tables
from htatui.trace.model import TraceSet


@dataclass(frozen=True)
class RanksOptions(steps_view.StragglerOptions):
    """The Ranks views' knobs: whose phases to compare, plus HTA's straggler knobs (its late starts)."""

    straggler: int | None = knob(
        None,
        flag="--straggler",
        help="stragglers --phases: the rank whose phases to compare (default: the top straggler)",
        kind="int",
    )


@dataclass(frozen=True)
class RanksResult:
    """Everything the Ranks screen shows, and why a part is empty."""

    matrix: pl.DataFrame
    phases: pl.DataFrame
    """rank, step, phase, dur_us: CPU phases, GPU compute and kernel names (the cause candidates)."""
    calls: pl.DataFrame
    """rank, pg, kind, step, seq, ts, end, dur_us, msg_bytes, group_size, arrival_last_us, wait_us,
    exposed_wait_us."""
    stragglers: pl.DataFrame
    step_stragglers: pl.DataFrame
    """step, rank, delay_us, cause…: per step, the rank the others waited for most."""
    collectives: pl.DataFrame
    source: str | None
    message: str | None
    rank_count: int
    clocks: pl.DataFrame | None = None
    """rank, offset_us, calls, dur_us: ranks whose clock disagreed with the others' at the
    collectives, realigned by that offset before waits and skews were measured."""
    left_out: tuple[int, ...] = ()
    """Ranks without ProfilerStep while others have them: their calls cannot be matched by step,
    so they are left out (counted whole they would be mixed with the others' chosen steps)."""
    ragged: str | None = None
    """Which ranks lack a step the scope chose on others, and the steps every rank is measured over."""
    mismatched: pl.DataFrame | None = None
    """Ranks whose collective counts in a process group's step differ from the others'
    (`meeting.mismatched_counts`): their calls there are left out of the pairing."""

    @property
    def frame(self) -> pl.DataFrame:
        return self.stragglers


def analyse(traces: TraceSet, options: RanksOptions) -> RanksResult:
    """The rank × step matrix, the collective calls and their waits, stragglers and collectives.

    Made once per job and scope: the Ranks page and each of its report tables read the same result.
    """
    return memoised(traces, ("ranks.analyse", *selection_key(traces, options)), lambda: _analyse(traces, options))


def _analyse(traces: TraceSet, options: RanksOptions) -> RanksResult:
    # Each rank's small tables (stored at ingest, or made a rank at a time), never every rank's events.
    tables = job_tables(traces, options)
    steps_used = {int(rank): list(used) for rank, used in tables["rank_steps"].select("rank", "steps_used").iter_rows()}
    left_out = stepless_among_stepped(steps_used)
    steps_used = {rank: steps for rank, steps in steps_used.items() if rank not in left_out}
    rank_count = len(steps_used)
    step_table = tables["steps"].filter("used")
    calls, source = best_source(tables["calls"])
    calls = _in_used_steps(calls, steps_used)
    # A rank that made more or fewer calls in a group's step than the others cannot be paired call by call.
    mismatched = mismatched_counts(calls)
    calls = without_mismatched(calls, mismatched)
    # A rank on a clock of its own (another host, no sync) is moved onto the others' by where
    # the collectives end: else its waits read as hours inside a step of milliseconds.
    clocks = skewed_clocks(calls)
    busy_of = tables.busy_of  # a rank's intervals at a time: all ranks' grow with the kernel count
    if clocks.height:
        calls = realigned(calls, clocks)

        def busy_of(rank: int) -> pl.DataFrame:
            return realigned(tables.busy_of(rank), clocks)

    calls = with_exposed_waits(with_waits(calls), busy_of)
    phases_cpu = _in_used_steps(fold_cpu_phases(tables["cpu_phases"]), steps_used)
    gpu_steps = _in_used_steps(tables["gpu_phases"], steps_used)
    # group_by gives no row order: sorted, so the table and its ties read the same every time.
    phases = pl.concat([phases_cpu, gpu_steps], how="vertical_relaxed").sort("rank", "step", "phase")
    matrix = step_matrix(step_table, tables["gpu_steps"], calls, source, phases_cpu)
    delays = call_delays(calls)
    stragglers, message = find_stragglers(delays, phases, rank_count, source, len(traces.ranks))
    per_step = per_step_stragglers(delays, phases) if rank_count > 1 else pl.DataFrame(schema=STEP_STRAGGLER_COLUMNS)
    collectives = collective_table(calls, delays, traces)
    ragged = ragged_note(scope_steps(traces, options.with_ranks(None)))
    return RanksResult(
        matrix,
        phases,
        calls,
        stragglers,
        per_step,
        collectives,
        source,
        message,
        rank_count,
        clocks,
        tuple(left_out),
        ragged,
        mismatched,
    )


def clock_offsets(traces: TraceSet, options: RanksOptions) -> pl.DataFrame:
    """`skewed_clocks` of the chosen ranks' collective calls, without the rest of `analyse`
    (no waits, phases or message bytes): cheap enough for the notes made at load. Each rank's
    calls are found on its own events, so the ranks' columns are never copied into one frame
    (that copy doubled the memory of a 256-rank folder's `report`)."""

    return clocks_of_parts(each_rank(traces, options, rank_clock_calls))


def rank_clock_calls(part: TraceSet, alone: RanksOptions) -> tuple[pl.DataFrame, dict[int, list[int]]]:
    """One rank's collective calls (every source) and the steps it used: a part of `clock_offsets`."""
    prepared = prepare(part, alone, columns=ANALYSE_READS)
    calls = [
        source_calls(prepared.events, alone.hta_compat, alone.scope.rules, source, None).with_columns(
            source=pl.lit(source)
        )
        for source in SOURCES
    ]
    return pl.concat(calls, how="vertical_relaxed"), prepared.steps_used


def clocks_of_parts(parts: list[tuple[pl.DataFrame, dict[int, list[int]]]]) -> pl.DataFrame:
    """`skewed_clocks` of the ranks' `rank_clock_calls`, as `clock_offsets` gives them."""
    steps_used = {rank: steps for _, used in parts for rank, steps in used.items()}
    left_out = stepless_among_stepped(steps_used)
    steps_used = {rank: steps for rank, steps in steps_used.items() if rank not in left_out}
    every = pl.concat([calls for calls, _ in parts], how="vertical_relaxed")
    calls, _ = best_source(every.filter(~pl.col("rank").is_in(left_out)))
    return skewed_clocks(without_mismatched(_in_used_steps(calls, steps_used)))


def stepless_among_stepped(steps_used: dict[int, list[int]]) -> list[int]:
    """Ranks without steps when other ranks have them (none when no rank has steps: then every
    rank counts its whole trace, alike)."""
    stepless = sorted(rank for rank, steps in steps_used.items() if not steps)
    return stepless if len(stepless) < len(steps_used) else []


def _left_out_note(result: RanksResult, message: str | None) -> str | None:
    """`message`, with the ranks left out for want of steps named first."""
    notes = [note for note in (result.ragged, mismatch_note(result.mismatched)) if note]
    if result.left_out:
        ranks = ", ".join(map(str, result.left_out))
        notes.append(f"rank {ranks} left out: no ProfilerStep in the chosen steps while the other ranks have them")
    if result.clocks is not None:
        notes += [
            f"rank {rank}'s clock is {offset:+,.0f} µs off the others' at the collectives: realigned for these "
            "waits (hta_late_starts compares raw clocks)"
            for rank, offset in result.clocks.select("rank", "offset_us").iter_rows()
        ]
    if not notes:
        return message
    return "; ".join([*notes, message] if message else notes)


ANALYSE_READS = READS
"""The event and detail columns `analyse` reads; tests/analysis/test_ranks.py checks it against every column."""


def _in_used_steps(frame: pl.DataFrame, steps_used: dict[int, list[int]]) -> pl.DataFrame:
    """Rows of the steps the last-step rule kept; a rank without steps keeps everything."""
    used = pl.DataFrame(
        [(rank, step) for rank, steps in steps_used.items() for step in steps],
        schema={"rank": pl.Int32(), "step": pl.Int64()},
        orient="row",
    )
    stepless = [rank for rank, steps in steps_used.items() if not steps]
    kept = frame.join(used, on=["rank", "step"], how="semi")
    return pl.concat([kept, frame.filter(pl.col("rank").is_in(stepless))]) if stepless else kept


def late_starts(traces: TraceSet, options: steps_view.StragglerOptions) -> NotedTable:
    """HTA's late-start table (the `late-starts` view). Corrected mode from the ranks' tables (a
    dataset's stored ones: no rank is read, where the events of every rank at once would be held),
    so the scores are those `stragglers` shows beside its own; compat mode, HTA's method over the events."""
    if options.hta_compat:
        return steps_view.stragglers(traces, options)
    tables = job_tables(traces, options)
    steps_used = {int(rank): list(used) for rank, used in tables["rank_steps"].select("rank", "steps_used").iter_rows()}
    return steps_view.late_starts(tables["late_kernels"], tables["late_spans"], steps_used, options)


def stragglers(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """The one straggler answer, its method named: who the others waited for at collectives and
    why, with HTA's late-start score beside it as one more signal (`hta_late_starts`). In compat
    mode, HTA 0.6.1's own table (its late-start method), named as such."""
    if options.hta_compat:
        late = steps_view.stragglers(traces, options)
        method = "method: HTA 0.6.1's late starts (per step, the ranks that start its most variable collective last)"
        return NotedTable(late.frame, f"{method}; {late.message}" if late.message else method)
    result = analyse(traces, options)
    tables = job_tables(traces, options)
    steps_used = {int(rank): list(used) for rank, used in tables["rank_steps"].select("rank", "steps_used").iter_rows()}
    late = steps_view.late_starts(tables["late_kernels"], tables["late_spans"], steps_used, options)
    scores = late.frame.filter(pl.col("straggler_score") > 0).select("rank", hta_late_starts="straggler_score")
    frame = (
        result.stragglers.join(scores, on="rank", how="full", coalesce=True)
        .with_columns(
            pl.col("is_straggler").fill_null(False),
            pl.col("delay_us", "delay_pct").fill_null(0.0),
            pl.col("calls_last").fill_null(0),
            pl.col("hta_late_starts").fill_null(0),
        )
        .sort(["delay_us", "hta_late_starts", "rank"], descending=[True, True, False])
        .select([pl.col(c).cast(t) for c, t in VIEW_STRAGGLER_COLUMNS.items()])
    )
    if result.message is not None:
        return NotedTable(frame, _left_out_note(result, result.message))
    note = f"method: {METHOD} (meeting points: {result.source}); hta_late_starts: HTA's late-start score"
    return NotedTable(frame, _left_out_note(result, f"{note} ({late.message})" if late.message else note))


def straggler_phases(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """phase, rank_us, others_median_us, excess_us: a straggler's phases against the other ranks'
    median over the steps it held up (`options.straggler`, by default the top straggler)."""
    result = analyse(traces, options)
    empty = pl.DataFrame(schema=PHASE_COLUMNS)
    if result.stragglers.height == 0:
        return NotedTable(empty, result.message or "no straggler")
    rank = options.straggler if options.straggler is not None else int(result.stragglers["rank"][0])
    row = result.stragglers.filter(pl.col("rank") == rank)
    if row.height == 0:
        return NotedTable(empty, f"rank {rank} made no other rank wait")
    steps = [int(s) for s in (row["steps"][0] or "").split(",") if s] or sorted(
        s for s in result.matrix["step"].unique().to_list() if s is not None
    )
    where = f"rank {rank} against the other ranks' median, steps {','.join(map(str, steps))}"
    return NotedTable(phase_excess(result.phases, rank, steps), where)


def straggler_steps(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """Per step: the rank the others waited for most, how long, and the phase that made it late."""
    result = analyse(traces, options)
    return NotedTable(result.step_stragglers, _left_out_note(result, _with_source(result.message, result.source)))


def rank_steps(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """The rank × step matrix: step, GPU busy/idle, comm and wait time, and one column per CPU phase."""
    result = analyse(traces, options)
    message = None if result.matrix.height else "no ProfilerStep markers on the chosen ranks"
    return NotedTable(result.matrix, _left_out_note(result, message))


def collectives(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """Per process group and kind: calls, message bytes, duration, algbw/busbw, cross-rank skew."""
    result = analyse(traces, options)
    if result.collectives.height == 0:
        return NotedTable(result.collectives, _left_out_note(result, "no collectives found on the chosen ranks"))
    note = (
        None
        if result.rank_count > 1
        else f"{too_few_ranks(result.rank_count, len(traces.ranks))}: cross-rank skew needs two or more"
    )
    return NotedTable(result.collectives, _left_out_note(result, _with_source(note, result.source)))


def _with_source(message: str | None, source: str | None) -> str | None:
    if message is not None:
        return message
    return f"meeting points: {source}" if source else None
