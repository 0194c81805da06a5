"""The call tree of ops and annotations: the profiler's event tree merged by call path.

Every call of the same name under the same path of callers becomes one node (per rank), with
its calls counted and its self/total CPU and GPU times summed, as a call-tree profiler shows
them. The GPU work an event launched hangs under it as leaves (one per kernel, copy or memset
name), so a kernel leads back to the op that launched it. Work no op launched is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import each_rank
from htatui.analysis.model.call_tree import NODE_SCHEMA, build, depth_first, job_numbers, numbered
from htatui.analysis.model.op_events import OpEvents
from htatui.analysis.views import ops
from htatui.trace.model import TraceSet

__all__ = ["NODE_SCHEMA", "build", "compute", "depth_first", "launcher_of", "nodes_of", "numbered"]


def launcher_of(nodes: pl.DataFrame, rank: int, name: str, kind: str) -> int | None:
    """The node of the op that launched the most time of this kernel (copy, memset) name on
    `rank`; None when no op launched it."""
    leaves = nodes.filter((pl.col("rank") == rank) & (pl.col("name") == name) & (pl.col("kind") == kind))
    leaves = leaves.filter(pl.col("parent_node").is_not_null())
    if leaves.height == 0:
        return None
    best = leaves.sort(["gpu_total_us", "node"], descending=[True, False]).row(0, named=True)
    parent: int = best["parent_node"]
    return parent


@dataclass(frozen=True)
class OpTreeOptions(CommonOptions):
    """Call-tree knobs: none beyond the scope (its steps, as in the ops table)."""


TABLE_COLUMNS: dict[str, pl.DataType] = {
    ("call_path" if name == "name" else name): dtype for name, dtype in NODE_SCHEMA.items()
}
"""The view's table: the nodes with `name` shown as `call_path`, indented two spaces a level."""


def nodes_of(table: pl.DataFrame) -> pl.DataFrame:
    """The nodes (`NODE_SCHEMA`) of a `compute` table: each `call_path` without its indent is the name."""
    return table.with_columns(name=pl.col("call_path").str.slice(2 * pl.col("depth"))).select(list(NODE_SCHEMA))


def _rank_nodes(part: TraceSet, options: OpTreeOptions) -> tuple[pl.DataFrame, int]:
    """One rank's tree, depth first, numbered as a job of its own (see `numbered`)."""
    return _depth_first_numbered(ops.rank_tree(part, options))


def _depth_first_numbered(tree: OpEvents) -> tuple[pl.DataFrame, int]:
    nodes, host_nodes = numbered(tree)
    return depth_first(nodes), host_nodes


def _rank_parts(traces: TraceSet, options: OpTreeOptions) -> list[tuple[pl.DataFrame, int]]:
    """Each chosen rank's nodes: from its tree when the job holds it (the ops table built them),
    else each rank's tree built and dropped."""
    held = ops.held_rank_trees(traces, options)
    if held is None:
        return each_rank(traces, options, _rank_nodes)
    return [_depth_first_numbered(tree) for tree in held]


def compute(traces: TraceSet, options: OpTreeOptions) -> pl.DataFrame:
    """`report --view op-tree`: the call tree depth first, `call_path` indented two spaces per level.

    Built a rank at a time (a rank's nodes are its own) and numbered as one tree of the job, so a
    thousand-rank job holds each rank's nodes, not every rank's events and tree.
    """
    parts = job_numbers(_rank_parts(traces, options))
    if not parts:
        return pl.DataFrame(schema=TABLE_COLUMNS)
    # Depth first, rank by rank (`depth_first` keeps each rank's nodes together, ranks in order).
    nodes = pl.concat(sorted(parts, key=lambda part: int(part["rank"][0])), how="vertical")
    table = nodes.with_columns(call_path=pl.lit("  ").repeat_by(pl.col("depth")).list.join("") + pl.col("name"))
    return table.select([pl.col(name).cast(dtype) for name, dtype in TABLE_COLUMNS.items()])
