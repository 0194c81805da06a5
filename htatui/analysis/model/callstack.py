"""Call stacks of the host threads: who nests inside whom, and which GPU work each call launched.

Shared by the `patterns` and `ops` views (docs/semantics-patterns-ops-export.md, call stacks). Nesting is rebuilt per
(rank, pid, tid) thread from the host `X` events' start and end times. Events on one thread
nest perfectly in a well-formed trace; the tie rules are HTA's: at equal times an event that
ends comes before one that starts (they are siblings), among events that start together the
longer one is the parent (equal length: the earlier in the file), and a zero-length event
sits inside the event that is open at its time, including one that ends exactly then. A
zero-length event at the same time as another zero-length event nests inside it (HTA's
order). An event that starts inside another but ends after it (ns artefacts) is treated as its
child.

The nesting itself is one tight loop over the host events, in start order (parents before
children); everything else is polars.

HTA-compatible mode rebuilds the nesting exactly as HTA 0.6.1 does: its endpoint sort (numpy's
quicksort by time, then Python's sort with HTA's comparison, which is not a total order around
zero-length events) and a stack that pops its top at every end, whichever event ends. Where a
zero-length event is mis-sorted this leaves an event "open" too long and nests later events
under it (see docs/semantics-patterns-ops-export.md). Threads on which HTA's sort raises are nested the
corrected way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.model import op_nesting
from htatui.analysis.model.op_nesting import Ints
from htatui.trace.kineto import GPU_ACTIVITY_CATS

DEVICE_SIDE_CATS = (
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_sync",
    "gpu_user_annotation",
    "mtia_ccp_events",
    "cuda_profiler_range",
    "Trace",
)
"""Categories that live on device rows (or the profiler's own span), never on a host thread."""

BACKWARD_ANNOTATION = "## backward ##"

STACK_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "thread": pl.Int64(),
    "pid": pl.Categorical(),
    "tid": pl.Categorical(),
    "cat": pl.Categorical(),
    "name": pl.Categorical(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
    "end": pl.Float64(),
    "correlation": pl.Int64(),
    "pos": pl.Int64(),
    "last": pl.Int64(),
    "parent": pl.Int64(),
    "local_depth": pl.Int64(),
    "top": pl.Int64(),
    "depth": pl.Int64(),
    "link": pl.Int64(),
}
"""One row per host event, in start order (`pos` = row number). `last` is the `pos` of the
event's last descendant on its thread (its subtree is `pos..last`); `parent` and `top` are the
`pos` of the direct parent and of the outermost ancestor on the thread (null / itself for
outermost events); `local_depth` counts ancestors on the thread; `depth` adds, for a backward
thread linked to the main thread, the depth of the annotation it hangs under + 1 (`link` is
that annotation's `pos`, set on the backward thread's outermost events only)."""

LINK_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "name": pl.Categorical(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
    "host_pos": pl.Int64(),
}
"""Device rows linked to the host call that launched them (`host_pos` = that call's `pos`)."""


def host_rows(events: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """The events that belong on host call stacks.

    Default: every `X` event whose category is not a device-side one. Compat (HTA's CallGraph):
    rows without a stream (HTA's `stream == -1`), on threads HTA does not take for GPU streams
    (a thread is a GPU stream when all its rows have a stream > 0, or its pid or tid is 0).
    """
    x = events.filter(pl.col("ph") == "X") if "ph" in events.columns else events
    cat = pl.col("cat").cast(pl.Utf8)
    if not hta_compat:
        return x.filter(~cat.is_in(DEVICE_SIDE_CATS).fill_null(False) & pl.col("ts").is_not_null())
    thread = ["rank", "pid", "tid"]
    x = x.filter(cat.fill_null("") != hta.TRACE_SPAN_CAT)
    gpu_threads = (
        x.group_by(thread)
        .agg(
            all_streams=(pl.col("stream").fill_null(-1) > 0).all(),
            pid0=(pl.col("pid").cast(pl.Utf8) == "0").all(),
            tid0=(pl.col("tid").cast(pl.Utf8) == "0").all(),
        )
        .filter(pl.col("all_streams") | pl.col("pid0") | pl.col("tid0"))
        .select(thread)
    )
    return x.filter(pl.col("stream").is_null() & pl.col("ts").is_not_null()).join(gpu_threads, on=thread, how="anti")


def _sort_codes(column: pl.Series) -> Ints:
    """Each value's place among the column's distinct values in polars' sort order (nulls first),
    so sorting rows by it orders them as `DataFrame.sort` on the column does."""
    distinct = column.unique().sort()
    places = pl.DataFrame({"value": distinct, "place": np.arange(len(distinct), dtype=np.int64)})
    found = column.to_frame("value").join(places, on="value", how="left", nulls_equal=True, maintain_order="left")
    return found["place"].to_numpy()


def _nest(
    thread: Sequence[int] | npt.NDArray[Any],
    ts: Sequence[float] | npt.NDArray[Any],
    end: Sequence[float] | npt.NDArray[Any],
) -> tuple[Ints, Ints, Ints, Ints]:
    """Parent, depth, last descendant and outermost ancestor of each event (all as positions).

    Events come sorted by (thread, ts, dur descending, index); `end` is never before `ts`.
    An event's parent is the latest earlier event of its thread still running at its start
    (ending after it; for a zero-length event, ending at or after it): a stack that closes
    what ended before each new start keeps exactly those. Events nest in pre-order, so an
    event's subtree runs up to the next event no deeper than it.
    """
    threads = np.asarray(thread, dtype=np.int64)
    starts = np.asarray(ts, dtype=np.float64)
    ends = np.asarray(end, dtype=np.float64)
    n = len(starts)
    first = np.zeros(n, dtype=np.int64)
    if n:
        changes = np.nonzero(threads[1:] != threads[:-1])[0] + 1
        first[changes] = changes
        first = np.maximum.accumulate(first)
    parent = op_nesting.previous_reaching(first, ends, starts, ends > starts)
    depth = op_nesting.depths(parent)
    last = op_nesting.next_not_above(depth) - 1
    top = op_nesting.resolve(parent, parent < 0)
    return parent, depth, last, top


class _HtaEndpoint:
    """One start (kind −1) or end (kind 1) of an event, ordered by HTA 0.6.1's comparison rules
    (§A18). Those rules are not a total order when zero-length events meet other events' ends
    and starts; HTA relies on Python's sort anyway, and so does compat mode, on the same input
    order, to get HTA's exact nesting."""

    __slots__ = ("index", "dur", "kind", "time")

    def __init__(self, index: int, dur: float, kind: int, time: float) -> None:
        self.index = index
        self.dur = dur
        self.kind = kind
        self.time = time

    def __lt__(self, other: _HtaEndpoint) -> bool:
        if self.time != other.time:
            return self.time < other.time
        if self.index == other.index:
            return self.kind == -1
        if self.dur == 0 or other.dur == 0:
            if self.dur == 0 and other.dur > 0:
                return other.kind == 1
            if self.dur > 0 and other.dur == 0:
                return self.kind == -1
            if self.dur == 0 and other.dur == 0:
                if self.kind == other.kind:
                    return self.index < other.index if self.kind == -1 else self.index > other.index
                return self.kind == -1
            raise _HtaSortError  # a zero-length event meets a negative one: HTA raises here
        if self.kind != other.kind:
            return self.kind == 1
        if self.dur != other.dur:
            return self.dur > other.dur if self.kind == -1 else self.dur < other.dur
        return self.index < other.index if self.kind == -1 else self.index > other.index


class _HtaSortError(Exception):
    """HTA's call-stack sort fails on this thread (ValueError or its 'not sorted' check)."""


def _time_order(times: list[float]) -> list[int]:
    """pandas' sort_values order (numpy's unstable quicksort) of the endpoint times."""
    import numpy as np

    integral = all(float(t).is_integer() for t in times)
    values = np.array(times, dtype=np.int64 if integral else np.float64)
    return [int(i) for i in np.argsort(values, kind="quicksort")]


def _hta_walk(index: list[int], ts: list[float], dur: list[float]) -> list[tuple[int, int]]:
    """HTA's walk over one thread (rows in file order): its endpoint sort, then a stack that
    pushes at every start and pops the top at every end, whichever event ends. Returns the
    (row, +1 start / −1 end) sequence; raises _HtaSortError where HTA itself fails."""
    n = len(ts)
    times = [*ts, *(t + d for t, d in zip(ts, dur, strict=True))]
    endpoints = [_HtaEndpoint(index[i % n], dur[i % n], -1 if i < n else 1, times[i]) for i in _time_order(times)]
    by_index = {index[r]: r for r in range(n)}
    ordered = sorted(endpoints)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if not a < b:
            raise _HtaSortError
    return [(by_index[e.index], 1 if e.kind == -1 else -1) for e in ordered]


def _nest_hta(
    thread: list[int], index: list[int], ts: list[float], dur: list[float]
) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """Compat nesting: (order, parent, depth, last, top) where `order` lists the rows (sorted by
    thread then file order) in HTA's start order and the other lists are by new position.
    A thread on which HTA's sort would fail is nested the corrected way instead."""
    n = len(ts)
    order: list[int] = []
    parent: list[int] = []
    depth: list[int] = []
    last: list[int] = []
    top: list[int] = []
    start = 0
    while start < n:
        stop = start
        while stop < n and thread[stop] == thread[start]:
            stop += 1
        try:
            walk = _hta_walk(index[start:stop], ts[start:stop], dur[start:stop])
        except _HtaSortError:
            walk = _corrected_walk(ts[start:stop], dur[start:stop], index[start:stop])
        stack: list[int] = []
        for row, step in walk:
            if step == 1:
                pos = len(order)
                order.append(start + row)
                parent.append(stack[-1] if stack else -1)
                depth.append(len(stack))
                top.append(stack[0] if stack else pos)
                last.append(pos)
                stack.append(pos)
            elif stack:
                last[stack.pop()] = len(order) - 1
        for pos in stack:
            last[pos] = len(order) - 1
        start = stop
    return order, parent, depth, last, top


def _corrected_walk(ts: list[float], dur: list[float], index: list[int]) -> list[tuple[int, int]]:
    """The default nesting of one thread as a start/end walk (for threads HTA cannot sort)."""
    rows = sorted(range(len(ts)), key=lambda r: (ts[r], -dur[r], index[r]))
    ends = [max(ts[r] + dur[r], ts[r]) for r in rows]
    last = _nest([0] * len(rows), [ts[r] for r in rows], ends)[2]
    walk: list[tuple[int, int]] = []
    closing: list[int] = []
    for pos, row in enumerate(rows):
        while closing and last[closing[-1]] < pos:
            walk.append((rows[closing.pop()], -1))
        walk.append((row, 1))
        closing.append(pos)
    walk.extend((rows[p], -1) for p in reversed(closing))
    return walk


def build(events: pl.DataFrame, hta_compat: bool = False, link_backward: bool = False) -> pl.DataFrame:
    """The call stacks of every host thread in `events` (any number of ranks): `STACK_SCHEMA`.

    With `link_backward`, a backward (autograd) thread's outermost events that lie inside a
    "## backward ##" annotation of the main thread (else inside a ProfilerStep) hang under that
    annotation, as HTA's CallGraph does; `depth` then counts from the main thread's top.
    """
    host = host_rows(events, hta_compat)
    if host.height == 0:
        return pl.DataFrame(schema=STACK_SCHEMA)
    prepared = host.select(
        "rank", "index", "pid", "tid", "cat", "name", "ts", "dur", "correlation", end=pl.col("end")
    ).with_columns(
        dur=pl.col("dur").fill_null(0.0),
        # Nesting uses a non-negative extent (HTA's ns rounding can leave end = ts − 1).
        end=pl.max_horizontal(pl.col("end").fill_null(pl.col("ts")), pl.col("ts")),
    )
    if hta_compat:
        # HTA's own endpoint sort and stack walk, per thread, from the rows in file order.
        by_file = prepared.sort(["rank", "pid", "tid", "index"]).with_columns(
            thread=pl.struct("rank", "pid", "tid").rle_id().cast(pl.Int64)
        )
        hta_order, *walked = _nest_hta(
            by_file["thread"].to_list(),
            by_file["index"].to_list(),
            by_file["ts"].to_list(),
            by_file["dur"].to_list(),
        )
        ordered = by_file[hta_order]
        parent, depth, last, top = (np.asarray(part, dtype=np.int64) for part in walked)
    else:
        # One numpy sort on integer keys: pid and tid by their place in polars' own order.
        rank = prepared["rank"].to_numpy()
        pid, tid = _sort_codes(prepared["pid"]), _sort_codes(prepared["tid"])
        columns = (prepared["index"].to_numpy(), -prepared["dur"].to_numpy(), prepared["ts"].to_numpy())
        order = np.lexsort((*columns, tid, pid, rank))
        keys = np.stack([rank[order], pid[order], tid[order]])
        changed = np.zeros(len(order), dtype=np.int64)
        changed[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
        ordered = prepared[order].with_columns(thread=pl.Series(np.cumsum(changed), dtype=pl.Int64))
        del rank, pid, tid, columns, order, keys, changed
        del host, prepared  # the sorted copy is what is nested: the unsorted rows go before it is
        parent, depth, last, top = _nest(
            ordered["thread"].to_numpy(), ordered["ts"].to_numpy(), ordered["end"].to_numpy()
        )
    stack = ordered.with_columns(
        pos=pl.int_range(pl.len(), dtype=pl.Int64),
        last=pl.Series(last, dtype=pl.Int64),
        parent=pl.Series(parent, dtype=pl.Int64),
        local_depth=pl.Series(depth, dtype=pl.Int64),
        top=pl.Series(top, dtype=pl.Int64),
    ).with_columns(
        parent=pl.when(pl.col("parent") >= 0).then(pl.col("parent")),
        depth=pl.col("local_depth"),
        link=pl.lit(None, dtype=pl.Int64),
    )
    if link_backward:
        stack = _link_backward(stack)
    return stack.select([pl.col(name).cast(dtype) for name, dtype in STACK_SCHEMA.items()])


def _link_backward(stack: pl.DataFrame) -> pl.DataFrame:
    """HTA's `_connect_stacks`: when a rank has exactly one main thread (it has ProfilerStep#
    events) and one backward thread (it has autograd:: events), the backward thread's outermost
    events inside a main-thread "## backward ##" annotation (or ProfilerStep# when the main
    thread has none) become that annotation's children."""
    # The text tests run on the distinct names; rows are matched by category.
    distinct = stack["name"].unique().cast(pl.Utf8)

    def named(test: pl.Series) -> pl.Expr:
        return pl.col("name").is_in(distinct.filter(test).implode())

    is_step = named(distinct.str.starts_with("ProfilerStep#"))
    is_backward = named(distinct.str.starts_with(BACKWARD_ANNOTATION))
    labels = (
        stack.group_by("rank", "thread")
        .agg(main=is_step.any(), bwd=named(distinct.str.contains("autograd::", literal=True)).any())
        .with_columns(label=pl.when(pl.col("main")).then(pl.lit("main")).when(pl.col("bwd")).then(pl.lit("bwd")))
    )
    links: list[pl.DataFrame] = []
    for _, per_rank in labels.drop_nulls("label").group_by(["rank"]):
        if per_rank.height != 2 or set(per_rank["label"].to_list()) != {"main", "bwd"}:
            continue
        main_thread = per_rank.filter(pl.col("label") == "main")["thread"][0]
        bwd_thread = per_rank.filter(pl.col("label") == "bwd")["thread"][0]
        main = stack.filter(pl.col("thread") == main_thread)
        annotations = main.filter(is_backward)
        if annotations.height == 0:
            annotations = main.filter(is_step)
        if annotations.height == 0:
            continue
        outermost = stack.filter((pl.col("thread") == bwd_thread) & pl.col("parent").is_null())
        # Each outermost backward event goes under the first annotation (file order) holding it.
        # An inequality join, not a cross join filtered: on a 450-step trace the cross product of
        # outermost backward events and annotations was 2.2 GB; the holding pairs are few.
        pairs = (
            outermost.select("pos", "ts", "end")
            .join_where(
                annotations.select(a_pos="pos", a_index="index", a_ts="ts", a_end="end", a_depth="local_depth"),
                pl.col("ts") >= pl.col("a_ts"),
                pl.col("end") <= pl.col("a_end"),
            )
            .sort("pos", "a_index")
            .group_by("pos", maintain_order=True)
            .first()
        )
        links.append(pairs.select("pos", link="a_pos", offset=pl.col("a_depth") + 1))
    if not links:
        return stack
    linked = pl.concat(links, how="vertical")
    stack = stack.join(linked.select(top="pos", top_offset="offset"), on="top", how="left", maintain_order="left")
    stack = stack.join(linked.select("pos", new_link="link"), on="pos", how="left", maintain_order="left")
    return stack.with_columns(
        depth=pl.col("local_depth") + pl.col("top_offset").fill_null(0),
        link=pl.col("new_link"),
    ).drop("top_offset", "new_link")


def ancestor_at_depth(stack: pl.DataFrame, depth: int) -> pl.Series:
    """For every row of `stack`, the `pos` of its ancestor-or-self whose `depth` equals `depth`
    (null when the row is shallower). Follows backward-thread links onto the main thread."""
    if stack.height == 0:
        return pl.Series("anc", [], dtype=pl.Int64)
    # In start order the ancestor at depth d is the latest event at depth d before the row,
    # unless an event shallower than d came in between (then the row is not below depth d).
    marker = (
        pl.when(pl.col("depth") == depth)
        .then(pl.col("pos"))
        .when(pl.col("depth") < depth)
        .then(pl.lit(-1, dtype=pl.Int64))
    )
    frame = stack.select(
        "pos",
        "thread",
        "depth",
        "top",
        "link",
        anc=marker.forward_fill().over("thread"),
    ).with_columns(anc=pl.when((pl.col("depth") >= depth) & (pl.col("anc") >= 0)).then(pl.col("anc")))
    if stack["link"].is_not_null().any():
        # A linked backward subtree whose top is deeper than d hangs below the main-thread
        # ancestor at depth d of its annotation.
        tops = frame.filter(pl.col("link").is_not_null() & (pl.col("depth") > depth)).select("pos", "link")
        if tops.height:
            via = tops.join(frame.select(link="pos", via="anc"), on="link", how="left").select(top="pos", via="via")
            frame = frame.join(via, on="top", how="left", maintain_order="left").with_columns(
                anc=pl.when(pl.col("via").is_not_null() | pl.col("top").is_in(tops["pos"].implode()))
                .then(pl.col("via"))
                .otherwise(pl.col("anc"))
            )
    return frame["anc"].alias("anc")


def device_links(events: pl.DataFrame, stack: pl.DataFrame, hta_compat: bool = False) -> pl.DataFrame:
    """Device rows launched by a host call of `stack` (matched on rank + correlation id).

    Default: kernels, copies, memsets (and MTIA device events) on any stream. Compat (HTA's
    `get_cpu_gpu_correlation`): any row with a stream > 0, syncs included.
    """
    x = events.filter(pl.col("ph") == "X") if "ph" in events.columns else events
    if hta_compat:
        device = x.filter(hta.linked_device_row())
    else:
        device = x.filter(pl.col("cat").is_in(GPU_ACTIVITY_CATS))
    device = device.filter(pl.col("correlation").is_not_null())
    # Each correlation's first call in file order; no sort of the whole stack needed.
    calls = (
        stack.filter(pl.col("correlation").is_not_null())
        .group_by("rank", "correlation")
        .agg(host_pos=pl.col("pos").get(pl.col("index").arg_min()))
    )
    if device.height == 0 or calls.height == 0:
        return pl.DataFrame(schema=LINK_SCHEMA)
    linked = device.select("rank", "index", "name", "ts", "dur", "correlation").join(
        calls, on=["rank", "correlation"], how="inner", maintain_order="left"
    )
    return linked.select([pl.col(name).cast(dtype) for name, dtype in LINK_SCHEMA.items()])


def subtree_sum(stack: pl.DataFrame, per_pos: pl.DataFrame, value: str) -> pl.Series:
    """For every row of `stack`, Σ `value` of `per_pos` rows (keyed by `pos`) in its subtree
    on its own thread (the row itself included)."""
    amounts = (
        stack.select("pos")
        .join(per_pos.group_by("pos").agg(pl.col(value).sum()), on="pos", how="left", maintain_order="left")
        .select(pl.col(value).fill_null(0.0).cast(pl.Float64))
        .to_series()
    )
    prefix = pl.concat([pl.Series([0.0]), amounts.cum_sum()])
    hi = prefix.gather(stack["last"] + 1)
    lo = prefix.gather(stack["pos"])
    return (hi - lo).alias(value)


def nearest_ancestor(stack: pl.DataFrame, mask: pl.Series) -> pl.Series:
    """For every row of `stack`, the `pos` of its closest strict ancestor on its own thread for
    which `mask` is true (null when there is none)."""
    parent = stack["parent"].fill_null(-1).to_list()
    flags = mask.fill_null(False).to_list()
    nearest = [-1] * len(parent)
    for i, p in enumerate(parent):
        if p >= 0:
            nearest[i] = p if flags[p] else nearest[p]
    out = pl.Series("nearest", nearest, dtype=pl.Int64)
    return pl.select(pl.when(out >= 0).then(out)).to_series().alias("nearest")
