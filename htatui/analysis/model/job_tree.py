"""The profiler's event tree of a job's chosen ranks, built a rank at a time and kept on the job.

The ops table, its bars, the op tree and the patterns' operator suggestions read the same tree
(`op_events.build` over the scope's rows), made once per job and selection.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.memo import gc_paused, held, memoised, selection_key
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import each_rank, prepare, rank_steps_of
from htatui.analysis.core.scope import in_steps
from htatui.analysis.model import graph_replay, op_events
from htatui.trace.model import TraceSet


def tree(traces: TraceSet, options: CommonOptions) -> op_events.OpEvents:
    """The profiler's event tree of the chosen ranks (`op_events.build`).

    The events of the scope's steps (`--steps all`: every event, as `prof.key_averages()` counts
    them). Compat: HTA's ns rounding and last step filter (`prepare`) first. Built once per job
    and selection, and shared by the ops table, its bars, the op tree and the patterns' operator
    suggestions.
    """
    return memoised(traces, ("ops.tree", *selection_key(traces, options)), lambda: _tree(traces, options))


def held_rank_trees(traces: TraceSet, options: CommonOptions) -> list[op_events.OpEvents] | None:
    """Each chosen rank's tree, as `tree` built them, when the job holds that tree (None otherwise)."""
    found = held(traces, ("ops.rank_trees", *selection_key(traces, options)))
    return found if isinstance(found, list) else None


def _tree(traces: TraceSet, options: CommonOptions) -> op_events.OpEvents:
    """The tree is built rank by rank (`each_rank`): over a dataset each rank is read, built and
    dropped, so a thousand-rank job holds the trees, not every rank's events. The ranks' trees
    are kept beside it (its frames hold their buffers, so they cost nothing more) for the op tree,
    which reads each rank's alone (`held_rank_trees`)."""
    key = ("ops.rank_trees", *selection_key(traces, options))
    with gc_paused():
        parts = memoised(traces, key, lambda: each_rank(traces, options, rank_tree))
    return op_events.combine(parts)


def rank_tree(part: TraceSet, options: CommonOptions) -> op_events.OpEvents:
    """The tree of a job of one rank (`each_rank`'s part), as `tree` builds each rank's."""
    if options.hta_compat:
        return op_events.build(prepare(part, options).events)
    # X events and instants (a `[memory]` instant outside every event is a row of its own), in
    # the scope's steps.
    (rank,) = part.ranks.values()
    held = in_steps(rank_steps_of(part, rank.rank, options.scope))
    built = op_events.build(rank.events, keep=pl.col("ph").is_in(["X", "i"]) & held)
    # Kernels a graph launch replayed get the ops that launched them in the capture trace.
    return graph_replay.with_captured_ops(built, graph_replay.replayed(part, rank.rank)) if part.captures else built
