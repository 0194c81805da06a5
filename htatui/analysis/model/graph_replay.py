"""Graph replays given their ops back from the capture trace.

A CUDA/HIP graph launch (cudaGraphLaunch, hipGraphLaunch) replays hundreds of kernels that all
carry the launch's correlation id: the trace says which graph ran, not which op launched each
kernel. A serving engine captures its graphs once (`capture_32_DECODE`, vLLM's capture pass);
profiled then (TraceLens's `capture_traces/`), the host launches each kernel op by op between
`*StreamBeginCapture` and `*StreamEndCapture`, with its op, shapes and Python stack, and nothing
runs. A replayed graph whose kernels are the capture's launches, name for name (the ROCm launch
calls name their kernel), is paired with it kernel by kernel: the k-th replayed kernel of a name,
in GPU order, is the k-th launch of that name in the capture (TraceLens pairs them the same way).
Without kernel names in the capture (CUDA), the launches pair by position when the counts agree.

`replayed` gives each paired kernel its op (the innermost `cpu_op` around its capture launch), the
op's event in the capture file (for its shapes) and its call stack; `with_captured_ops` hangs
those ops in the op tree under the op that launched the graph, so the ops table, the op tree,
the performance model and the patterns see them (no host time: on replay they did not run).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.memo import memoised
from htatui.analysis.model import op_nesting
from htatui.analysis.model.op_events import EVENT_SCHEMA, OpEvents
from htatui.trace.kineto import GPU_ACTIVITY_CATS, GRAPH_LAUNCH_APIS, KERNEL_LAUNCH_APIS, MEMORY_LAUNCH_APIS
from htatui.trace.model import RankTrace, TraceSet

CAPTURE_INDEX_STEP = 1 << 40
"""A captured op's row in the op tree has index `(k + 1) · CAPTURE_INDEX_STEP + its index in the
k-th capture file`: no trace file has that many events, so it names one event of one capture."""

REPLAYED_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "graph": pl.Int64(),
    "op": pl.Utf8(),
    "op_index": pl.Int64(),
    "stack": pl.Utf8(),
    "capture": pl.Utf8(),
}
"""One row per replayed kernel (copy, memset) paired with a capture launch: the device row's
`index`, its graph launch's correlation (`graph`), the captured op and its index in the op tree
(`CAPTURE_INDEX_STEP`), the call stack (module calls and ops, outermost first, " > " between)
and the capture file's name."""


@dataclass(frozen=True)
class CaptureRegion:
    """One capture (Begin…End on one thread): per launch, in host order, the kernel it names (None
    on CUDA), its op, the op's index in the op tree and its call stack."""

    kernel: list[str | None]
    op: list[str | None]
    op_index: list[int | None]
    stack: list[str]
    capture: str


_BEGIN = ("cudaStreamBeginCapture", "cudaStreamBeginCaptureToGraph", "hipStreamBeginCapture")
_END = ("cudaStreamEndCapture", "hipStreamEndCapture")
_LAUNCHES = (*KERNEL_LAUNCH_APIS, *MEMORY_LAUNCH_APIS)
_FRAMES = ("cpu_op", "user_annotation", "python_function")


def captures_of(traces: TraceSet, rank: int) -> list[tuple[int, RankTrace]]:
    """The capture traces for `rank`, with their place in `traces.captures`: those of its rank,
    or every one when the job has one rank."""
    mine = [(k, c) for k, c in enumerate(traces.captures) if c.rank == rank]
    return mine or ([(k, c) for k, c in enumerate(traces.captures)] if len(traces.ranks) == 1 else [])


def graph_kernels(events: pl.DataFrame) -> pl.DataFrame:
    """index, name, ts, dur, graph: the device rows of a rank that a graph launch replayed, by start."""
    launches = events.filter(
        pl.col("name").cast(pl.Utf8).is_in(GRAPH_LAUNCH_APIS) & pl.col("correlation").is_not_null()
    )
    device = events.filter(
        pl.col("cat").is_in(GPU_ACTIVITY_CATS) & pl.col("correlation").is_in(launches["correlation"].implode())
    )
    return device.select("index", name=pl.col("name").cast(pl.Utf8), ts="ts", dur="dur", graph="correlation").sort("ts")


def replayed(traces: TraceSet, rank: int) -> pl.DataFrame:
    """The rank's graph-replayed kernels paired with a capture's launches (`REPLAYED_SCHEMA`)."""
    return memoised(traces, ("graph_replay.replayed", rank), lambda: _replayed(traces, rank))


def _replayed(traces: TraceSet, rank: int) -> pl.DataFrame:
    captures = captures_of(traces, rank)
    if not captures:
        return pl.DataFrame(schema=REPLAYED_SCHEMA)
    kernels = graph_kernels(traces.ranks[rank].events)
    if kernels.height == 0:
        return pl.DataFrame(schema=REPLAYED_SCHEMA)
    regions = [region for k, capture in captures for region in capture_regions(capture, k)]
    rows: list[dict[str, object]] = []
    for (graph,), launched in kernels.group_by(["graph"], maintain_order=True):
        names = launched["name"].to_list()
        for region in regions:
            pairs = _pair(names, region)
            if pairs is None:
                continue
            for index, at in zip(launched["index"].to_list(), pairs, strict=True):
                rows.append(
                    {
                        "rank": rank,
                        "index": index,
                        "graph": graph,
                        "op": region.op[at],
                        "op_index": region.op_index[at],
                        "stack": region.stack[at],
                        "capture": region.capture,
                    }
                )
            break
    return pl.DataFrame(rows, schema=REPLAYED_SCHEMA)


def _pair(names: list[str], region: CaptureRegion) -> list[int] | None:
    """For each replayed kernel (GPU order), its launch in the capture region, or None when the
    region is not this graph: by name and occurrence, else (no names) by position."""
    launched = region.kernel
    if len(launched) != len(names):
        return None
    if any(name is None for name in launched):
        return list(range(len(names)))
    if sorted(str(name) for name in launched) != sorted(names):
        return None
    queues: dict[str, list[int]] = defaultdict(list)
    for at, name in enumerate(launched):
        queues[str(name)].append(at)
    taken: dict[str, int] = defaultdict(int)
    pairs = []
    for name in names:
        pairs.append(queues[name][taken[name]])
        taken[name] += 1
    return pairs


def capture_regions(capture: RankTrace, k: int) -> list[CaptureRegion]:
    """Each capture (Begin…End on one thread) of a capture trace: its launches in host order with
    the kernel each names, its op, the op's index (`CAPTURE_INDEX_STEP`) and its call stack."""
    events = capture.events.filter(pl.col("ph") == "X")
    name = pl.col("name").cast(pl.Utf8)
    marks = events.filter(name.is_in([*_BEGIN, *_END])).select("pid", "tid", "ts", begin=name.is_in(_BEGIN)).sort("ts")
    frames = events.filter(pl.col("cat").is_in(_FRAMES)).select(
        "index", "pid", "tid", "ts", "dur", name=name, cat=pl.col("cat").cast(pl.Utf8)
    )
    launches = events.filter(name.is_in(_LAUNCHES) & pl.col("correlation").is_not_null()).select(
        "index", "pid", "tid", "ts", "dur", kernel=pl.col("launched_kernel").cast(pl.Utf8)
    )
    owners = _frames_around(frames, launches)
    regions = []
    open_at: dict[tuple[str, str], float] = {}
    for pid, tid, ts, begin in marks.select(
        pl.col("pid").cast(pl.Utf8), pl.col("tid").cast(pl.Utf8), "ts", "begin"
    ).iter_rows():
        if begin:
            open_at[(pid, tid)] = ts
            continue
        start = open_at.pop((pid, tid), None)
        if start is None:
            continue
        inside = (
            launches.with_row_index("_row")
            .filter(
                (pl.col("pid").cast(pl.Utf8) == pid)
                & (pl.col("tid").cast(pl.Utf8) == tid)
                & pl.col("ts").is_between(start, ts)
            )
            .sort("ts")
        )
        chosen = inside["_row"].to_list()
        regions.append(
            CaptureRegion(
                kernel=inside["kernel"].to_list(),
                op=[owners[row][0] for row in chosen],
                op_index=[
                    owners[row][1] + (k + 1) * CAPTURE_INDEX_STEP if owners[row][1] >= 0 else None for row in chosen
                ],
                stack=[owners[row][2] for row in chosen],
                capture=capture.path.name,
            )
        )
    return regions


def _frames_around(frames: pl.DataFrame, launches: pl.DataFrame) -> list[tuple[str | None, int, str]]:
    """Per launch: the innermost cpu_op around it (name, file index; None, -1 without one) and
    the stack of frames around it (module calls by instance, ops and annotations), outermost first."""
    both = pl.concat(
        [
            frames.select("pid", "tid", "ts", "dur", "index", "name", "cat"),
            launches.select("pid", "tid", "ts", "dur", "index", name=pl.lit(""), cat=pl.lit("launch")),
        ]
    )
    if both.height == 0:
        return []
    parent, _order = op_nesting.frame_parents(both)
    names = both["name"].to_list()
    cats = both["cat"].to_list()
    indexes = both["index"].to_list()
    out = []
    for row in range(frames.height, both.height):
        op: tuple[str | None, int] = (None, -1)
        stack: list[str] = []
        up = int(parent[row])
        while up >= 0:
            text = names[up].removeprefix("nn.Module: ")
            if cats[up] != "python_function" or names[up].startswith("nn.Module: "):
                stack.append(text)
            if op[0] is None and cats[up] == "cpu_op":
                op = (names[up], int(indexes[up]))
            up = int(parent[up])
        out.append((op[0], op[1], " > ".join(reversed(stack))))
    return out


def with_captured_ops(tree: OpEvents, paired: pl.DataFrame) -> OpEvents:
    """`tree` (one rank) with the captured ops of its replayed kernels: per graph launch and captured
    op, a row of kind "op" under the op that launched the graph (at the top when none did), with
    those kernels' GPU time as its own and no host time; the launching op keeps the rest."""
    if paired.height == 0 or tree.work.height == 0:
        return tree
    work = tree.work.join(
        paired.select("index", "graph", "op", "op_index"), on="index", how="left", maintain_order="left"
    )
    mine = work.filter(pl.col("op").is_not_null())
    if mine.height == 0:
        return tree
    events = tree.events
    n = events.height
    rank = int(tree.work["rank"][0])
    groups = (
        mine.group_by("owner", "graph", "op_index", "op", maintain_order=True)
        .agg(gpu=pl.col("dur").sum())
        .with_columns(pos=pl.int_range(n, n + pl.len(), dtype=pl.Int64))
    )
    owners = events.select(owner="pos", owner_depth="depth", owner_ts="ts")
    added = groups.join(owners, on="owner", how="left", maintain_order="left").select(
        rank=pl.lit(rank, dtype=pl.Int32),
        pos="pos",
        parent="owner",
        depth=(pl.col("owner_depth") + 1).fill_null(0),
        index="op_index",
        name=pl.col("op").cast(pl.Categorical),
        kind=pl.lit("op"),
        ts="owner_ts",
        dur=pl.lit(0.0),
        cpu_total_us=pl.lit(0.0),
        cpu_self_us=pl.lit(0.0),
        gpu_self_us="gpu",
        gpu_total_us="gpu",
    )
    moved = groups.group_by("owner").agg(pl.col("gpu").sum())
    kept = events.join(moved, left_on="pos", right_on="owner", how="left", maintain_order="left").with_columns(
        gpu_self_us=pl.col("gpu_self_us") - pl.col("gpu").fill_null(0.0)
    )
    new_owner = work.join(
        groups.select("owner", "graph", "op_index", new="pos"),
        on=["owner", "graph", "op_index"],
        how="left",
        maintain_order="left",
        nulls_equal=True,
    )
    work_out = tree.work.with_columns(owner=pl.coalesce(new_owner["new"], pl.col("owner")))
    all_events = pl.concat(
        [kept.select(list(EVENT_SCHEMA)), added.select([pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()])],
        how="vertical",
    )
    return OpEvents(all_events, work_out, tree.loose_memory)


def replay_notes(traces: TraceSet) -> list[str]:
    """What the job's graph replays mean for its ops, one line per situation: GPU rows from graph
    launches whose ops the trace does not hold (no capture), or how many a capture gave ops."""
    from htatui.analysis.core.ranges import format_ranges
    from htatui.analysis.core.rank_figures import trace_figures

    unpaired: dict[int, tuple[int, int]] = {}
    lines: list[str] = []
    for rank in traces.rank_ids:
        figures = trace_figures(traces.ranks[rank])
        if figures.graph_kernels == 0:
            continue
        captures = captures_of(traces, rank)
        if not captures:
            unpaired[rank] = (figures.graph_kernels, figures.graph_launches)
            continue
        paired = replayed(traces, rank).height
        names = ", ".join(sorted({capture.path.name for _k, capture in captures}))
        line = (
            f"rank {rank}: {paired:,} of {figures.graph_kernels:,} graph-replayed GPU rows got their ops "
            f"from the capture ({names})"
        )
        if paired < figures.graph_kernels:
            line += "; the others match no captured graph"
        lines.append(line)
    if unpaired:
        rows = sum(count for count, _ in unpaired.values())
        launches = sum(count for _, count in unpaired.values())
        ranks = format_ranges(sorted(unpaired), separator=",")
        lines.insert(
            0,
            f"rank{'s' if len(unpaired) > 1 else ''} {ranks}: {rows:,} GPU rows ran in {launches:,} CUDA/HIP graph "
            f"launch{'es' if launches != 1 else ''}; which op launched each is not in the trace: give the capture "
            "trace (--capture FILE, or a capture_traces/ folder beside the traces) to see them in ops, the op tree "
            "and the perf model",
        )
    return lines
