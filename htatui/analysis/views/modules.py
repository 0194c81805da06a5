"""Time per `nn.Module`: per instance, per type, and as a tree (traces recorded with modules).

The TensorBoard plugin's module view and TraceLens show where a model spends its time module by
module; here from the `nn.Module: <Class>_<k>` events PyTorch's Python tracer writes
(`with_modules=True`, or `with_stack=True`). For each module call (`model/modules.py`): its host
time, and the GPU time of the kernels, copies and memsets launched inside it, by itself
(`gpu_self_us`) or with its child modules (`gpu_total_us`). Work launched outside every module
call (the backward pass on the autograd thread, the optimizer) belongs to none. Like every view,
the tables cover the scope's ranks and steps.

- `compute`: one row per rank and module instance (`Linear_3`): calls, host and GPU times, kernels;
- `types`: one row per rank and module class (`Linear`): instances and the same sums, a call
  nested in a call of its own class counted once in the totals;
- `tree`: the calls merged by call path (`call_path` indented two spaces a level) with the kernels
  each module launched as leaves, as the op tree shows ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.prepare import each_rank, prepare
from htatui.analysis.model import modules
from htatui.analysis.model.call_tree import NODE_SCHEMA, depth_first, job_numbers, numbered

__all__ = ["NODE_SCHEMA", "ModulesOptions", "compute", "nodes_of", "tree", "types"]
from htatui.analysis.model.op_events import EVENT_SCHEMA as OP_EVENT_SCHEMA
from htatui.analysis.model.op_events import WORK_SCHEMA as OP_WORK_SCHEMA
from htatui.analysis.model.op_events import OpEvents
from htatui.trace.model import TraceSet

NO_MODULES = (
    "no nn.Module calls on the chosen ranks: record the trace with torch.profiler's with_modules=True "
    "(or with_stack=True) to see time per module"
)

_TIMES = (
    ColumnSpec("host_total_us", pl.Float64(), "Σ of the calls' durations on the host", "key"),
    ColumnSpec("host_self_us", pl.Float64(), "host_total_us minus the time in child modules"),
    ColumnSpec("gpu_self_us", pl.Float64(), "Σ of the GPU work launched by the module's own ops (not its children's)"),
    ColumnSpec("gpu_total_us", pl.Float64(), "Σ of the GPU work launched inside the calls", "key"),
    ColumnSpec("kernels", pl.Int64(), "kernels, copies and memsets launched inside the calls"),
)
INSTANCE_SPEC = TableColumns(
    RANK,
    ColumnSpec("module", pl.Utf8(), "the nn.Module instance's name (its path in the model)", "id"),
    ColumnSpec("type", pl.Utf8(), "the module's class"),
    ColumnSpec("parent", pl.Utf8(), "the enclosing module instance", "low"),
    ColumnSpec("depth", pl.Int64(), "modules above it", "low"),
    ColumnSpec("calls", pl.Int64(), "calls of the instance in the scope"),
    *_TIMES,
)
INSTANCE_COLUMNS = INSTANCE_SPEC.schema

TYPE_SPEC = TableColumns(
    RANK,
    ColumnSpec("type", pl.Utf8(), "the nn.Module class", "id"),
    ColumnSpec("instances", pl.Int64(), "instances of the class"),
    ColumnSpec("calls", pl.Int64(), "calls of its instances"),
    *_TIMES,
)
TYPE_COLUMNS = TYPE_SPEC.schema

TREE_SPEC = TableColumns(
    RANK,
    ColumnSpec("node", pl.Int64(), "the node's number (one per name and kind under one parent, over all ranks)", "low"),
    ColumnSpec("parent_node", pl.Int64(), "its parent's number (null at a rank's top level)", "low"),
    ColumnSpec("depth", pl.Int64(), "levels below the rank's top level", "low"),
    ColumnSpec("call_path", pl.Utf8(), "the module's (or kernel's) name, indented two spaces a level", "id"),
    ColumnSpec("kind", pl.Utf8(), "module; kernel, memcpy or memset for a device leaf", "low"),
    ColumnSpec("count", pl.Int64(), "calls merged into the node"),
    ColumnSpec("host_total_us", pl.Float64(), "Σ of the calls' durations on the host", "key"),
    ColumnSpec("host_self_us", pl.Float64(), "host_total_us minus the time in children"),
    ColumnSpec("gpu_self_us", pl.Float64(), "Σ of the GPU work the calls launched themselves"),
    ColumnSpec("gpu_total_us", pl.Float64(), "Σ of the GPU work of the node's subtree", "key"),
)
TREE_COLUMNS = TREE_SPEC.schema
"""The tree's nodes (the op tree's columns; host time where the op tree says CPU time)."""

_READ = ("rank", "index", "ph", "cat", "name", "pid", "tid", "ts", "dur", "correlation")


@dataclass(frozen=True)
class ModulesOptions(CommonOptions):
    """Module-view knobs: none beyond the scope."""


def calls(traces: TraceSet, options: CommonOptions) -> list[modules.ModuleCalls]:
    """Each chosen rank's module calls and the work beside them, built once per job and scope."""
    key = ("modules.calls", *selection_key(traces, options))
    return memoised(traces, key, lambda: each_rank(traces, options, _rank_calls))


def _rank_calls(part: TraceSet, options: CommonOptions) -> modules.ModuleCalls:
    return modules.build(prepare(part, options, columns=_READ).events)


def _all_calls(traces: TraceSet, options: CommonOptions) -> pl.DataFrame:
    parts = [part.calls for part in calls(traces, options) if part.calls.height]
    return pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=modules.CALL_SCHEMA)


def compute(traces: TraceSet, options: ModulesOptions) -> NotedTable:
    """Per rank and nn.Module instance: calls, host time, the GPU time of what it launched by
    itself and in all, kernels.

    Sorted within each rank by GPU total time, then host time."""
    every = _all_calls(traces, options)
    if every.height == 0:
        return NotedTable(pl.DataFrame(schema=INSTANCE_COLUMNS), NO_MODULES)
    parents = every.select("rank", parent="pos", parent_module="module")
    named = every.join(parents, on=["rank", "parent"], how="left", maintain_order="left")
    table = named.group_by("rank", "module", maintain_order=True).agg(
        type=pl.col("type").first(),
        parent=pl.col("parent_module").first(),
        depth=pl.col("depth").first(),
        calls=pl.len(),
        host_total_us=pl.col("host_us").sum(),
        host_self_us=pl.col("host_self_us").sum(),
        gpu_self_us=pl.col("gpu_self_us").sum(),
        gpu_total_us=pl.col("gpu_total_us").sum(),
        kernels=pl.col("kernels").sum(),
    )
    ordered = table.sort(["rank", "gpu_total_us", "host_total_us", "module"], descending=[False, True, True, False])
    return NotedTable(ordered.select([pl.col(c).cast(t) for c, t in INSTANCE_COLUMNS.items()]))


def types(traces: TraceSet, options: ModulesOptions) -> NotedTable:
    """Per rank and nn.Module class: instances, calls and the instances' times summed (a call
    inside one of its own class counted once in the totals)."""
    every = _all_calls(traces, options)
    if every.height == 0:
        return NotedTable(pl.DataFrame(schema=TYPE_COLUMNS), NO_MODULES)
    outermost = _outermost_of_type(every)
    table = (
        every.with_columns(_outer=pl.Series(outermost))
        .group_by("rank", "type", maintain_order=True)
        .agg(
            instances=pl.col("module").n_unique(),
            calls=pl.len(),
            host_total_us=pl.col("host_us").filter(pl.col("_outer")).sum(),
            host_self_us=pl.col("host_self_us").sum(),
            gpu_self_us=pl.col("gpu_self_us").sum(),
            gpu_total_us=pl.col("gpu_total_us").filter(pl.col("_outer")).sum(),
            kernels=pl.col("kernels").filter(pl.col("_outer")).sum(),
        )
    )
    ordered = table.sort(["rank", "gpu_total_us", "host_total_us", "type"], descending=[False, True, True, False])
    return NotedTable(ordered.select([pl.col(c).cast(t) for c, t in TYPE_COLUMNS.items()]))


def _outermost_of_type(every: pl.DataFrame) -> np.ndarray:
    """Per call, whether no enclosing call is of its own type (`every` holds whole ranks)."""
    outer = np.ones(every.height, dtype=bool)
    for (_rank,), frame in every.with_row_index("_row").group_by(["rank"], maintain_order=True):
        by_pos = {int(p): i for i, p in enumerate(frame["pos"].to_list())}
        parent = [by_pos.get(int(p), -1) if p is not None else -1 for p in frame["parent"].to_list()]
        kinds = frame["type"].to_list()
        rows = frame["_row"].to_list()
        for i, row in enumerate(rows):
            up = parent[i]
            while up >= 0:
                if kinds[up] == kinds[i]:
                    outer[row] = False
                    break
                up = parent[up]
    return outer


def tree(traces: TraceSet, options: ModulesOptions) -> NotedTable:
    """The module calls merged by call path, depth first (`call_path` indented two spaces a
    level), with the kernels each launched as leaves."""
    parts = []
    for part in calls(traces, options):
        if part.calls.height:
            nodes, host_nodes = numbered(_as_op_events(part))
            parts.append((depth_first(nodes), host_nodes))
    renumbered = job_numbers(parts)
    if not renumbered:
        return NotedTable(pl.DataFrame(schema=TREE_COLUMNS), NO_MODULES)
    nodes = pl.concat(sorted(renumbered, key=lambda part: int(part["rank"][0])), how="vertical")
    table = nodes.with_columns(call_path=pl.lit("  ").repeat_by(pl.col("depth")).list.join("") + pl.col("name"))
    renamed = table.rename({"cpu_total_us": "host_total_us", "cpu_self_us": "host_self_us"})
    return NotedTable(renamed.select([pl.col(c).cast(t) for c, t in TREE_COLUMNS.items()]))


def nodes_of(table: pl.DataFrame) -> pl.DataFrame:
    """The nodes of a `tree` table in the op tree's columns (its widget's): `name` without the
    indent, host time as CPU time."""
    return table.with_columns(
        name=pl.col("call_path").str.slice(2 * pl.col("depth")),
        cpu_total_us=pl.col("host_total_us"),
        cpu_self_us=pl.col("host_self_us"),
    ).select(list(NODE_SCHEMA))


def _as_op_events(part: modules.ModuleCalls) -> OpEvents:
    """A rank's module calls in the shape of the op tree's events, for `call_tree.numbered`."""
    events = part.calls.select(
        "rank",
        "pos",
        "parent",
        "depth",
        "index",
        name=pl.col("module").cast(pl.Categorical),
        kind=pl.lit("module"),
        ts="ts",
        dur="host_us",
        cpu_total_us="host_us",
        cpu_self_us="host_self_us",
        gpu_self_us="gpu_self_us",
        gpu_total_us="gpu_total_us",
    )
    work = part.work.select(
        "rank",
        "index",
        name=pl.col("name").cast(pl.Categorical),
        kind="kind",
        dur="dur",
        bytes=pl.lit(None),
        owner="owner",
    )
    return OpEvents(
        events.select([pl.col(c).cast(t) for c, t in OP_EVENT_SCHEMA.items()]),
        work.select([pl.col(c).cast(t) for c, t in OP_WORK_SCHEMA.items()]),
    )
