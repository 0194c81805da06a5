"""The profiler's own event tree, rebuilt from a trace: what `prof.key_averages()` adds up.

One row per host event that PyTorch's profiler turns into a `FunctionEvent` (operators, user
annotations, runtime and driver calls, Triton launchers), nested and trimmed the way
`EventList._build_tree` does it, with the GPU work each one launched. docs/semantics-ops.md
states every rule and why; in short:

- nesting is per thread, events sorted by (start, longest first); an event is a child of the
  innermost open event that it starts inside and does not outlast (one that starts at the
  other's end, or ends after it, is not its child). Times are compared in whole nanoseconds;
- a runtime or driver call whose `External id` names an operator on another thread that spans
  it is nested on that operator's thread (the profiler moves it there);
- a parent whose only child has its own name absorbs that child (the profiler's dedup of
  e.g. an autocast or dispatcher re-entry), taking the child's children and launched work;
- launched work (kernels, copies, memsets) belongs to the operator or annotation that made the
  launching call: the one its `External id` names when that one spans the call, else the
  innermost one around the call on its thread. GPU-side user annotations are not work;
- a Triton launcher (a cpu_op with a `stream` argument, as inductor records it, or one that
  launched a kernel of its own name) is a row of its own kind with its CPU time and its kernels
  (key_averages lists it and, under the same name, the kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from htatui.analysis.model import op_nesting
from htatui.analysis.model.callstack import DEVICE_SIDE_CATS
from htatui.analysis.model.op_nesting import Floats, Ints
from htatui.trace.kineto import (
    DRIVER_CATS,
    FRONTEND_CATS,
    GPU_ACTIVITY_CATS,
    GPU_ANNOTATION,
    MEMORY_EVENT,
    RUNTIME_CATS,
)

SKIPPED_HOST_CATS = ("python_function", "Trace")
"""Host X events the profiler does not list in key_averages (Python tracer frames, its span)."""

KIND_BY_CAT = {
    "cpu_op": "op",
    "user_annotation": "annotation",
    **dict.fromkeys(RUNTIME_CATS, "runtime"),
    **dict.fromkeys(DRIVER_CATS, "driver"),
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "mtia_ccp_events": "kernel",
    GPU_ANNOTATION: "gpu-annotation",
}
"""The `kind` column: what sort of profiler row an event category gives."""

LAUNCHER_KIND = "kernel-launcher"
MEMORY_KIND = "memory"
HOST_KINDS = ("op", "annotation", "runtime", "driver", LAUNCHER_KIND, MEMORY_KIND)
DEVICE_KINDS = ("kernel", "memcpy", "memset", "gpu-annotation")

EVENT_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "pos": pl.Int64(),
    "parent": pl.Int64(),
    "depth": pl.Int64(),
    "index": pl.Int64(),
    "name": pl.Categorical(),
    "kind": pl.Utf8(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
    "cpu_total_us": pl.Float64(),
    "cpu_self_us": pl.Float64(),
    "gpu_self_us": pl.Float64(),
    "gpu_total_us": pl.Float64(),
}
"""One row per kept host event (after the dedup), in start order per thread: `pos` numbers the
rows of a rank, `parent` is the parent's `pos` (null at the top), `index` the event's row in
the trace file. `name` is Categorical (a code a row, where a text costs ~20 bytes more: the
tree is kept while the Ops page shows); readers that make text rows cast it."""

WORK_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "name": pl.Categorical(),
    "kind": pl.Utf8(),
    "dur": pl.Float64(),
    "bytes": pl.Int64(),
    "owner": pl.Int64(),
}
"""Device rows (work and GPU annotations) with the `pos` of the host event that owns them
(null when none does, or for GPU annotations); `bytes` moved or set by copies and memsets.
`name` is Categorical: kernel names run to hundreds of bytes and repeat (49 of the tree's 146
MiB on a real 1.6M-event rank as text, under 1 as codes); readers cast it to text."""


MEMORY_SCHEMA: dict[str, pl.DataType] = {"rank": pl.Int32(), "count": pl.Int64()}


@dataclass(frozen=True)
class OpEvents:
    """The host event tree of the chosen ranks and the device rows beside it."""

    events: pl.DataFrame
    work: pl.DataFrame
    loose_memory: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=MEMORY_SCHEMA))
    """Per rank, the `[memory]` instants outside every host event: key_averages lists them as
    a `[memory]` row (allocations and frees no op or annotation was running during)."""


def display_name(name: pl.Expr) -> pl.Expr:
    """The profiler's row name: every `ProfilerStep#N` is listed as `ProfilerStep*`."""
    return pl.when(name.str.starts_with("ProfilerStep#")).then(pl.lit("ProfilerStep*")).otherwise(name)


def build(events: pl.DataFrame, keep: pl.Expr | None = None) -> OpEvents:
    """The tree of `events` (any number of ranks; the loader's columns; X events, and `[memory]`
    instants for the loose-memory count).

    `keep`: the rows to build from (every row by default), applied as each part is picked out,
    so a rank's kept rows are never copied as a whole (~100 MiB on a 1.6M-event rank)."""
    if keep is not None:
        if events.height == 0 or not events.select(keep.any()).item():
            return combine([])
    # One rank (the usual case) is used as it is: splitting by rank copies every column.
    one_rank = events.height > 0 and events["rank"].n_unique() == 1
    frames = [events] if one_rank else events.partition_by("rank", maintain_order=True)
    chosen = pl.lit(True) if keep is None else keep
    return combine([_build_rank(frame, chosen) for frame in frames if frame.height])


def combine(parts: list[OpEvents]) -> OpEvents:
    """The trees of several ranks as one, in the order given."""
    parts = [part for part in parts if part.events.height or part.work.height or part.loose_memory.height]
    if not parts:
        return OpEvents(pl.DataFrame(schema=EVENT_SCHEMA), pl.DataFrame(schema=WORK_SCHEMA))
    return OpEvents(
        pl.concat([p.events for p in parts], how="vertical"),
        pl.concat([p.work for p in parts], how="vertical"),
        pl.concat([p.loose_memory for p in parts], how="vertical"),
    )


_EMPTY = pl.lit("", dtype=pl.Categorical)


def _display_name_codes() -> pl.Expr:
    """`display_name` of the events' Categorical names, kept Categorical ("" for none): worked
    out on the categories, where a text per row would cost ~40 bytes on a million host rows."""
    name = pl.col("name").cast(pl.Categorical)
    step = pl.lit("ProfilerStep*", dtype=pl.Categorical)
    return pl.when(name.cat.starts_with("ProfilerStep#")).then(step).otherwise(name).fill_null(_EMPTY)


def _ns(column: str) -> pl.Expr:
    # Trace times are µs with ns decimals; whole ns make equal ends compare equal.
    return (pl.col(column) * 1000.0).round(0).cast(pl.Int64)


def _build_rank(events: pl.DataFrame, keep: pl.Expr) -> OpEvents:
    rank = int(events["rank"][0])
    cat = pl.col("cat").cast(pl.Utf8)
    # Lazy, so each filter copies only the columns its select reads; categories match as text.
    x = events.lazy().filter(keep & (pl.col("ph") == "X")) if "ph" in events.columns else events.lazy().filter(keep)
    host = (
        x.filter(
            ~pl.col("cat").is_in([*DEVICE_SIDE_CATS, *SKIPPED_HOST_CATS]).fill_null(False) & pl.col("ts").is_not_null()
        )
        .select(
            "index",
            "pid",
            "tid",
            cat=pl.col("cat").fill_null(_EMPTY),
            name=_display_name_codes(),
            ts=pl.col("ts"),
            dur=pl.col("dur").fill_null(0.0).clip(lower_bound=0.0),
            start_ns=_ns("ts"),
            dur_ns=(pl.col("dur").fill_null(0.0).clip(lower_bound=0.0) * 1000.0).round(0).cast(pl.Int64),
            correlation=pl.col("correlation"),
            external_id=pl.col("external_id"),
            launcher=(cat == "cpu_op") & pl.col("stream").is_not_null(),
        )
        .collect()
    )
    device = (
        x.filter(pl.col("cat").is_in([*GPU_ACTIVITY_CATS, GPU_ANNOTATION]).fill_null(False))
        .select(
            "index",
            cat=cat,
            name=_display_name_codes(),
            dur=pl.col("dur").fill_null(0.0).clip(lower_bound=0.0),
            correlation=pl.col("correlation"),
            external_id=pl.col("external_id"),
            bytes=pl.col("bytes"),
        )
        .collect()
    )
    tree = _Tree(host)
    owners = tree.owners(device)
    tree.attach(owners, device)
    tree.dedup()
    loose = _loose_memory(events, tree, keep)
    memory = pl.DataFrame({"rank": [rank], "count": [loose]}, schema=MEMORY_SCHEMA)
    events_frame, positions = tree.frame(rank, owners, device["dur"].to_numpy())
    work = tree.work_frame(rank, device, owners, positions)
    return OpEvents(events_frame, work, memory.filter(pl.col("count") > 0))


def _loose_memory(events: pl.DataFrame, tree: _Tree, keep: pl.Expr) -> int:
    """How many `[memory]` instants of the kept rows fall outside every host event (ends
    included), any thread: the profiler attaches an allocation to whatever CPU event spans its time."""
    if "ph" not in events.columns:
        return 0
    memory = keep & (pl.col("ph") == "i") & (pl.col("name").cast(pl.Utf8) == MEMORY_EVENT)
    instants = events.lazy().filter(memory).select("ts").collect()
    if instants.height == 0:
        return 0
    times = instants.select(_ns("ts"))["ts"].drop_nulls().to_numpy()
    if len(tree.start) == 0:
        return len(times)
    # Spans in (start, end) order merge while a start is within the running maximum end.
    order = np.lexsort((tree.end, tree.start))
    starts, ends = tree.start[order], tree.end[order]
    reach = np.maximum.accumulate(ends)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > reach[:-1]
    first = np.nonzero(new)[0]
    merged_starts = starts[first]
    merged_ends = np.maximum.reduceat(ends, first)
    k = np.searchsorted(merged_starts, times, side="right") - 1
    inside = (k >= 0) & (times <= merged_ends[np.maximum(k, 0)])
    return int((~inside).sum())


def _at(values: Ints, rows: Ints) -> Ints:
    """`values[rows]` where a row is given (≥ 0), else -1; `values` may be empty."""
    if len(values) == 0:
        return np.full(len(rows), -1, dtype=np.int64)
    return np.where(rows >= 0, values[np.maximum(rows, 0)], -1)


def _thread_rank(host: pl.DataFrame) -> Ints:
    """Each row's place among the distinct "pid/tid" texts in sorted order (sorting by it sorts
    by the text): the texts are made for the distinct (pid, tid) pairs only, not for every row."""
    if host.height == 0:
        return np.empty(0, dtype=np.int64)
    missing = 2**32 - 1
    pid = host["pid"].to_physical().fill_null(missing).to_numpy().astype(np.uint64)
    pair = (pid << np.uint64(32)) | host["tid"].to_physical().fill_null(missing).to_numpy().astype(np.uint64)
    del pid
    first = pl.Series(pair).arg_unique().to_numpy()
    texts = host.select("pid", "tid")[first].select(
        pl.concat_str(
            pl.col("pid").cast(pl.Utf8).fill_null(""), pl.col("tid").cast(pl.Utf8).fill_null(""), separator="/"
        ).rank("dense")
    )
    places = texts.to_series().to_numpy().astype(np.int64) - 1
    by_pair = np.argsort(pair[first])
    found: Ints = places[by_pair][np.searchsorted(pair[first][by_pair], pair)]
    return found


class _Tree:
    """One rank's host events as numpy arrays, nested and deduplicated with whole-array steps
    (`op_nesting`); row numbers are the host frame's."""

    def __init__(self, host: pl.DataFrame) -> None:
        n = host.height
        self.host = host
        self.rows = np.arange(n, dtype=np.int64)
        self.start = host["start_ns"].to_numpy().astype(np.int64)
        self.end = self.start + host["dur_ns"].to_numpy().astype(np.int64)
        self.frontend = host["cat"].is_in(FRONTEND_CATS).to_numpy()
        self.launcher = host["launcher"].fill_null(False).to_numpy().copy()
        # The first op or annotation (file order) with each positive External id, and each row's
        # (-1: none), found by a binary search over the ids in order rather than a join of every row.
        named = host["external_id"].is_not_null().to_numpy()
        external = host["external_id"].fill_null(0).to_numpy().astype(np.int64)
        candidates = np.flatnonzero(self.frontend & named & (external > 0))
        ids, first = np.unique(external[candidates], return_index=True)
        rows_by_id = candidates[first]
        in_file_order = np.argsort(rows_by_id, kind="stable")
        self.by_external = pl.DataFrame(
            {"external_id": pl.Series(ids[in_file_order], dtype=pl.Int64), "row": rows_by_id[in_file_order]},
            schema={"external_id": pl.Int64(), "row": pl.Int64()},
        )
        target = np.full(n, -1, dtype=np.int64)
        if len(ids):
            at = np.minimum(np.searchsorted(ids, external), len(ids) - 1)
            target = np.where(named & ~self.frontend & (ids[at] == external), rows_by_id[at], -1)
            del at
        del named, external
        safe = np.maximum(target, 0)
        spans = (self.start[safe] <= self.start) & (self.end <= self.end[safe])
        self.linked = np.where((target >= 0) & spans, target, -1)
        # Each step's arrays are dropped once used: a rank of a million events holds 8 MB an array.
        del target, safe, spans
        # A call linked to an op on another thread is nested on that op's thread.
        thread = _thread_rank(host)[np.where(self.linked >= 0, self.linked, self.rows)]
        index = host["index"].to_numpy()
        self.order = np.lexsort((index, -self.end, self.start, thread)).astype(np.int64)
        sorted_thread = thread[self.order]
        del thread, index
        first_of_thread = np.zeros(n, dtype=np.int64)
        if n:
            changes = np.nonzero(sorted_thread[1:] != sorted_thread[:-1])[0] + 1
            first_of_thread[changes] = changes
            first_of_thread = np.maximum.accumulate(first_of_thread)
        del sorted_thread
        parent_sorted = op_nesting.nest(first_of_thread, self.start[self.order], self.end[self.order])
        self.parent = np.full(n, -1, dtype=np.int64)
        self.parent[self.order] = np.where(parent_sorted >= 0, self.order[np.maximum(parent_sorted, 0)], -1)
        self.alive = np.ones(n, dtype=bool)
        self.top = self.rows
        self.kept_kernels = np.ones(n, dtype=bool)

    def owners(self, device: pl.DataFrame) -> Ints:
        """For each device row, the host event (row number) that owns it, -1 for none: the op or
        annotation its launch call's External id names when that one spans the call, else the
        innermost op or annotation around the call; without a call, the one its External id names."""
        host = self.host
        calls = (
            host.select("correlation", row=pl.int_range(pl.len(), dtype=pl.Int64))
            .filter(~pl.Series(self.frontend) & pl.col("correlation").is_not_null())
            .unique("correlation", keep="first", maintain_order=True)
        )
        nearest_frontend = op_nesting.resolve(self.parent, self.frontend)
        found = device.select(
            "cat", "correlation", "external_id", position=pl.int_range(pl.len(), dtype=pl.Int64)
        ).join(calls.rename({"row": "call"}), on="correlation", how="left", maintain_order="left")
        found = found.join(
            self.by_external.rename({"row": "named"}), on="external_id", how="left", maintain_order="left"
        )
        call = found["call"].fill_null(-1).to_numpy()
        named = found["named"].fill_null(-1).to_numpy()
        linked = _at(self.linked, call)
        through_call = np.where(linked >= 0, linked, _at(nearest_frontend, call))
        positive_external = (found["external_id"].fill_null(0) > 0).to_numpy()
        owner = np.where(call >= 0, through_call, np.where(positive_external, named, -1))
        annotation = (found["cat"] == GPU_ANNOTATION).fill_null(False).to_numpy()
        return np.where(annotation, -1, owner).astype(np.int64)

    def attach(self, owners: Ints, device: pl.DataFrame) -> None:
        """An op named like a kernel it launched is a launcher (inductor without `stream`)."""
        owned = owners >= 0
        if not owned.any():
            return
        owner_rows = owners[owned]
        names = self.host["name"]
        same = (device["name"].filter(pl.Series(owned)) == names.gather(pl.Series(owner_rows))).to_numpy()
        cpu_op = (self.host["cat"] == "cpu_op").to_numpy()[owner_rows]
        self.launcher[owner_rows[same & cpu_op]] = True

    def dedup(self) -> None:
        """The profiler's _remove_dup_nodes: an only child named like its parent is folded in.

        The parent keeps its name and takes the child's children, so whether a row folds can be
        read off the tree before any fold: same name as its parent, and the parent's only child.
        The parent takes the child's launched work in place of its own.
        """
        parent = self.parent
        has_parent = parent >= 0
        children = np.bincount(parent[has_parent], minlength=len(parent))
        codes = self.host["name"].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
        safe = np.maximum(parent, 0)
        dead = has_parent & (codes[safe] == codes) & (children[safe] == 1)
        self.alive = ~dead
        self.top = op_nesting.resolve(parent, self.alive)
        self.kept_kernels = np.bincount(parent[dead], minlength=len(parent)) == 0

    def frame(self, rank: int, owners: Ints, durations: Floats) -> tuple[pl.DataFrame, Ints]:
        """The kept rows in start order per thread, and each host row's `pos` (-1 if folded)."""
        kept = self.order[self.alive[self.order]]
        positions = np.full(len(self.rows), -1, dtype=np.int64)
        positions[kept] = np.arange(len(kept), dtype=np.int64)
        final_parent = np.where(self.parent >= 0, self.top[np.maximum(self.parent, 0)], -1)
        kept_parent = np.where(final_parent[kept] >= 0, positions[np.maximum(final_parent[kept], 0)], -1)
        work_owner = self._final_owner(owners)
        with_owner = work_owner >= 0
        work = np.bincount(
            positions[work_owner[with_owner]], weights=durations[with_owner], minlength=len(kept)
        ).astype(np.float64)
        launcher = self.launcher[kept]
        dur = self.host["dur"].to_numpy()[kept]
        cpu_total = dur
        has_parent = kept_parent >= 0
        children_cpu = np.bincount(kept_parent[has_parent], weights=cpu_total[has_parent], minlength=len(kept))
        depth = op_nesting.depths(kept_parent)
        host = self.host.select("index", "name", "cat", "ts", "dur")[kept]
        cat = pl.col("cat").cast(pl.Utf8)
        kind = (
            pl.when(pl.Series(launcher))
            .then(pl.lit(LAUNCHER_KIND))
            .otherwise(cat.replace_strict(KIND_BY_CAT, default=cat, return_dtype=pl.Utf8))
        )
        frame = host.select(
            rank=pl.lit(rank, dtype=pl.Int32),
            pos=pl.int_range(pl.len(), dtype=pl.Int64),
            parent=pl.Series(kept_parent).replace(-1, None),
            depth=pl.Series(depth),
            index="index",
            name="name",
            kind=kind,
            ts="ts",
            dur="dur",
            cpu_total_us=pl.Series(cpu_total),
            cpu_self_us=pl.Series(cpu_total - children_cpu),
            gpu_self_us=pl.Series(work),
            gpu_total_us=pl.Series(op_nesting.subtree_sums(work, kept_parent, depth)),
        )
        return frame.select([pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()]), positions

    def _final_owner(self, owners: Ints) -> Ints:
        """Each device row's owner after the dedup: the kept row its owner folded into, or -1
        when its owner's work was replaced by a folded child's."""
        kept = _at(self.kept_kernels.astype(np.int64), owners) == 1
        return np.where(kept, _at(self.top, owners), -1)

    def work_frame(self, rank: int, device: pl.DataFrame, owners: Ints, positions: Ints) -> pl.DataFrame:
        # A device row whose owner was folded into its parent by the dedup belongs to that parent.
        final = self._final_owner(owners)
        owner_pos = _at(positions, final)
        frame = device.select(
            rank=pl.lit(rank, dtype=pl.Int32),
            index="index",
            name="name",
            kind=pl.col("cat").replace_strict(KIND_BY_CAT, default=pl.col("cat"), return_dtype=pl.Utf8),
            dur="dur",
            bytes="bytes",
            owner=pl.Series(owner_pos, dtype=pl.Int64).replace(-1, None),
        )
        return frame.select([pl.col(c).cast(t) for c, t in WORK_SCHEMA.items()])
