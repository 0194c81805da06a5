"""The scope in words, for every header: `report`'s title, the app's status bar, the diff.

Steps come from the same mask the views read (`prepare.rank_steps_of`), or from a dataset's
stored summary when that answers without reading a rank.
"""

from __future__ import annotations

from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import chosen_ranks, job_scope, rank_steps_of
from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.scope import RankSteps, choose_steps, describe
from htatui.trace.figures import valid_figures
from htatui.trace.model import TraceSet, any_figures_kept


def scope_steps(traces: TraceSet, options: CommonOptions) -> dict[int, RankSteps]:
    """How the scope's steps fall on each chosen rank."""
    summary = traces.summary
    chosen = chosen_ranks(traces, options)
    scope = job_scope(traces, options.scope)
    # The steady state reads the steps' events (captures, durations): no stored list answers it.
    stored_answers = not options.hta_compat and options.scope.steps.kind != "steady"
    # A trace folder's ranks keep their figures (steps by start, as the events list them): its
    # summary, if any, is not read for the steps.
    if summary is not None and stored_answers and not any_figures_kept(traces):
        # A dataset lists each rank's steps (by number; steps run in number order) and where
        # they come from, so the header needs no rank's events.
        stored = {
            rank: (steps, source)
            for rank, steps, source in summary.select("rank", "iterations", "step_source").iter_rows()
        }
        if all(rank in stored for rank in chosen):
            return {
                rank: choose_steps(stored[rank][0], scope.steps, scope.job_steps, source=stored[rank][1])
                for rank in chosen
            }
    # Ranks not read yet (a cached folder's, or a dataset's opened with others) are read one at a
    # time and dropped again, as `each_rank` does: the header never holds every rank's events.
    unread = {rank for rank in chosen if not traces.ranks[rank].loaded}
    steps = {}
    for rank in chosen:
        kept = valid_figures(traces.ranks[rank].stored_figures()) if rank in unread and stored_answers else None
        if kept is not None:
            # Its cache entry keeps the steps by start and their source, as `rank_steps` finds
            # them in the events: the header reads no rank (the views read it, a rank at a time).
            by_start = kept["steps_by_start"][0].to_list()
            steps[rank] = choose_steps(by_start, scope.steps, scope.job_steps, source=kept["step_source"][0])
            continue
        steps[rank] = rank_steps_of(traces, rank, scope)
        if len(unread) >= 2 and rank in unread:
            traces.ranks[rank].unload()
    return steps


def describe_ranks(traces: TraceSet, options: CommonOptions) -> str:
    every = traces.rank_ids
    if options.ranks is None:
        return f"ranks all ({len(every)})" if len(every) != 1 else f"rank {every[0]}"
    chosen = chosen_ranks(traces, options)
    return f"rank{'s' if len(chosen) != 1 else ''} {format_ranges(chosen, separator=',')}"


def describe_scope(traces: TraceSet, options: CommonOptions) -> str:
    """'ranks all (2) · steps 2-3 (last step 4 left out)', with 'HTA 0.6.1 rules' in compat mode."""
    parts = [describe_ranks(traces, options), describe(scope_steps(traces, options), options.scope)]
    if options.hta_compat:
        parts.append("HTA 0.6.1 rules")
    return " · ".join(parts)


def missing_steps(traces: TraceSet, options: CommonOptions) -> str | None:
    """Why explicitly named steps select nothing on the chosen ranks, or None."""
    if options.scope.steps.kind != "some":
        return None
    steps = scope_steps(traces, options)
    if any(rank_steps.used for rank_steps in steps.values()):
        return None
    available = sorted({s for rank_steps in steps.values() for s in rank_steps.available})
    have = f"steps {format_ranges(available)}" if available else "no ProfilerStep or iteration annotation"
    return f"--steps {options.scope.steps}: no such step on the chosen ranks ({have})"
