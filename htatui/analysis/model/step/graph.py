"""The step graph's parts: nodes (the start and end of every kept row, and a few virtual ones),
edges of every kind with their intrinsic weights, and how each node's binding edge is found.

A node's *binding* edge is the dependency that let it happen when it did: the in-edge whose
source, plus the edge's intrinsic weight (the least time it must take), is latest. The binding
edge weighs the whole measured time between its ends (the work, or the wait it explains, or the
latency after it); every other edge weighs its intrinsic weight. A replay of the graph (earliest
start given the dependencies) then reproduces the measured times, and a changed weight moves
only what depends on it. docs/semantics-critical-path.md has the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
import numpy.typing as npt
import polars as pl

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


class Kind(IntEnum):
    """What an edge stands for (`EDGE_NAMES` spells them in tables)."""

    OPERATOR = 0
    """Host time inside an op or runtime call, outside its children: the call's own work."""
    ANNOTATION = 1
    """Host time inside an annotation or Python function, outside its children: untraced host work."""
    IDLE = 2
    """Host time on a thread between its outermost events: the thread waited for something."""
    BLOCKING = 3
    """The wait inside a blocking call (a sync, a synchronous copy): explained by a SYNC edge when found."""
    KERNEL = 4
    """A kernel, copy or memset running (a collective's: its transfer)."""
    LAUNCH = 5
    """Launching call's start → its device work's start."""
    STREAM = 6
    """Previous device work's end → the next start on the same stream."""
    GPU_WAIT = 7
    """Another stream's work's end → a start that waited for it (cudaStreamWaitEvent)."""
    SYNC = 8
    """Device work's end → the end of the host call that waited for it."""
    FORK = 9
    """A host thread's node → the start of work it handed to another thread."""
    JOIN = 10
    """Another thread's event end → the node where a waiting thread went on."""
    START = 11
    """The window's start → a node nothing in the trace explains the time of."""
    COLLECTIVE_WAIT = 12
    """A collective's arrival → the last rank's arrival (one rank's graph: the wait for another rank)."""
    MEETING = 13
    """A rank's arrival at a collective → the call's meeting node (the job's graph)."""
    TRANSFER = 14
    """The last arrival (meeting or anchor) → a rank's completion: the transfer."""
    END = 15
    """The step's end node (or a lane's last node) → the window's end."""


EDGE_NAMES = (
    "operator",
    "annotation",
    "idle",
    "blocking",
    "kernel",
    "launch",
    "stream",
    "gpu_wait",
    "sync",
    "fork",
    "join",
    "step_start",
    "collective_wait",
    "meeting",
    "transfer",
    "step_end",
)

WORK_KINDS = (Kind.OPERATOR, Kind.ANNOTATION, Kind.KERNEL, Kind.TRANSFER)
"""Edges that weigh work even when they do not bind (their intrinsic weight is their span)."""

# Among in-edges that give the same time, the own lane's edge binds before a dependency's.
PRIORITY = np.array([0, 0, 3, 0, 0, 2, 1, 2, 2, 2, 2, 4, 1, 1, 0, 0], dtype=np.int64)

CPU_BOUND = "cpu_bound"
DATA_LOADING = "data_loading"
HOST_GAP = "host_gap"
UNEXPLAINED_WAIT = "unexplained_wait"
COLLECTIVE_WAIT = "collective_wait"
GPU_COMPUTE = "gpu_compute_bound"
GPU_COMMUNICATION = "gpu_communication_bound"
CPU_COMMUNICATION = "cpu_communication_bound"
LAUNCH_OVERHEAD = "gpu_kernel_launch_overhead"
KERNEL_OVERHEAD = "gpu_kernel_kernel_overhead"
BOUND_TYPES = (
    CPU_BOUND,
    DATA_LOADING,
    HOST_GAP,
    UNEXPLAINED_WAIT,
    COLLECTIVE_WAIT,
    GPU_COMPUTE,
    GPU_COMMUNICATION,
    CPU_COMMUNICATION,
    LAUNCH_OVERHEAD,
    KERNEL_OVERHEAD,
)
"""Every bound type of the step model (docs/semantics-critical-path.md)."""


@dataclass
class EdgeBuffer:
    """Edges as they are added, as numpy chunks: source and destination nodes, kind, the row they
    are charged to (−1: none) and the intrinsic weight (NaN: the span between the nodes)."""

    chunks: list[tuple[Ints, Ints, Ints, Ints, Floats]] = field(default_factory=list)

    def add(
        self, src: Ints, dst: Ints, kind: Kind | Ints, charged: Ints | int = -1, intrinsic: Floats | float = np.nan
    ) -> None:
        src = np.asarray(src, dtype=np.int64)
        n = len(src)
        if n == 0:
            return
        self.chunks.append(
            (
                src,
                np.asarray(dst, dtype=np.int64),
                np.broadcast_to(np.asarray(kind, dtype=np.int64), n).copy(),
                np.broadcast_to(np.asarray(charged, dtype=np.int64), n).copy(),
                np.broadcast_to(np.asarray(intrinsic, dtype=np.float64), n).copy(),
            )
        )

    def arrays(self) -> tuple[Ints, Ints, Ints, Ints, Floats]:
        if not self.chunks:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty, empty, np.zeros(0)
        return tuple(np.concatenate([c[i] for c in self.chunks]) for i in range(5))  # type: ignore[return-value]


@dataclass
class RankPart:
    """One rank's nodes and edges before the window's start and end are joined and weights set.

    Nodes 2·row and 2·row + 1 are each row's start and end; `extra` virtual nodes follow (their
    times in `extra_times`, anchors in `extra_anchor`: the earliest they can happen, −inf none).
    """

    rank: int
    rows: pl.DataFrame
    """The kept rows (rows.ROW_SCHEMA) plus `kind` (the device work's type) and `bound` columns."""
    times: Floats
    """Per row node (2 per row): its time, made monotone along each lane."""
    seq: Ints
    """Per row node: its place among nodes of equal time (a lane's order)."""
    edges: EdgeBuffer
    low_us: float
    high_us: float
    end_node: int
    """The node whose time is the step's end (−1: the window has no step; its lanes' last nodes end it)."""
    lane_last: Ints
    """The last node of each lane (the window's end when it has no step)."""
    waits: Ints = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Nodes a dependency from another lane explains: the thread's own edge into them is a wait."""
    extra_times: list[float] = field(default_factory=list)
    extra_anchor: list[float] = field(default_factory=list)
    clamped: dict[str, int] = field(default_factory=dict)
    """What was clamped or left out, by what (e.g. kernels that start before their launch call)."""

    @property
    def node_count(self) -> int:
        return len(self.times) + len(self.extra_times)

    def add_node(self, time: float, anchor: float = -np.inf) -> int:
        """A virtual node at `time`; its number."""
        self.extra_times.append(time)
        self.extra_anchor.append(anchor)
        return len(self.times) + len(self.extra_times) - 1

    def node_times(self) -> Floats:
        return np.concatenate([self.times, np.asarray(self.extra_times, dtype=np.float64)])


def binding_edges(time: Floats, src: Ints, dst: Ints, kind: Ints, intrinsic: Floats) -> tuple[Bools, Floats]:
    """Which edge binds each node (one per node with in-edges) and every edge's weight.

    An edge's earliest arrival is its source's time plus its intrinsic weight (clamped to the
    measured span, so no edge asks for a later time than measured); the latest arrival binds,
    ties going to the own lane (PRIORITY) and then to the latest source. The binding edge weighs
    the measured span, the others their intrinsic weight.
    """
    span = time[dst] - time[src]
    floor = np.minimum(np.where(np.isnan(intrinsic), span, intrinsic), span)
    arrival = time[src] + floor
    order = np.lexsort((-time[src], PRIORITY[kind], -arrival, dst))
    first = np.ones(len(order), dtype=bool)
    first[1:] = dst[order][1:] != dst[order][:-1]
    binding = np.zeros(len(src), dtype=bool)
    binding[order[first]] = True
    weight = np.where(binding, span, floor)
    return binding, weight
