"""One rank's critical path: the graph of its window, the longest path, each edge's bound type."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.core.kernel_types import COMMUNICATION, kernel_type
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.views.critical_path import device, graph, longest
from htatui.analysis.views.critical_path.columns import PATH_SPEC, SUMMARY_SPEC
from htatui.analysis.views.critical_path.graph import (
    DEPENDENCY,
    EDGE_TYPES,
    KERNEL_KERNEL,
    LAUNCH,
    SYNC,
    EdgeArrays,
    Edges,
    Nodes,
)
from htatui.analysis.views.critical_path.window import Window, clip

PATH_SCHEMA = PATH_SPEC.schema


@dataclass(frozen=True)
class RankGraph:
    """A rank's window, its nodes and edges (weights in µs).

    A job's graph (`job.py`) adds `meetings` meeting nodes after the nodes of `nodes`: one per
    collective call, with no event, never on a path's list of nodes (`longest.py`).
    """

    window: Window
    nodes: Nodes
    edges: EdgeArrays
    weight: np.ndarray
    meetings: int = 0

    @property
    def node_count(self) -> int:
        """Every node the edges number: the events' and the meetings'."""
        return len(self.nodes.ts) + self.meetings


def build_graph(
    events: pl.DataFrame, annotation: str, instance: int, data_loading: tuple[str, ...], hta_compat: bool
) -> RankGraph:
    """The graph of one rank's rows (HTA 0.6.1's CPGraph, built from arrays)."""
    window = clip(events, annotation, instance, hta_compat)
    kept = window.events
    has_node = graph.node_mask(kept, data_loading).to_numpy()
    nodes = graph.make_nodes(kept, has_node)
    edges = Edges()
    takes_lock = graph.takes_lock_mask(kept)
    graph.lock_edges(nodes, takes_lock, edges)
    graph.stack_edges(kept, nodes, takes_lock, hta_compat, edges)
    device.device_edges(window, nodes, edges, causal_launches=not hta_compat)
    arrays = edges.arrays()
    span = nodes.ts[arrays.dst] - nodes.ts[arrays.src] if len(arrays.src) else np.zeros(0)
    weight = np.where(arrays.zero, 0.0, span)
    return RankGraph(window, nodes, arrays, weight)


def solve(g: RankGraph, placed: bool = False) -> longest.Path:
    """The graph's longest path (`longest.longest_path`), negative weights solved as 0."""
    # HTA sets negative weights (ns artefacts: a child ending after its parent) to 0 in the graph.
    return longest.longest_path(g.node_count, g.edges.src, g.edges.dst, np.maximum(g.weight, 0.0), g.meetings, placed)


def path_frame(
    g: RankGraph,
    hta_compat: bool,
    data_loading: tuple[str, ...],
    found: longest.Path | None = None,
    *,
    rules: Rules = SHIPPED_RULES,
) -> pl.DataFrame:
    """The longest path's edges in order, each with its bound type (PATH_SCHEMA); `found`: the
    graph's path when it is solved already (`solve`)."""
    solved = np.maximum(g.weight, 0.0)
    if found is None:
        found = solve(g)
    if len(found.edges) == 0:
        return pl.DataFrame(schema=PATH_SCHEMA)
    e = found.edges
    # Each step's own ends (a step through a meeting runs from a rank's start to another's end).
    step_src, step_dst = found.nodes[:-1], found.nodes[1:]
    # HTA reports each edge's own weight (negative ones too); corrected mode reports what was solved.
    duration = g.weight[e] if hta_compat else solved[e]
    kind = g.edges.kind[e].astype(np.int64)
    charged = g.edges.event[e].astype(np.int64)
    safe = np.maximum(charged, 0)
    has = charged >= 0
    # The rows charged, in path order: typed and named alone (a job's window holds every rank's rows).
    kept = g.window.events.select(pl.all().gather(safe)).with_columns(
        device_kind=kernel_type(hta_compat, rules), name_text=pl.col("name").cast(pl.Utf8)
    )
    names = np.asarray(kept["name_text"].to_list(), dtype=object)
    on_host = kept["hstream"].to_numpy() < 0
    comm = (kept["device_kind"] == COMMUNICATION).to_numpy()
    loading = np.zeros(len(e), bool)
    pattern = graph.data_loading_pattern(data_loading)
    if pattern is not None:
        loading = np.array([bool(pattern.search(str(n))) for n in names])
    bound = np.where(
        kind == KERNEL_KERNEL,
        "gpu_kernel_kernel_overhead",
        np.where(
            kind == LAUNCH,
            "gpu_kernel_launch_overhead",
            np.where(
                (kind == DEPENDENCY) | (kind == SYNC) | ~has,
                "",
                np.where(
                    on_host,
                    np.where(loading, "data_loading", "cpu_bound"),
                    np.where(comm, "gpu_communication_bound", "gpu_compute_bound"),
                ),
            ),
        ),
    )
    index = kept["index"].to_numpy()
    return pl.DataFrame(
        {
            "rank": g.window.events["rank"].gather(np.asarray(g.nodes.event)[step_dst]).to_numpy(),
            "step": np.arange(len(e), dtype=np.int64),
            "name": [n if h else None for n, h in zip(names.tolist(), has.tolist(), strict=True)],
            "edge_type": [EDGE_TYPES[k] for k in kind.tolist()],
            "start_us": g.nodes.ts[step_src],
            "end_us": g.nodes.ts[step_dst],
            "duration_us": duration.astype(np.float64),
            "bound_by": bound.astype(str).tolist(),
            "index": [int(i) if h else None for i, h in zip(index.tolist(), has.tolist(), strict=True)],
        },
        schema=PATH_SCHEMA,
    )


def summarise(path: pl.DataFrame) -> pl.DataFrame:
    """Time on the path per bound type and its share of the path (edges of no type, HTA's
    dependency edges, left out): the summary of HTA's path and of the step model's alike."""
    total = path["duration_us"].sum()
    by = (
        path.filter(pl.col("bound_by") != "")
        .group_by("bound_by")
        .agg(time_us=pl.col("duration_us").sum())
        .with_columns(pct=pl.col("time_us") / total * 100 if total else pl.lit(0.0))
        .sort("time_us", "bound_by", descending=[True, False])
    )
    return by.select([pl.col(c).cast(t) for c, t in SUMMARY_SPEC.schema.items()])
