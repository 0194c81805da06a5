"""The critical path in compat mode against HTA 0.6.1's own `critical_path_analysis`, run in the test process.

The oracles in ../shared/oracles/critical_path cover HTA's four test traces
(tests/analysis/test_critical_path.py); these are other real traces and windows:
the path's every edge (kind, weight, bound type) must be HTA's, in HTA's order.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import pytest

from htatui.analysis.core.scope import Scope
from htatui.analysis.views import critical_path as cp

WINDOWS = (
    ("h100_resnet_eager", "ProfilerStep", 0),
    ("h100_gpt_compile", "ProfilerStep", 0),
    ("trace_filter", "ProfilerStep", 0),
    # HTA counts the annotation's matches in its table order: kernels whose names contain
    # "forward" first, then the host rows; GPU-side annotation copies after the host's.
    ("h100_resnet_eager", "forward", 3),
    ("with_gpu_user_annotation", "Optimizer.step", 5),
)


@pytest.mark.parametrize(("folder", "annotation", "instance"), WINDOWS)
def test_path_matches_hta(
    folder: str, annotation: str, instance: int, hta_analysis: Callable[[str], Any], load_shared: Any
) -> None:
    analysis = hta_analysis(folder)
    rank = sorted(analysis.t.traces)[0]
    with contextlib.redirect_stdout(io.StringIO()):
        graph, ok = analysis.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
    assert ok
    nodes = graph.critical_path_nodes
    theirs = []
    for u, v in zip(nodes, nodes[1:], strict=False):
        edge = graph.edges[u, v]["object"]
        theirs.append((edge.type.value, float(edge.weight)))
    options = cp.CriticalPathOptions(scope=Scope(hta_compat=True), rank=rank, annotation=annotation, instance=instance)
    path = cp.rank_path(load_shared(folder), options).frame
    assert list(path.select("edge_type", "duration_us").iter_rows()) == theirs
    by_bound = graph.get_critical_path_breakdown().groupby("bound_by").duration.sum()
    expected = {k: float(v) for k, v in by_bound.items() if k}
    assert dict(cp.compute(load_shared(folder), options).frame.select("bound_by", "time_us").iter_rows()) == expected
