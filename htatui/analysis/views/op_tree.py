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
from htatui.analysis.model.op_events import OpEvents
from htatui.analysis.views import ops
from htatui.trace.model import TraceSet

NODE_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "node": pl.Int64(),
    "parent_node": pl.Int64(),
    "depth": pl.Int64(),
    "name": pl.Utf8(),
    "kind": pl.Utf8(),
    "count": pl.Int64(),
    "cpu_total_us": pl.Float64(),
    "cpu_self_us": pl.Float64(),
    "gpu_self_us": pl.Float64(),
    "gpu_total_us": pl.Float64(),
}
"""One row per node: `node` numbers the nodes of all ranks (parents first), `parent_node` is
null at a rank's top level; device leaves have kind kernel / memcpy / memset and no CPU time."""

_METRICS = ("cpu_total_us", "cpu_self_us", "gpu_self_us", "gpu_total_us")


def build(tree: OpEvents) -> pl.DataFrame:
    """The call tree of `tree` (`NODE_SCHEMA`), nodes in first-call order."""
    return numbered(tree)[0]


def numbered(tree: OpEvents) -> tuple[pl.DataFrame, int]:
    """The call tree of `tree` (`NODE_SCHEMA`) and how many of its nodes are host events': those
    come first (ranks in order, each rank's in first-call order), then the device leaves (in the
    order of `tree.work`)."""
    events = tree.events.sort("rank", "pos")
    node_of: dict[tuple[int, int | None, str, str], int] = {}
    parents: list[int | None] = []
    ranks: list[int] = []
    depths: list[int] = []
    names: list[str] = []
    kinds: list[str] = []
    event_node: dict[tuple[int, int], int] = {}
    assigned: list[int] = []

    def node_for(rank: int, parent: int | None, name: str, kind: str) -> int:
        key = (rank, parent, name, kind)
        found = node_of.get(key)
        if found is None:
            found = node_of[key] = len(parents)
            parents.append(parent)
            ranks.append(rank)
            depths.append(0 if parent is None else depths[parent] + 1)
            names.append(name)
            kinds.append(kind)
        return found

    for rank, pos, parent, name, kind in zip(
        events["rank"].to_list(),
        events["pos"].to_list(),
        events["parent"].to_list(),
        events["name"].to_list(),
        events["kind"].to_list(),
        strict=True,
    ):
        parent_node = None if parent is None else event_node[(rank, parent)]
        node = node_for(rank, parent_node, name, kind)
        event_node[(rank, pos)] = node
        assigned.append(node)
    host_nodes = len(parents)
    host = events.select(*_METRICS).with_columns(node=pl.Series(assigned, dtype=pl.Int64))
    work = tree.work.filter(pl.col("owner").is_not_null() & (pl.col("kind") != "gpu-annotation"))
    leaves = [
        node_for(rank, event_node[(rank, owner)], name, kind)
        for rank, owner, name, kind in zip(
            work["rank"].to_list(), work["owner"].to_list(), work["name"].to_list(), work["kind"].to_list(), strict=True
        )
    ]
    device = work.select(
        cpu_total_us=pl.lit(0.0),
        cpu_self_us=pl.lit(0.0),
        gpu_self_us=pl.col("dur"),
        gpu_total_us=pl.col("dur"),
    ).with_columns(node=pl.Series(leaves, dtype=pl.Int64))
    sums = (
        pl.concat([host, device], how="vertical")
        .group_by("node")
        .agg(count=pl.len(), **{m: pl.col(m).sum() for m in _METRICS})
    )
    nodes = pl.DataFrame(
        {
            "rank": ranks,
            "node": list(range(len(parents))),
            "parent_node": parents,
            "depth": depths,
            "name": names,
            "kind": kinds,
        },
        schema={k: NODE_SCHEMA[k] for k in ("rank", "node", "parent_node", "depth", "name", "kind")},
    )
    joined = nodes.join(sums, on="node", how="left", maintain_order="left")
    return joined.select([pl.col(name).cast(dtype) for name, dtype in NODE_SCHEMA.items()]), host_nodes


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


def depth_first(nodes: pl.DataFrame) -> pl.DataFrame:
    """`nodes` in depth-first order, each level sorted by GPU total, then CPU total (descending)."""
    ordered = nodes.sort(["gpu_total_us", "cpu_total_us", "node"], descending=[True, True, False])
    children: dict[tuple[int, int | None], list[int]] = {}
    for rank, node, parent in zip(
        ordered["rank"].to_list(), ordered["node"].to_list(), ordered["parent_node"].to_list(), strict=True
    ):
        children.setdefault((rank, parent), []).append(node)
    order: list[int] = []
    for rank in sorted({rank for rank, _ in children}):
        stack = list(reversed(children.get((rank, None), [])))
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(reversed(children.get((rank, node), [])))
    position = {node: i for i, node in enumerate(order)}
    return (
        nodes.with_columns(_order=pl.col("node").replace_strict(position, default=None)).sort("_order").drop("_order")
    )


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


def job_numbers(parts: list[tuple[pl.DataFrame, int]]) -> list[pl.DataFrame]:
    """Each rank's nodes (with its count of host nodes) numbered as `build` numbers the whole
    job's: every rank's host nodes first, ranks in order, then every rank's device leaves, ranks in
    the order given; ranks without nodes left out."""
    parts = [(nodes, host_nodes) for nodes, host_nodes in parts if nodes.height]
    ranks = [int(nodes["rank"][0]) for nodes, _ in parts]
    host_before = [0] * len(parts)
    seen = 0
    for i in sorted(range(len(parts)), key=ranks.__getitem__):
        host_before[i], seen = seen, seen + parts[i][1]
    leaves_before = seen
    renumbered = []
    for (nodes, host_nodes), host_shift in zip(parts, host_before, strict=True):
        leaf_shift = leaves_before - host_nodes
        leaves_before += nodes.height - host_nodes
        renumbered.append(
            nodes.with_columns(
                [
                    pl.when(pl.col(c) < host_nodes).then(pl.col(c) + host_shift).otherwise(pl.col(c) + leaf_shift)
                    for c in ("node", "parent_node")
                ]
            )
        )
    return renumbered


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
