"""The critical path's graph in compact arrays: the order edges are added in (HTA's tie-breaks
depend on it), the narrow types a job's millions of edges are kept in, and repeated edges."""

from __future__ import annotations

import numpy as np

from htatui.analysis.views.critical_path.graph import DEPENDENCY, OPERATOR, SYNC, Edges
from htatui.analysis.views.critical_path.longest import longest_path, repeated_edges


def test_edges_keep_the_order_added_in_narrow_arrays() -> None:
    """Single edges and runs of edges interleaved come out in the order added; dependency and
    sync edges weigh nothing (zero), as each edge said or its kind implies."""
    edges = Edges()
    edges.add(0, 1, OPERATOR, 5)
    edges.extend(
        np.array([1, 2]), np.array([2, 3]), np.array([DEPENDENCY, OPERATOR]), np.array([-1, 7]), np.array([False, True])
    )
    edges.add(3, 4, SYNC)
    edges.add(4, 5, OPERATOR, 9, zero=True)
    found = edges.arrays()
    assert found.src.tolist() == [0, 1, 2, 3, 4]
    assert found.dst.tolist() == [1, 2, 3, 4, 5]
    assert found.kind.tolist() == [OPERATOR, DEPENDENCY, OPERATOR, SYNC, OPERATOR]
    assert found.zero.tolist() == [False, True, True, True, True]
    assert found.event.tolist() == [5, -1, 7, -1, 9]
    # 14 bytes an edge, where Python lists of ints took ~150.
    assert [a.dtype for a in (found.src, found.dst, found.kind, found.zero, found.event)] == [
        np.int32,
        np.int32,
        np.int8,
        np.bool_,
        np.int32,
    ]


def test_no_edges_give_empty_arrays() -> None:
    found = Edges().arrays()
    assert len(found.src) == len(found.event) == 0


def test_repeated_edges_stand_at_their_first_place_with_their_last_copy() -> None:
    """0→1 is added at 0 and 2: it stands at 0 with copy 2's weight; none repeated: None."""
    src, dst = np.array([0, 1, 0, 2], np.int32), np.array([1, 2, 1, 3], np.int32)
    found = repeated_edges(src, dst)
    assert found is not None
    assert found[0].tolist() == [0, 1, 3]
    assert found[1].tolist() == [2, 1, 3]
    assert repeated_edges(np.array([0, 1]), np.array([1, 2])) is None
    # The last copy's weight counts: 0→1 weighs 5, not 1; then 1→2 (2) and 2→3 (1).
    path = longest_path(4, src, dst, np.array([1.0, 2.0, 5.0, 1.0]))
    assert path.length == 8.0
    assert path.edges.tolist() == [2, 1, 3]
