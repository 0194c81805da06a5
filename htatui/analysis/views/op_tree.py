"""The call tree of ops and annotations: the profiler's event tree merged by call path.

Every call of the same name under the same path of callers becomes one node (per rank), with
its calls counted and its self/total CPU and GPU times summed, as a call-tree profiler shows
them. The GPU work an event launched hangs under it as leaves (one per kernel, copy or memset
name), so a kernel leads back to the op that launched it. Work no op launched is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import each_rank
from htatui.analysis.model import job_tree
from htatui.analysis.model.op_events import OpEvents
from htatui.analysis.model.op_nesting import Ints
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
    order of `tree.work`).

    A node is every call of one name and kind under one parent node; it is named here by its
    first call (the row that made it, in (rank, pos) order, the leaves after every event), so
    the nodes are found level by level with whole-column steps: a row's node is the first row
    with its rank, its parent's node, its name and its kind.
    """
    events = _by_rank_and_pos(tree.events)
    n = events.height
    work = tree.work.filter(pl.col("owner").is_not_null() & (pl.col("kind") != "gpu-annotation"))
    row_of = _row_of(events)
    parent_row = row_of(events.select("rank", pos="parent"))
    first = np.full(n, -1, dtype=np.int64)
    depth = events["depth"].to_numpy()
    # Grouped by codes: equal codes are equal texts, and a code is 4 bytes where a text is 16 or more.
    codes = events.select(
        "rank",
        name=pl.col("name").cast(pl.Categorical).to_physical(),
        kind=pl.col("kind").cast(pl.Categorical).to_physical(),
    )
    for level in np.unique(depth):
        rows = np.nonzero(depth == level)[0]
        parents = parent_row[rows]
        first[rows] = _first_of_group(
            codes[rows].with_columns(
                parent=pl.Series(np.where(parents >= 0, first[np.maximum(parents, 0)], -1)),
                row=pl.Series(rows),
            )
        )
    # A leaf whose key is a host node's joins it; the others are new nodes, after every event.
    owner_first = first[row_of(work.select("rank", pos="owner"))] if n else np.empty(0, dtype=np.int64)
    # Codes of the one global Categorical on both sides: equal codes are equal texts.
    leaf_keys = work.select(
        "rank",
        name=pl.col("name").cast(pl.Categorical).to_physical(),
        kind=pl.col("kind").cast(pl.Categorical).to_physical(),
    ).with_columns(parent=pl.Series(owner_first, dtype=pl.Int64), row=pl.int_range(n, n + pl.len(), dtype=pl.Int64))
    made = np.unique(first)
    made_parent = parent_row[made]
    host_keys = codes[made].with_columns(
        parent=pl.Series(np.where(made_parent >= 0, first[np.maximum(made_parent, 0)], -1), dtype=pl.Int64),
        known=pl.Series(made, dtype=pl.Int64),
    )
    leaf_first = _first_of_group(leaf_keys)
    known = leaf_keys.join(host_keys, on=["rank", "parent", "name", "kind"], how="left", maintain_order="left")
    leaf_first = np.where(known["known"].is_null().to_numpy(), leaf_first, known["known"].fill_null(-1).to_numpy())
    firsts = np.unique(np.concatenate([first, leaf_first]))
    assigned = np.searchsorted(firsts, first)
    leaves = np.searchsorted(firsts, leaf_first)
    device = work.select(
        cpu_total_us=pl.lit(0.0),
        cpu_self_us=pl.lit(0.0),
        gpu_self_us=pl.col("dur"),
        gpu_total_us=pl.col("dur"),
    )
    # Summed in row order, one thread: a threaded group sum adds in another order each run, and
    # the same trace would print other last digits.
    node = np.concatenate([assigned, leaves]).astype(np.int64)
    sums = pl.DataFrame(
        {
            "node": np.arange(len(firsts), dtype=np.int64),
            "count": np.bincount(node, minlength=len(firsts)),
            **{
                m: np.bincount(
                    node,
                    weights=np.concatenate(
                        [events[m].fill_null(0.0).to_numpy(), device[m].fill_null(0.0).to_numpy()]
                    ).astype(np.float64),
                    minlength=len(firsts),
                )
                for m in _METRICS
            },
        }
    )
    nodes = _nodes(events, work, firsts, parent_row, first, owner_first)
    joined = nodes.join(sums, on="node", how="left", maintain_order="left")
    return joined.select([pl.col(name).cast(dtype) for name, dtype in NODE_SCHEMA.items()]), len(made)


def _by_rank_and_pos(events: pl.DataFrame) -> pl.DataFrame:
    """`events` sorted by (rank, pos): as they are when built (ranks in order), without the copy
    a sort makes of every column."""
    ordered = events.select(
        ((pl.col("rank").diff() > 0) | ((pl.col("rank").diff() == 0) & (pl.col("pos").diff() > 0))).all()
    ).item()
    return events if ordered else events.sort("rank", "pos")


def _row_of(events: pl.DataFrame) -> Callable[[pl.DataFrame], Ints]:
    """Row numbers in `events` (sorted by rank, pos) of (rank, pos) pairs, -1 where pos is null.

    `pos` numbers a rank's rows from 0 as built, so a pair's row is its rank's first row plus
    its pos; a frame numbered otherwise is looked up by a join.
    """
    ranks = events["rank"].to_numpy()
    rank_ids, rank_starts = np.unique(ranks, return_index=True)
    rows = np.arange(len(ranks), dtype=np.int64)
    contiguous = bool(np.array_equal(rows - rank_starts[np.searchsorted(rank_ids, ranks)], events["pos"].to_numpy()))

    def row_of(pairs: pl.DataFrame) -> Ints:
        pos = pairs["pos"].fill_null(-1).to_numpy().astype(np.int64)
        if contiguous:
            at = np.searchsorted(rank_ids, pairs["rank"].to_numpy())
            start = rank_starts[np.minimum(at, max(len(rank_ids) - 1, 0))] if len(rank_ids) else np.zeros_like(pos)
            found: Ints = np.where(pos >= 0, start + pos, -1)
            return found
        numbered = events.select("rank", "pos", found=pl.int_range(pl.len(), dtype=pl.Int64))
        joined = pairs.join(numbered, on=["rank", "pos"], how="left", maintain_order="left")
        looked_up: Ints = joined["found"].fill_null(-1).to_numpy().astype(np.int64)
        return looked_up

    return row_of


def _first_of_group(keys: pl.DataFrame) -> Ints:
    """Per row of `keys` (rank, name, kind, parent, row), the least `row` with the same key."""
    first = keys.select(pl.col("row").min().over(["rank", "parent", "name", "kind"]))
    return first.to_series().to_numpy().astype(np.int64)


def _nodes(
    events: pl.DataFrame, work: pl.DataFrame, firsts: Ints, parent_row: Ints, first: Ints, owner_first: Ints
) -> pl.DataFrame:
    """rank, node, parent_node, depth, name, kind of each node, from the row that made it."""
    n = events.height
    host = firsts[firsts < n]
    leaf = firsts[firsts >= n] - n
    host_parent = parent_row[host]
    parent_first = np.concatenate(
        [np.where(host_parent >= 0, first[np.maximum(host_parent, 0)], -1), owner_first[leaf]]
    )
    parent_node = np.where(parent_first >= 0, np.searchsorted(firsts, parent_first), -1)
    made = pl.concat(
        [
            events[host].select("rank", pl.col("name").cast(pl.Utf8), "kind"),
            work[leaf].select("rank", pl.col("name").cast(pl.Utf8), "kind"),
        ],
        how="vertical",
    )
    # A leaf hangs under a host node, whose depth comes first (host nodes are numbered first).
    depth = np.zeros(len(firsts), dtype=np.int64)
    depth[: len(host)] = events["depth"].to_numpy()[host]
    depth[len(host) :] = depth[parent_node[len(host) :]] + 1
    return made.select(
        "rank",
        node=pl.int_range(pl.len(), dtype=pl.Int64),
        parent_node=pl.Series(parent_node, dtype=pl.Int64).replace(-1, None),
        depth=pl.Series(depth, dtype=pl.Int64),
        name="name",
        kind="kind",
    )


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
