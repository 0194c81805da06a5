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
  launched a kernel of its own name) keeps its kernels but gets no CPU time of its own: its
  time stays in its parent's self time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import polars as pl

from htatui.analysis.callstack import DEVICE_SIDE_CATS
from htatui.analysis.launch import DEVICE_WORK_CATS

FRONTEND_CATS = ("cpu_op", "user_annotation")
"""Events a launch is attributed to (the profiler's 'frontend' events: ops and annotations)."""

SKIPPED_HOST_CATS = ("python_function", "Trace")
"""Host X events the profiler does not list in key_averages (Python tracer frames, its span)."""

KIND_BY_CAT = {
    "cpu_op": "op",
    "user_annotation": "annotation",
    "cuda_runtime": "runtime",
    "cuda_driver": "driver",
    "mtia_runtime": "runtime",
    "xpu_runtime": "runtime",
    "privateuse1_runtime": "runtime",
    "privateuse1_driver": "driver",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "mtia_ccp_events": "kernel",
    "gpu_user_annotation": "gpu-annotation",
}
"""The `kind` column: what sort of profiler row an event category gives."""

LAUNCHER_KIND = "kernel-launcher"
MEMORY_KIND = "memory"
MEMORY_EVENT = "[memory]"
HOST_KINDS = ("op", "annotation", "runtime", "driver", LAUNCHER_KIND, MEMORY_KIND)
DEVICE_KINDS = ("kernel", "memcpy", "memset", "gpu-annotation")

EVENT_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "pos": pl.Int64(),
    "parent": pl.Int64(),
    "depth": pl.Int64(),
    "index": pl.Int64(),
    "name": pl.Utf8(),
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
the trace file."""

WORK_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "name": pl.Utf8(),
    "kind": pl.Utf8(),
    "dur": pl.Float64(),
    "bytes": pl.Int64(),
    "owner": pl.Int64(),
}
"""Device rows (work and GPU annotations) with the `pos` of the host event that owns them
(null when none does, or for GPU annotations); `bytes` moved or set by copies and memsets."""


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


def build(events: pl.DataFrame) -> OpEvents:
    """The tree of `events` (any number of ranks; the loader's columns; X events, and `[memory]`
    instants for the loose-memory count)."""
    parts = [_build_rank(frame) for _, frame in events.group_by("rank", maintain_order=True)]
    if not parts:
        return OpEvents(pl.DataFrame(schema=EVENT_SCHEMA), pl.DataFrame(schema=WORK_SCHEMA))
    return OpEvents(
        pl.concat([p.events for p in parts], how="vertical"),
        pl.concat([p.work for p in parts], how="vertical"),
        pl.concat([p.loose_memory for p in parts], how="vertical"),
    )


def _ns(column: str) -> pl.Expr:
    # Trace times are µs with ns decimals; whole ns make equal ends compare equal.
    return (pl.col(column) * 1000.0).round(0).cast(pl.Int64)


def _build_rank(events: pl.DataFrame) -> OpEvents:
    rank = int(events["rank"][0])
    cat = pl.col("cat").cast(pl.Utf8)
    x = events.filter(pl.col("ph") == "X") if "ph" in events.columns else events
    host = x.filter(
        ~cat.is_in([*DEVICE_SIDE_CATS, *SKIPPED_HOST_CATS]).fill_null(False) & pl.col("ts").is_not_null()
    ).select(
        "index",
        thread=pl.concat_str(
            pl.col("pid").cast(pl.Utf8).fill_null(""), pl.col("tid").cast(pl.Utf8).fill_null(""), separator="/"
        ),
        cat=cat.fill_null(""),
        name=display_name(pl.col("name").cast(pl.Utf8).fill_null("")),
        ts=pl.col("ts"),
        dur=pl.col("dur").fill_null(0.0).clip(lower_bound=0.0),
        start_ns=_ns("ts"),
        dur_ns=(pl.col("dur").fill_null(0.0).clip(lower_bound=0.0) * 1000.0).round(0).cast(pl.Int64),
        correlation=pl.col("correlation"),
        external_id=pl.col("external_id"),
        launcher=(cat == "cpu_op") & pl.col("stream").is_not_null(),
    )
    device = x.filter(cat.is_in([*DEVICE_WORK_CATS, "gpu_user_annotation"]).fill_null(False)).select(
        "index",
        cat=cat,
        name=display_name(pl.col("name").cast(pl.Utf8).fill_null("")),
        dur=pl.col("dur").fill_null(0.0).clip(lower_bound=0.0),
        correlation=pl.col("correlation"),
        external_id=pl.col("external_id"),
        bytes=pl.col("bytes"),
    )
    tree = _Tree(host)
    tree.move_linked_calls()
    tree.nest()
    owners = tree.owners(device)
    tree.attach(owners, device["dur"].to_list(), device["name"].to_list())
    tree.dedup()
    loose = _loose_memory(events, tree)
    memory = pl.DataFrame({"rank": [rank], "count": [loose]}, schema=MEMORY_SCHEMA)
    return OpEvents(tree.frame(rank), tree.work_frame(rank, device, owners), memory.filter(pl.col("count") > 0))


def _loose_memory(events: pl.DataFrame, tree: _Tree) -> int:
    """How many `[memory]` instants fall outside every host event (ends included), any thread:
    the profiler attaches an allocation to whatever CPU event spans its time."""
    if "ph" not in events.columns:
        return 0
    instants = events.filter((pl.col("ph") == "i") & (pl.col("name").cast(pl.Utf8) == MEMORY_EVENT))
    if instants.height == 0:
        return 0
    spans = sorted(zip(tree.start, tree.end, strict=True))
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    starts = [m[0] for m in merged]
    loose = 0
    for t in instants.select(_ns("ts"))["ts"].drop_nulls().to_list():
        k = bisect.bisect_right(starts, t) - 1
        if k < 0 or t > merged[k][1]:
            loose += 1
    return loose


class _Tree:
    """One rank's host events as parallel lists (the nesting is a loop over them)."""

    def __init__(self, host: pl.DataFrame) -> None:
        self.index: list[int] = host["index"].to_list()
        self.thread: list[str] = host["thread"].to_list()
        self.cat: list[str] = host["cat"].to_list()
        self.name: list[str] = host["name"].to_list()
        self.ts: list[float] = host["ts"].to_list()
        self.dur: list[float] = host["dur"].to_list()
        self.start: list[int] = host["start_ns"].to_list()
        self.end: list[int] = [s + d for s, d in zip(self.start, host["dur_ns"].to_list(), strict=True)]
        self.correlation: list[int | None] = host["correlation"].to_list()
        self.external: list[int | None] = host["external_id"].to_list()
        self.launcher: list[bool] = host["launcher"].to_list()
        n = len(self.index)
        self.frontend = [c in FRONTEND_CATS for c in self.cat]
        self.by_external: dict[int, int] = {}
        for i in range(n):
            ext = self.external[i]
            if self.frontend[i] and ext is not None and ext > 0:
                self.by_external.setdefault(ext, i)
        self.parent: list[int] = [-1] * n
        self.children: list[list[int]] = [[] for _ in range(n)]
        self.kernels: list[list[int]] = [[] for _ in range(n)]
        self.alive = [True] * n
        self.order: list[int] = []
        self.durations: list[float] = []
        self.positions: dict[int, int] = {}

    def _spans(self, outer: int, inner: int) -> bool:
        return self.start[outer] <= self.start[inner] and self.end[inner] <= self.end[outer]

    def _linked_frontend(self, call: int) -> int:
        """The op or annotation that a call's External id names, when that one spans it."""
        ext = self.external[call]
        if ext is None or self.frontend[call]:
            return -1
        target = self.by_external.get(ext, -1)
        return target if target >= 0 and self._spans(target, call) else -1

    def move_linked_calls(self) -> None:
        for i in range(len(self.index)):
            target = self._linked_frontend(i)
            if target >= 0 and self.thread[target] != self.thread[i]:
                self.thread[i] = self.thread[target]

    def nest(self) -> None:
        n = len(self.index)
        self.order = sorted(range(n), key=lambda i: (self.thread[i], self.start[i], -self.end[i], self.index[i]))
        open_events: list[int] = []
        current: str | None = None
        for i in self.order:
            if self.thread[i] != current:
                open_events.clear()
                current = self.thread[i]
            while open_events:
                top = open_events[-1]
                if self.start[i] >= self.end[top] or self.end[i] > self.end[top]:
                    open_events.pop()
                    continue
                self.parent[i] = top
                self.children[top].append(i)
                break
            open_events.append(i)

    def _innermost_frontend(self, call: int) -> int:
        p = call if self.frontend[call] else self.parent[call]
        while p >= 0 and not self.frontend[p]:
            p = self.parent[p]
        return p

    def owners(self, device: pl.DataFrame) -> list[int]:
        """For each device row, the host event (row number) that owns it, -1 for none."""
        by_correlation: dict[int, int] = {}
        for i in range(len(self.index)):
            corr = self.correlation[i]
            if corr is not None and not self.frontend[i]:
                by_correlation.setdefault(corr, i)
        owners: list[int] = []
        for cat, corr, ext in zip(
            device["cat"].to_list(), device["correlation"].to_list(), device["external_id"].to_list(), strict=True
        ):
            owner = -1
            if cat != "gpu_user_annotation":
                call = by_correlation.get(corr, -1) if corr is not None else -1
                if call >= 0:
                    owner = self._linked_frontend(call)
                    if owner < 0:
                        owner = self._innermost_frontend(call)
                elif ext is not None and ext > 0:
                    owner = self.by_external.get(ext, -1)
            owners.append(owner)
        return owners

    def attach(self, owners: list[int], durations: list[float], names: list[str]) -> None:
        for k, owner in enumerate(owners):
            if owner >= 0:
                self.kernels[owner].append(k)
                # An op named like the kernel it launched is a launcher (inductor without `stream`).
                if self.cat[owner] == "cpu_op" and names[k] == self.name[owner]:
                    self.launcher[owner] = True
        self.durations = durations

    def dedup(self) -> None:
        """The profiler's _remove_dup_nodes: an only child named like its parent is folded in."""
        changed = True
        while changed:
            changed = False
            for i in self.order:
                p = self.parent[i]
                if not self.alive[i] or p < 0 or self.name[p] != self.name[i] or len(self.children[p]) != 1:
                    continue
                self.children[p] = self.children[i]
                self.kernels[p] = self.kernels[i]
                for child in self.children[i]:
                    self.parent[child] = p
                self.alive[i] = False
                changed = True

    def frame(self, rank: int) -> pl.DataFrame:
        kept = [i for i in self.order if self.alive[i]]
        pos = {i: k for k, i in enumerate(kept)}
        work = [sum(self.durations[k] for k in self.kernels[i]) for i in range(len(self.index))]
        cpu_total = [0.0 if self.launcher[i] else self.dur[i] for i in range(len(self.index))]
        gpu_total = list(work)
        for i in reversed(kept):  # children come after their parent in start order
            for child in self.children[i]:
                gpu_total[i] += gpu_total[child]
        depth = [0] * len(self.index)
        for i in kept:
            if self.parent[i] >= 0:
                depth[i] = depth[self.parent[i]] + 1
        rows = {
            "rank": [rank] * len(kept),
            "pos": list(range(len(kept))),
            "parent": [pos[self.parent[i]] if self.parent[i] >= 0 else None for i in kept],
            "depth": [depth[i] for i in kept],
            "index": [self.index[i] for i in kept],
            "name": [self.name[i] for i in kept],
            "kind": [LAUNCHER_KIND if self.launcher[i] else KIND_BY_CAT.get(self.cat[i], self.cat[i]) for i in kept],
            "ts": [self.ts[i] for i in kept],
            "dur": [self.dur[i] for i in kept],
            "cpu_total_us": [cpu_total[i] for i in kept],
            "cpu_self_us": [
                0.0 if self.launcher[i] else cpu_total[i] - sum(cpu_total[c] for c in self.children[i]) for i in kept
            ],
            "gpu_self_us": [work[i] for i in kept],
            "gpu_total_us": [gpu_total[i] for i in kept],
        }
        self.positions = pos
        return pl.DataFrame(rows, schema=EVENT_SCHEMA)

    def work_frame(self, rank: int, device: pl.DataFrame, owners: list[int]) -> pl.DataFrame:
        # A device row whose owner was folded into its parent by the dedup belongs to that parent.
        final: dict[int, int] = {}
        for i, kernels in enumerate(self.kernels):
            if self.alive[i]:
                for k in kernels:
                    final[k] = self.positions[i]
        cats = device["cat"].to_list()
        return pl.DataFrame(
            {
                "rank": [rank] * device.height,
                "index": device["index"].to_list(),
                "name": device["name"].to_list(),
                "kind": [KIND_BY_CAT.get(c, c) for c in cats],
                "dur": device["dur"].to_list(),
                "bytes": device["bytes"].to_list(),
                "owner": [final.get(k) for k in range(device.height)],
            },
            schema=WORK_SCHEMA,
        )
