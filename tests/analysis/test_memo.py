"""Derived frames kept on the loaded job (`memoised`) never change a number, and are never
reused for another selection, other options, or another job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from htatui.analysis.core.memo import derived_bytes, forget_large, memoised, selection_key
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare
from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.model import op_nesting
from htatui.analysis.registry import VIEWS, frame_of
from htatui.analysis.views import idle, launch, patterns, queue
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
ROUTES = [(view, table) for view in VIEWS for table in view.tables]


class _NoCache(dict[Any, Any]):
    """A `TraceSet.derived` that keeps nothing: every call derives everything again."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _uncached(traces: TraceSet) -> TraceSet:
    fresh = TraceSet(ranks=traces.ranks, problems=traces.problems, notes=traces.notes, summary=traces.summary)
    object.__setattr__(fresh, "derived", _NoCache())
    return fresh


@pytest.fixture(scope="module")
def demo() -> TraceSet:
    return load_traces([DEMO], use_cache=False, max_workers=1)


def _every_table(traces: TraceSet, compat: bool) -> dict[str, pl.DataFrame]:
    out = {}
    for view, table in ROUTES:
        options = view.options(Scope(hta_compat=compat))
        out[f"{view.id}:{table.name}"] = frame_of(table.compute(traces, options))[0]
    return out


def _assert_same_tables(traces: TraceSet, compat: bool) -> None:
    expected = _every_table(_uncached(traces), compat)
    shared = TraceSet(ranks=traces.ranks, summary=traces.summary)
    first = _every_table(shared, compat)
    assert shared.derived, "the views keep derived frames on the job"
    again = _every_table(shared, compat)
    for name, frame in expected.items():
        assert first[name].equals(frame), name
        assert again[name].equals(frame), name


@pytest.mark.parametrize("compat", [False, True])
def test_every_table_is_the_same_with_and_without_the_memo_on_the_demo(demo: TraceSet, compat: bool) -> None:
    _assert_same_tables(demo, compat)


@pytest.mark.parametrize("compat", [False, True])
def test_every_table_is_the_same_with_and_without_the_memo_on_a_real_trace(load_shared: Any, compat: bool) -> None:
    # Fractional (ns) timestamps: compat mode rounds them, so the prepared columns differ by mode.
    # h100_gpt_compile has them on 4,350 of its 4,358 events and fills 36 of the 55 tables: the same
    # question as ns_resolution_trace (36,209 events, 38 tables) at a quarter of the cost.
    _assert_same_tables(load_shared("h100_gpt_compile"), compat)


def _fresh(traces: TraceSet, compute: Any, options: Any) -> pl.DataFrame:
    return frame_of(compute(_uncached(traces), options))[0]


def test_idle_gaps_are_kept_per_delay_streams_ranks_and_mode(demo: TraceSet) -> None:
    traces = TraceSet(ranks=demo.ranks)
    variants = [
        idle.IdleOptions(),
        idle.IdleOptions(consecutive_kernel_delay_us=1e9),
        idle.IdleOptions(scope=Scope(ranks=(1,))),
        idle.IdleOptions(scope=Scope(hta_compat=True)),
    ]
    results = [idle.compute(traces, options) for options in variants]
    for options, result in zip(variants, results, strict=True):
        assert result.equals(_fresh(traces, idle.compute, options)), options
    # Each variant really is another answer, so a reused cache would have shown.
    assert not results[0].equals(results[1]) and not results[0].equals(results[3])
    assert results[2]["rank"].unique().to_list() == [1]
    streams = sorted(results[0]["stream"].unique().to_list())
    only_first = idle.IdleOptions(streams=(streams[0],))
    assert idle.compute(traces, only_first)["stream"].unique().to_list() == [streams[0]]


def test_launch_and_queue_tables_follow_their_options(demo: TraceSet) -> None:
    traces = TraceSet(ranks=demo.ranks)
    with_memory = launch.compute(traces, launch.LaunchOptions())
    without = launch.compute(traces, launch.LaunchOptions(include_memory_events=False))
    assert without.height < with_memory.height
    assert without.equals(_fresh(traces, launch.compute, launch.LaunchOptions(include_memory_events=False)))
    # The cutoffs are not part of the shared pairs' key, but each summary uses its own.
    tight = launch.LaunchOptions(runtime_cutoff_us=0.0)
    assert launch.summary(traces, tight).equals(_fresh(traces, launch.summary, tight))
    assert not launch.summary(traces, tight).equals(launch.summary(traces, launch.LaunchOptions()))
    low = queue.QueueOptions(max_queue_length=1)
    assert queue.blocked(traces, low).equals(_fresh(traces, queue.blocked, low))
    assert not queue.blocked(traces, low).equals(queue.blocked(traces, queue.QueueOptions()))


def test_patterns_follow_the_operator(demo: TraceSet) -> None:
    traces = TraceSet(ranks=demo.ranks)
    names = patterns.operators(traces, patterns.PatternsOptions())["name"].to_list()
    assert len(names) >= 2
    tables = [patterns.compute(traces, patterns.PatternsOptions(operator=name, min_len=1)) for name in names[:2]]
    for name, table in zip(names[:2], tables, strict=False):
        options = patterns.PatternsOptions(operator=name, min_len=1)
        assert table.equals(_fresh(traces, patterns.compute, options))
    assert not tables[0].equals(tables[1])


def test_keys_name_the_selection_and_the_options_read(demo: TraceSet) -> None:
    base = idle.IdleOptions()
    assert selection_key(demo, base, "consecutive_kernel_delay_us") != selection_key(
        demo, idle.IdleOptions(consecutive_kernel_delay_us=5.0), "consecutive_kernel_delay_us"
    )
    assert selection_key(demo, base) != selection_key(demo, idle.IdleOptions(scope=Scope(ranks=(0,))))
    assert selection_key(demo, base) != selection_key(demo, idle.IdleOptions(scope=Scope(hta_compat=True)))
    assert selection_key(demo, base) != selection_key(demo, idle.IdleOptions(scope=Scope(steps=Steps("all"))))
    # Every rank named one by one is "all ranks"; another order is another frame (prepare's order).
    assert len(demo.rank_ids) >= 2
    assert selection_key(demo, base) == selection_key(demo, idle.IdleOptions(scope=Scope(ranks=tuple(demo.rank_ids))))
    assert selection_key(demo, base) != selection_key(
        demo, idle.IdleOptions(scope=Scope(ranks=tuple(reversed(demo.rank_ids))))
    )


def test_a_cache_lives_on_its_own_job(demo: TraceSet) -> None:
    one, other = TraceSet(ranks=demo.ranks), TraceSet(ranks=demo.ranks)
    calls: list[int] = []

    def made(value: int) -> int:
        calls.append(value)
        return value

    assert memoised(one, ("test",), lambda: made(1)) == 1
    assert memoised(one, ("test",), lambda: made(2)) == 1
    assert memoised(other, ("test",), lambda: made(3)) == 3
    assert calls == [1, 3]
    # The one-rank jobs rank_by_rank makes start empty, whatever the whole job holds.
    idle.compute(one, idle.IdleOptions())
    assert TraceSet(ranks={0: one.ranks[0]}).derived == {}


@pytest.mark.parametrize("compat", [False, True])
def test_prepared_columns_are_the_prepared_frame_s(load_shared: Any, compat: bool) -> None:
    traces = TraceSet(ranks=load_shared("ns_resolution_trace").ranks)
    options = CommonOptions(scope=Scope(hta_compat=compat))
    columns = ("rank", "name", "dur", "index")
    narrow = prepare(traces, options, columns=columns)  # filtered alone, the whole frame not made yet
    whole = prepare(traces, options)
    assert narrow.events.equals(whole.events.select(columns))
    assert prepare(traces, options, columns=columns).events.equals(narrow.events)  # from the whole frame
    assert narrow.steps_used == whole.steps_used


def _stack_parents(segment: list[int], start: list[int], end: list[int]) -> list[int]:
    """The op tree's former loop: pop what the new row starts after the end of, or outlasts."""
    parents: list[int] = []
    stack: list[int] = []
    for i in range(len(start)):
        if i and segment[i] != segment[i - 1]:
            stack.clear()
        while stack and (start[i] >= end[stack[-1]] or end[i] > end[stack[-1]]):
            stack.pop()
        parents.append(stack[-1] if stack else -1)
        stack.append(i)
    return parents


def _call_stack_parents(segment: list[int], start: list[float], end: list[float]) -> list[int]:
    """callstack's former loop: close what ended at (zero-length rows: before) each new start."""
    parents: list[int] = []
    stack: list[int] = []
    for i in range(len(start)):
        if i and segment[i] != segment[i - 1]:
            stack.clear()
        if end[i] > start[i]:
            while stack and end[stack[-1]] <= start[i]:
                stack.pop()
        else:
            while stack and end[stack[-1]] < start[i]:
                stack.pop()
        parents.append(stack[-1] if stack else -1)
        stack.append(i)
    return parents


@pytest.mark.parametrize("seed", range(6))
def test_whole_array_nesting_matches_the_stack_loops(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    thread = np.sort(rng.integers(0, 3, n))
    start = rng.integers(0, 60, n)
    dur = rng.integers(0, 25, n) * (rng.random(n) < 0.8)
    rows = np.lexsort((np.arange(n), -(start + dur), start, thread))
    thread, start, end = thread[rows], start[rows], (start + dur)[rows]
    segment = np.maximum.accumulate(np.where(np.r_[True, thread[1:] != thread[:-1]], np.arange(n), 0))
    assert op_nesting.nest(segment, start, end).tolist() == _stack_parents(
        thread.tolist(), start.tolist(), end.tolist()
    )
    expected = _call_stack_parents(thread.tolist(), start.tolist(), end.tolist())
    parent = op_nesting.previous_reaching(segment, end.astype(float), start.astype(float), end > start)
    assert parent.tolist() == expected
    depth = op_nesting.depths(parent)
    walked = []
    for i in range(n):
        d, p = 0, expected[i]
        while p >= 0:
            d, p = d + 1, expected[p]
        walked.append(d)
    assert depth.tolist() == walked
    following = op_nesting.next_not_above(depth)
    assert following.tolist() == [next((p for p in range(i + 1, n) if walked[p] <= walked[i]), n) for i in range(n)]
    roots = op_nesting.resolve(parent, parent < 0)
    for i in range(n):
        p = i
        while expected[p] >= 0:
            p = expected[p]
        assert roots[i] == p


def test_next_not_above_on_deep_rows_uses_the_lifting_search() -> None:
    # 200 distinct values: past the level-by-level search's range.
    values = np.random.default_rng(7).integers(0, 200, 500)
    expected = [next((p for p in range(i + 1, 500) if values[p] <= values[i]), 500) for i in range(500)]
    assert op_nesting.next_not_above(values).tolist() == expected


def test_subtree_sums_add_children_in_row_order() -> None:
    # 0 ← 1 ← 2, 0 ← 3: totals 1+2+4+8, 2+4, 4, 8.
    parent = np.array([-1, 0, 1, 0])
    total = op_nesting.subtree_sums(np.array([1.0, 2.0, 4.0, 8.0]), parent, op_nesting.depths(parent))
    assert total.tolist() == [15.0, 6.0, 4.0, 8.0]


def test_forget_large_drops_the_named_values_over_the_size_only(demo: TraceSet) -> None:
    traces = TraceSet(ranks=demo.ranks)
    big = pl.DataFrame({"x": np.zeros(1000)})  # 8,000 bytes
    traces.derived.update({("big",): (big, 3), ("small",): pl.DataFrame({"x": [1.0]}), ("other",): big.clone()})
    assert 8000 <= forget_large(traces, [("big",), ("small",), ("absent",)], over_bytes=1000) < 8200
    assert set(traces.derived) == {("small",), ("other",)}
    # Through dataclasses and lists: the frame once, a long list of numbers at 28 bytes an item.
    assert derived_bytes([big, big, list(range(2000))]) >= 8000 + 2000 * 28
    assert derived_bytes([big, big]) < 2 * 8000
