"""Whole-array steps of the op tree (`op_events`): nesting, nearest ancestors, depths, subtree sums.

Each replaces a Python loop over every host event with a few numpy passes, and gives the same
parents and the same floating-point sums (added in the same order) as the loop did.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


def nest(segment: Ints, start: Ints, end: Ints) -> Ints:
    """Parents of rows already sorted by (thread, start, longest first, index): -1 at the top.

    The loop this replaces keeps a stack per thread and pops every open row that the new row
    starts at or after the end of, or outlasts. An open row that neither happens to survives
    every later pop, so a row's parent is the latest earlier row of its thread that ends after
    it starts and no earlier than it ends: ``end[p] >= max(end[i], start[i] + 1)`` (whole ns).
    """
    need = np.maximum(end, start + 1)
    return previous_reaching(segment, end, need, np.zeros(len(end), dtype=bool))


def frame_parents(frame: pl.DataFrame) -> tuple[Ints, Ints]:
    """Each row's parent (row of `frame`, -1 at the top) when the rows (pid, tid, ts, dur, index)
    nest per thread as `nest` says, and the rows in (thread, start, longest first, index) order.
    Times are compared in whole nanoseconds."""
    if frame.height == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    text = pl.concat_str(pl.col("pid").cast(pl.Utf8), pl.col("tid").cast(pl.Utf8), separator="/")
    thread = frame.select(text.rank("dense")).to_series().to_numpy().astype(np.int64)
    start = np.round(frame["ts"].to_numpy() * 1000.0).astype(np.int64)
    end = start + np.round(frame["dur"].fill_null(0.0).to_numpy() * 1000.0).astype(np.int64)
    order = np.lexsort((frame["index"].to_numpy(), -end, start, thread)).astype(np.int64)
    sorted_thread = thread[order]
    segment = np.zeros(len(order), dtype=np.int64)
    changes = np.nonzero(sorted_thread[1:] != sorted_thread[:-1])[0] + 1
    segment[changes] = changes
    segment = np.maximum.accumulate(segment)
    parent_sorted = nest(segment, start[order], end[order])
    parent = np.full(len(order), -1, dtype=np.int64)
    parent[order] = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], -1)
    return parent, order


def previous_reaching(segment: Ints, end: npt.NDArray[Any], need: npt.NDArray[Any], strict: Bools) -> Ints:
    """For each row i, the latest earlier row p ≥ segment[i] with end[p] ≥ need[i] (> where
    strict[i]), or -1: a search over the maxima of aligned blocks of `end`, a few passes of n."""
    n = len(end)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    cursor = np.arange(n, dtype=np.int64) - 1
    # Most rows' answer is the row just before (a first child): only the others are searched.
    before = end[np.maximum(cursor, 0)]
    near = (cursor >= 0) & np.where(strict, before > need, before >= need)
    far = np.nonzero(~near & (cursor >= 0))[0]
    cursor[far] = _last_reaching(_block_maxima(end), cursor[far] + 1, need[far], strict[far])
    # Rows before the segment's first row belong to another thread.
    return np.where(cursor >= segment, cursor, -1)


def _block_maxima(values: npt.NDArray[Any]) -> list[npt.NDArray[Any]]:
    """levels[k][j] = max(values[j·2**k .. (j + 1)·2**k − 1]) (the last block of a level may be
    shorter): about 2n values in all, where windows at every row would take n per level."""
    levels = [values]
    while len(levels[-1]) > 1:
        previous = levels[-1]
        if len(previous) % 2:
            previous = np.append(previous, previous[-1])
        levels.append(np.maximum(previous[0::2], previous[1::2]))
    return levels


def _last_reaching(levels: list[npt.NDArray[Any]], limit: Ints, need: npt.NDArray[Any], strict: Bools) -> Ints:
    """For each query, the last row p < limit with values[p] ≥ need (> where strict), or -1.

    [0, limit) splits into aligned blocks, one per set bit of `limit`, the lowest bit's block
    the rightmost: the first of them (right to left) whose maximum reaches holds the answer,
    found by stepping down into its right half when that one reaches, else its left half.
    """

    def reaches(maxima: npt.NDArray[Any]) -> Bools:
        return np.where(strict, maxima > need, maxima >= need)

    bound = limit.copy()
    level = np.full(len(limit), -1, dtype=np.int64)
    block = np.zeros(len(limit), dtype=np.int64)
    for k, maxima in enumerate(levels):
        open_rows = (level < 0) & (((bound >> k) & 1) == 1)
        j = np.where(open_rows, (bound >> k) - 1, 0)
        hit = open_rows & reaches(maxima[j])
        level[hit] = k
        block[hit] = j[hit]
        bound[open_rows & ~hit] -= 1 << k
    for k in range(len(levels) - 1, 0, -1):
        rows = np.nonzero(level == k)[0]
        if rows.size == 0:
            continue
        below = levels[k - 1]
        right = 2 * block[rows] + 1
        inside = right < len(below)
        right_reaches = inside & np.where(
            strict[rows],
            below[np.minimum(right, len(below) - 1)] > need[rows],
            below[np.minimum(right, len(below) - 1)] >= need[rows],
        )
        block[rows] = np.where(right_reaches, right, right - 1)
        level[rows] = k - 1
    return np.where(level == 0, block, -1)


def next_not_above(values: Ints) -> Ints:
    """For each row i, the first later row p with values[p] ≤ values[i], or n: in a pre-order
    listing with depths, where row i's subtree ends (binary lifting over running minima)."""
    n = len(values)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if high - low <= _FEW_LEVELS:
        return _next_not_above_by_level(values, low, high)
    # minima[k][p] = min(values[p .. p + 2**k - 1]) (to the end where the window would pass it).
    minima = [values]
    width = 1
    while width < n:
        previous = minima[-1]
        widened = previous.copy()
        widened[:-width] = np.minimum(previous[:-width], previous[width:])
        minima.append(widened)
        width *= 2
    cursor = np.arange(n, dtype=np.int64) + 1
    # Most rows are leaves, whose answer is the next row: only the others are searched.
    far = np.nonzero((cursor < n) & (values[np.minimum(cursor, n - 1)] > values))[0]
    found, far_values = cursor[far], values[far]
    for k in range(len(minima) - 1, -1, -1):
        valid = found < n
        window_min = minima[k][np.where(valid, found, 0)]
        found = found + (valid & (window_min > far_values)).astype(np.int64) * (1 << k)
    cursor[far] = found
    return np.minimum(cursor, n)


_FEW_LEVELS = 64
"""Up to this many distinct depths, `next_not_above` searches level by level (call stacks are
rarely deeper), which costs a few passes instead of one per power of two of the row count."""


def _next_not_above_by_level(values: Ints, low: int, high: int) -> Ints:
    n = len(values)
    following = np.full(n, n, dtype=np.int64)
    for level in range(low, high + 1):
        rows = np.nonzero(values == level)[0]
        if rows.size == 0:
            continue
        stops = np.nonzero(values <= level)[0]
        k = np.searchsorted(stops, rows, side="right")
        following[rows] = np.where(k < len(stops), stops[np.minimum(k, len(stops) - 1)], n)
    return following


def resolve(parent: Ints, stop: Bools) -> Ints:
    """For each row, the nearest of itself and its ancestors where `stop` holds (-1 for none)."""
    n = len(parent)
    rows = np.arange(n, dtype=np.int64)
    pointer = np.where(stop, rows, parent)
    while True:
        safe = np.where(pointer >= 0, pointer, 0)
        open_rows = (pointer >= 0) & ~stop[safe]
        if not open_rows.any():
            return pointer
        pointer = np.where(open_rows, pointer[safe], pointer)


def depths(parent: Ints) -> Ints:
    """How many ancestors each row has (by pointer doubling: steps to the ancestor `ahead`)."""
    ahead = parent.copy()
    steps = (parent >= 0).astype(np.int64)
    while (ahead >= 0).any():
        safe = np.where(ahead >= 0, ahead, 0)
        live = ahead >= 0
        steps = steps + np.where(live, steps[safe], 0)
        ahead = np.where(live, ahead[safe], -1)
    return steps


def subtree_sums(own: Floats, parent: Ints, depth: Ints) -> Floats:
    """`own` plus every descendant's: children are added into their parent one at a time, in
    row order, deepest level first (the loop's order, so the float sums are identical)."""
    total = own.astype(np.float64, copy=True)
    has_parent = np.nonzero(parent >= 0)[0]
    if has_parent.size == 0:
        return total
    by_level = has_parent[np.argsort(-depth[has_parent], kind="stable")]
    levels = depth[by_level]
    cuts = np.nonzero(np.diff(levels))[0] + 1
    for rows in np.split(by_level, cuts):
        np.add.at(total, parent[rows], total[rows])
    return total
