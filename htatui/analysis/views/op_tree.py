"""The call tree of ops and annotations: the profiler's event tree merged by call path.

Every call of the same name under the same path of callers becomes one node (per rank), with
its calls counted and its self/total CPU and GPU times summed, as a call-tree profiler shows
them. The GPU work an event launched hangs under it as leaves (one per kernel, copy or memset
name), so a kernel leads back to the op that launched it. Work no op launched is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.prepare import each_rank
from htatui.analysis.model import job_tree
from htatui.analysis.model.call_tree import NODE_SCHEMA, build, depth_first, job_numbers, numbered
from htatui.analysis.model.op_events import OpEvents
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
    """Call-tree knobs beyond the scope (its steps, as in the ops table): how much of the tree to
    print (8 ranks printed 5,982 lines; issue 38 #7). The app's tree folds instead, and shows all."""

    top_k: int | None = knob(
        None, flag="--top", help="op-tree: each node's heaviest children kept (all: every one)", kind="int", minimum=1
    )
    max_depth: int | None = knob(
        None,
        flag="--depth",
        help="op-tree: levels below each rank's top kept (all: every level)",
        kind="int",
        minimum=0,
    )


SPEC = TableColumns(
    RANK,
    ColumnSpec("node", pl.Int64(), "the node's number (one per name and kind under one parent, over all ranks)", "low"),
    ColumnSpec("parent_node", pl.Int64(), "its parent's number (null at a rank's top level)", "low"),
    ColumnSpec("depth", pl.Int64(), "levels below the rank's top level", "low"),
    ColumnSpec("call_path", pl.Utf8(), "the node's name, indented two spaces a level", "id"),
    ColumnSpec("kind", pl.Utf8(), "op, annotation, runtime …; kernel, memcpy or memset for a device leaf", "low"),
    ColumnSpec("count", pl.Int64(), "calls merged into the node"),
    ColumnSpec("cpu_total_us", pl.Float64(), "Σ of the calls' durations on the CPU", "key"),
    ColumnSpec("cpu_self_us", pl.Float64(), "cpu_total_us minus the time in children"),
    ColumnSpec("gpu_self_us", pl.Float64(), "Σ of the GPU work the calls launched themselves"),
    ColumnSpec("gpu_total_us", pl.Float64(), "Σ of the GPU work of the node's subtree", "key"),
)
TABLE_COLUMNS = SPEC.schema
"""The view's table: the nodes with `name` shown as `call_path`, indented two spaces a level."""


def nodes_of(table: pl.DataFrame) -> pl.DataFrame:
    """The nodes (`NODE_SCHEMA`) of a `compute` table: each `call_path` without its indent is the name."""
    return table.with_columns(name=pl.col("call_path").str.slice(2 * pl.col("depth"))).select(list(NODE_SCHEMA))


def _rank_nodes(part: TraceSet, options: OpTreeOptions) -> tuple[pl.DataFrame, int]:
    """One rank's tree, depth first, numbered as a job of its own (see `numbered`)."""
    return _depth_first_numbered(job_tree.rank_tree(part, options))


def _depth_first_numbered(tree: OpEvents) -> tuple[pl.DataFrame, int]:
    nodes, host_nodes = numbered(tree)
    return depth_first(nodes), host_nodes


def _rank_parts(traces: TraceSet, options: OpTreeOptions) -> list[tuple[pl.DataFrame, int]]:
    """Each chosen rank's nodes: from its tree when the job holds it (the ops table built them),
    else each rank's tree built and dropped."""
    held = job_tree.held_rank_trees(traces, options)
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


def table(traces: TraceSet, options: OpTreeOptions) -> NotedTable:
    """The call tree depth first (`compute`), down to `--depth` and each node's `--top` heaviest
    children, saying how many nodes that kept."""
    whole = compute(traces, options)
    kept = trimmed(whole, options.top_k, options.max_depth)
    if kept.height == whole.height:
        return NotedTable(whole)
    shown = [f"each node's {options.top_k} heaviest children"] if options.top_k is not None else []
    shown += [f"down to depth {options.max_depth}"] if options.max_depth is not None else []
    said = f"{', '.join(shown)}: {kept.height:,} of {whole.height:,} nodes (--top all --depth all: every one)"
    return NotedTable(kept, said)


def trimmed(nodes: pl.DataFrame, top_k: int | None, max_depth: int | None) -> pl.DataFrame:
    """`nodes` (depth first) down to `max_depth`, each parent's `top_k` heaviest children (GPU
    total, then CPU total) and the rank's `top_k` heaviest top nodes; a node whose parent went goes."""
    if top_k is None and max_depth is None:
        return nodes
    kept = nodes.filter(pl.col("depth") <= max_depth) if max_depth is not None else nodes
    if top_k is not None:
        heaviest = pl.int_range(pl.len()).over(
            "rank", "parent_node", order_by=[-pl.col("gpu_total_us"), -pl.col("cpu_total_us"), pl.col("node")]
        )
        kept = kept.filter(heaviest < top_k)
    # A node stays only under a kept parent: level by level, from the top.
    alive = kept.filter(pl.col("parent_node").is_null())
    level = alive
    while level.height:
        level = kept.join(level.select("rank", parent_node="node"), on=["rank", "parent_node"], how="semi")
        alive = pl.concat([alive, level], how="vertical")
    return nodes.join(alive.select("rank", "node"), on=["rank", "node"], how="semi", maintain_order="left")
