"""The `nn.Module` calls of a trace recorded `with_modules` (or `with_stack`), and the GPU work each launched.

PyTorch's Python tracer writes one `python_function` event per module call, named
`nn.Module: <Class>_<k>` (`k` numbers the instances of a class). Module calls nest on their
thread; a launch (a runtime or driver call with a correlation id) belongs to the innermost module
call around it on its thread, and its kernels, copies and memsets (same correlation) are that
call's GPU work. So:

- `host_us`: the call's duration; `host_self_us`: less its child module calls';
- `gpu_self_us`: the device time of the work launched inside it and in no child module call;
- `gpu_total_us`: of all the work launched inside it, children included (so a child's total never
  exceeds its parent's, and a call's total is the sum of the kernels launched inside it).

Work launched outside every module call (the autograd thread's backward, an optimizer step) has no
module. Times are compared in whole nanoseconds, as the op tree compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.model import op_nesting
from htatui.analysis.model.op_events import KIND_BY_CAT
from htatui.trace.kineto import GPU_ACTIVITY_CATS, GPU_ANNOTATION, is_device_row

MODULE_PREFIX = "nn.Module: "
"""The name of a module call's `python_function` event, before `<Class>_<k>`."""

CALL_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "pos": pl.Int64(),
    "parent": pl.Int64(),
    "depth": pl.Int64(),
    "index": pl.Int64(),
    "module": pl.Utf8(),
    "type": pl.Utf8(),
    "ts": pl.Float64(),
    "host_us": pl.Float64(),
    "host_self_us": pl.Float64(),
    "gpu_self_us": pl.Float64(),
    "gpu_total_us": pl.Float64(),
    "kernels": pl.Int64(),
}
"""One row per module call, in (thread, start) order: `pos` numbers a rank's calls, `parent` is the
enclosing call's `pos` (null at the top), `module` the instance (`Linear_3`), `type` its class
(`Linear`); `kernels` counts the device rows launched inside it, children included."""

WORK_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "name": pl.Utf8(),
    "kind": pl.Utf8(),
    "dur": pl.Float64(),
    "owner": pl.Int64(),
}
"""Device rows (kernels, copies, memsets) with the `pos` of the innermost module call that
launched them (null when none did)."""


@dataclass(frozen=True)
class ModuleCalls:
    calls: pl.DataFrame
    work: pl.DataFrame


def module_type(instance: pl.Expr) -> pl.Expr:
    """`Linear_3` → `Linear` (the class: the instance less its trailing `_<k>`)."""
    return instance.str.replace(r"_\d+$", "")


def has_modules(events: pl.DataFrame) -> bool:
    """Whether `events` hold any module call (the trace was recorded with modules)."""
    names = events["name"].unique().cast(pl.Utf8)
    return bool(names.str.starts_with(MODULE_PREFIX).any())


def build(events: pl.DataFrame) -> ModuleCalls:
    """The module calls of one rank's `events` (rank, index, ph, cat, name, pid, tid, ts, dur,
    correlation) and the device rows beside them."""
    if events.height == 0 or not has_modules(events):
        return ModuleCalls(pl.DataFrame(schema=CALL_SCHEMA), pl.DataFrame(schema=WORK_SCHEMA))
    rank = int(events["rank"][0])
    x = events.filter(pl.col("ph") == "X")
    name = pl.col("name").cast(pl.Utf8)
    modules = x.filter((pl.col("cat") == "python_function") & name.str.starts_with(MODULE_PREFIX)).select(
        "index", "pid", "tid", "ts", dur=pl.col("dur").fill_null(0.0).clip(lower_bound=0.0), module=name.str.slice(11)
    )
    launches = x.filter(
        ~is_device_row() & pl.col("correlation").is_not_null() & (pl.col("cat") != GPU_ANNOTATION)
    ).select("index", "pid", "tid", "ts", "correlation", dur=pl.col("dur").fill_null(0.0).clip(lower_bound=0.0))
    device = x.filter(pl.col("cat").is_in(GPU_ACTIVITY_CATS) & pl.col("correlation").is_not_null()).select(
        "index",
        name=name,
        kind=pl.col("cat").cast(pl.Utf8).replace_strict(KIND_BY_CAT, default="kernel", return_dtype=pl.Utf8),
        dur=pl.col("dur").fill_null(0.0).clip(lower_bound=0.0),
        correlation="correlation",
    )
    owner_of_launch, parent, order = _nest(modules, launches)
    # Each launch's module (by correlation), and so each device row's.
    by_correlation = launches.select("correlation", owner=pl.Series(owner_of_launch, dtype=pl.Int64)).unique(
        "correlation", keep="first", maintain_order=True
    )
    work = device.join(by_correlation, on="correlation", how="left", maintain_order="left")
    owner = work["owner"].fill_null(-1).to_numpy()
    n = modules.height
    owned = owner >= 0
    gpu_self = np.bincount(owner[owned], weights=work["dur"].to_numpy()[owned], minlength=n).astype(np.float64)
    count = np.bincount(owner[owned], minlength=n).astype(np.float64)
    depth = op_nesting.depths(parent)
    host = modules["dur"].to_numpy().astype(np.float64)
    has_parent = parent >= 0
    children_host = np.bincount(parent[has_parent], weights=host[has_parent], minlength=n)
    # Rows are numbered (`pos`) in (thread, start) order, as the op tree numbers its events.
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64)
    calls = modules.select(
        rank=pl.lit(rank, dtype=pl.Int32),
        pos=pl.Series(pos),
        parent=pl.Series(np.where(has_parent, pos[np.maximum(parent, 0)], -1)).replace(-1, None),
        depth=pl.Series(depth),
        index="index",
        module="module",
        type=module_type(pl.col("module")),
        ts="ts",
        host_us="dur",
        host_self_us=pl.Series(host - children_host),
        gpu_self_us=pl.Series(gpu_self),
        gpu_total_us=pl.Series(op_nesting.subtree_sums(gpu_self, parent, depth)),
        kernels=pl.Series(op_nesting.subtree_sums(count, parent, depth)).cast(pl.Int64),
    ).sort("pos")
    work_frame = work.select(
        rank=pl.lit(rank, dtype=pl.Int32),
        index="index",
        name="name",
        kind="kind",
        dur="dur",
        owner=pl.Series(np.where(owned, pos[np.maximum(owner, 0)], -1), dtype=pl.Int64).replace(-1, None),
    )
    return ModuleCalls(
        calls.select([pl.col(c).cast(t) for c, t in CALL_SCHEMA.items()]),
        work_frame.select([pl.col(c).cast(t) for c, t in WORK_SCHEMA.items()]),
    )


def _nest(modules: pl.DataFrame, launches: pl.DataFrame) -> tuple[op_nesting.Ints, op_nesting.Ints, op_nesting.Ints]:
    """Each launch's innermost module call (row of `modules`, -1 for none), each module call's
    parent call (-1 at the top), and the module rows in (thread, start, longest first) order."""
    both = pl.concat(
        [
            modules.select("pid", "tid", "ts", "dur", "index", module=pl.lit(True)),
            launches.select("pid", "tid", "ts", "dur", "index", module=pl.lit(False)),
        ]
    )
    parent, order = op_nesting.frame_parents(both)
    # Each row's nearest module call, itself included: a launch's is its owner, and a module
    # call's parent is its parent row's.
    nearest = op_nesting.resolve(parent, both["module"].to_numpy())
    n = modules.height
    module_parent = np.where(parent[:n] >= 0, nearest[np.maximum(parent[:n], 0)], -1)
    return nearest[n:], module_parent, order[order < n]
