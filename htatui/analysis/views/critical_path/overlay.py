"""What the critical-path overlay marks in a rank's trace: the events on the path and the links between them.

HTA 0.6.1's `overlay_critical_path_analysis` marks every event with a node on the path
(`args.critical = 1`) and draws a flow arrow for each path edge of its default kinds (dependency,
kernel launch delay, sync dependency); this module says which, by file index, and the export
(`analysis/export/critical_path.py`) writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.views.critical_path import longest
from htatui.analysis.views.critical_path.graph import DEPENDENCY, EDGE_TYPES, LAUNCH, SYNC
from htatui.analysis.views.critical_path.path import RankGraph

LINKED_KINDS = (DEPENDENCY, LAUNCH, SYNC)
"""The path edges drawn as arrows (HTA's DEFAULT_EDGE_TYPES_IN_VIZ); operator edges lie inside an event."""

LINK_SCHEMA: dict[str, pl.DataType] = {
    "src_index": pl.Int64(),
    "src_is_start": pl.Boolean(),
    "dst_index": pl.Int64(),
    "dst_is_start": pl.Boolean(),
    "edge_type": pl.Utf8(),
    "weight_us": pl.Float64(),
}


@dataclass(frozen=True)
class PathMarks:
    """The file indices of the events on a rank's path, and its linked edges in path order (LINK_SCHEMA)."""

    events: frozenset[int]
    links: pl.DataFrame


def path_marks(g: RankGraph) -> PathMarks:
    """The events with a node on the graph's longest path, and the path's edges of LINKED_KINDS
    as (source event, at its start?, destination event, at its start?, kind, weight)."""
    src, dst = np.asarray(g.edges.src, np.int64), np.asarray(g.edges.dst, np.int64)
    solved = np.maximum(g.weight, 0.0)  # as path_frame solves it
    found = longest.longest_path(g.node_count, src, dst, solved, g.meetings)
    file_index = g.window.events["index"].to_numpy()[np.asarray(g.nodes.event, np.int64)]
    on_path = file_index[found.nodes] if len(found.nodes) else np.zeros(0, np.int64)
    edges = found.edges
    kind = np.asarray(g.edges.kind, np.int64)[edges] if len(edges) else np.zeros(0, np.int64)
    shown = np.isin(kind, LINKED_KINDS)
    linked = edges[shown]
    # Each step's own ends (`longest.Path`), so a step through a meeting node joins two events.
    step_src, step_dst = found.nodes[:-1][shown], found.nodes[1:][shown]
    links = pl.DataFrame(
        {
            "src_index": file_index[step_src],
            "src_is_start": g.nodes.is_start[step_src],
            "dst_index": file_index[step_dst],
            "dst_is_start": g.nodes.is_start[step_dst],
            "edge_type": [EDGE_TYPES[k] for k in kind[shown].tolist()],
            "weight_us": solved[linked],
        },
        schema=LINK_SCHEMA,
    )
    return PathMarks(frozenset(int(i) for i in on_path.tolist()), links)
