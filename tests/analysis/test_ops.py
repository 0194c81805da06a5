"""ops view and the shared call-stack helper on hand-built traces; numbers derived in comments."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, runtime, write_trace

from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare
from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.model import callstack
from htatui.analysis.views import ops
from htatui.analysis.views.ops import OpsOptions
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet


def load(path: Path) -> TraceSet:
    return load_traces([path], use_cache=False, max_workers=1)


def memset(ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "gpu_memset",
        "name": "Memset (Device)",
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }


def op_events() -> list[dict[str, Any]]:
    """Thread 1 under "## forward ##" [0, 200] (an annotation: a row of kind annotation):
      aten::linear [10, 110]                      total 100, children 5 + 70 + 3 → self 22
        aten::t [12, 17]                          5, self 5
        aten::addmm [20, 90]                      70, children 5 + 5 + 2 → self 58
          cudaLaunchKernel [25, 30] corr 1 → gemm 20 µs
          cudaLaunchKernel [35, 40] corr 2 → bias 4 µs      addmm: GPU self 24, total 24
          aten::empty [50, 52]                    2, self 2
        cudaMemsetAsync [95, 98] corr 3 → memset 2 µs        linear: GPU self 2, total 26
      aten::add [120, 140]: cudaLaunchKernel [125, 130] corr 4 → add 3 µs   self 15
      aten::add [150, 160]: cudaLaunchKernel [151, 153] corr 5 → add 2 µs   self 8
      cudaLaunchKernel [170, 172] corr 6 → 7 µs kernel: launched right under the annotation,
        so "## forward ##" owns it: GPU self 7, total 7 + 26 + 3 + 2 = 38;
        CPU self 200 − (100 + 20 + 10 + 2) = 68
    Thread 2: aten::add [0, 30], then a zero-length aten::empty at 30: it starts at the add's
      end, so it is not its child (the profiler's rule); both are top level.
      aten::add: 3 calls, total 20 + 10 + 30 = 60, self 15 + 8 + 30 = 53, GPU self = total = 5
      aten::empty: 2 calls, total 2 + 0, self 2
    Runtime rows: cudaLaunchKernel 5 calls, 5 + 5 + 5 + 2 + 2 = 19 µs (self = total; the
      work belongs to the op that made the call, so 0 GPU); cudaMemsetAsync 1 call, 3 µs.
    """
    return [
        cpu_op("## forward ##", 0, 200, cat="user_annotation"),
        cpu_op("aten::linear", 10, 100),
        cpu_op("aten::t", 12, 5),
        cpu_op("aten::addmm", 20, 70),
        runtime("cudaLaunchKernel", 25, 5, 1),
        runtime("cudaLaunchKernel", 35, 5, 2),
        cpu_op("aten::empty", 50, 2),
        runtime("cudaMemsetAsync", 95, 3, 3),
        cpu_op("aten::add", 120, 20),
        runtime("cudaLaunchKernel", 125, 5, 4),
        cpu_op("aten::add", 150, 10),
        runtime("cudaLaunchKernel", 151, 2, 5),
        runtime("cudaLaunchKernel", 170, 2, 6),
        kernel("gemm", 40, 20, corr=1),
        kernel("bias", 61, 4, corr=2),
        memset(66, 2, 3),
        kernel("add", 131, 3, corr=4),
        kernel("add", 154, 2, corr=5),
        kernel("loose", 175, 7, corr=6),
        cpu_op("aten::add", 0, 30, tid=2),
        cpu_op("aten::empty", 30, 0, tid=2),
    ]


ADDMM = (0, "aten::addmm", "op", 1, 70.0, 58.0, 24.0, 24.0)
ADD = (0, "aten::add", "op", 3, 60.0, 53.0, 5.0, 5.0)
LINEAR = (0, "aten::linear", "op", 1, 100.0, 22.0, 2.0, 26.0)
EMPTY = (0, "aten::empty", "op", 2, 2.0, 2.0, 0.0, 0.0)
T = (0, "aten::t", "op", 1, 5.0, 5.0, 0.0, 0.0)
FORWARD = (0, "## forward ##", "annotation", 1, 200.0, 68.0, 7.0, 38.0)
LAUNCH = (0, "cudaLaunchKernel", "runtime", 5, 19.0, 19.0, 0.0, 0.0)
MEMSET_CALL = (0, "cudaMemsetAsync", "runtime", 1, 3.0, 3.0, 0.0, 0.0)


@pytest.fixture
def traces(tmp_path: Path) -> TraceSet:
    return load(write_trace(tmp_path / "rank-0.json", op_events(), rank=0))


def test_ops_table_default_sort(traces: TraceSet) -> None:
    frame = ops.compute(traces, OpsOptions())
    assert frame.schema == pl.Schema(ops.COLUMNS)
    # gpu_self_us descending; the zero rows by name ("aten::empty" < "aten::t" < "cuda…").
    assert frame.rows() == [ADDMM, FORWARD, ADD, LINEAR, EMPTY, T, LAUNCH, MEMSET_CALL]


def test_ops_kinds(traces: TraceSet) -> None:
    only_ops = ops.compute(traces, OpsOptions(kinds="op"))
    assert only_ops.rows() == [ADDMM, ADD, LINEAR, EMPTY, T]
    assert ops.compute(traces, OpsOptions(kinds="annotation,runtime", sort_by="name", descending=False)).rows() == [
        FORWARD,
        LAUNCH,
        MEMSET_CALL,
    ]
    # Device rows: GPU self = total = their time, no CPU time; kernels by name.
    device = ops.compute(traces, OpsOptions(kinds="kernel,memset", sort_by="name", descending=False))
    assert device.rows() == [
        (0, "Memset (Device)", "memset", 1, 0.0, 0.0, 2.0, 2.0),
        (0, "add", "kernel", 2, 0.0, 0.0, 5.0, 5.0),
        (0, "bias", "kernel", 1, 0.0, 0.0, 4.0, 4.0),
        (0, "gemm", "kernel", 1, 0.0, 0.0, 20.0, 20.0),
        (0, "loose", "kernel", 1, 0.0, 0.0, 7.0, 7.0),
    ]
    assert ops.compute(traces, OpsOptions(kinds="all")).height == 8 + 5
    with pytest.raises(ValueError, match="kinds"):
        ops.compute(traces, OpsOptions(kinds="op,bogus"))


def test_ops_sort_and_top(traces: TraceSet) -> None:
    assert ops.compute(traces, OpsOptions(sort_by="cpu_self_us", kinds="op")).rows() == [ADDMM, ADD, LINEAR, T, EMPTY]
    assert ops.compute(traces, OpsOptions(sort_by="count", top_k=2)).rows() == [LAUNCH, ADD]
    assert ops.compute(traces, OpsOptions(sort_by="name", descending=False, kinds="op")).rows() == [
        ADD,
        ADDMM,
        EMPTY,
        LINEAR,
        T,
    ]
    assert ops.compute(traces, OpsOptions(sort_by="gpu_total_us", top_k=1)).rows() == [FORWARD]
    with pytest.raises(ValueError, match="sort_by"):
        ops.compute(traces, OpsOptions(sort_by="bogus"))


def test_ops_per_rank_top(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    write_trace(folder / "rank-0.json", op_events(), rank=0)
    write_trace(folder / "rank-1.json", op_events(), rank=1)
    traces = load_traces([folder], use_cache=False, max_workers=1)
    frame = ops.compute(traces, OpsOptions(top_k=2))
    assert frame.rows() == [ADDMM, FORWARD, (1, *ADDMM[1:]), (1, *FORWARD[1:])]
    assert ops.compute(traces, OpsOptions(scope=Scope(ranks=(1,)), top_k=1)).rows() == [(1, *ADDMM[1:])]


def test_ops_empty(tmp_path: Path) -> None:
    kernel_only = [kernel("k", 1, 2, corr=1)]
    traces = load(write_trace(tmp_path / "rank-0.json", kernel_only, rank=0))
    frame = ops.compute(traces, OpsOptions())
    assert frame.height == 0 and frame.schema == pl.Schema(ops.COLUMNS)
    assert ops.compute(traces, OpsOptions(scope=Scope(ranks=(9,)))).height == 0
    # The kernel has no launching call: listed as a device row, owned by nothing.
    assert ops.compute(traces, OpsOptions(kinds="kernel")).rows() == [(0, "k", "kernel", 1, 0.0, 0.0, 2.0, 2.0)]


def test_ops_compat_rounds_like_hta(tmp_path: Path) -> None:
    """A float-timestamp trace: HTA ceils starts and floors ends. aten::mul [10.2, 20.7] → [11, 20]
    (9 µs; default 10.5); its child cudaLaunchKernel [12.5, 13.4] → [13, 13] (0 µs; default 0.9);
    the kernel [14.1, 16.9] → [15, 16] (1 µs; default 2.8)."""
    events = [
        cpu_op("aten::mul", 10.2, 10.5),
        runtime("cudaLaunchKernel", 12.5, 0.9, 1),
        kernel("mul", 14.1, 2.8, corr=1),
    ]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    default = ops.compute(traces, OpsOptions(kinds="op")).row(0)
    assert default[:4] == (0, "aten::mul", "op", 1)
    assert default[4:] == pytest.approx((10.5, 9.6, 2.8, 2.8))
    assert ops.compute(traces, OpsOptions(scope=Scope(hta_compat=True), kinds="op")).row(0)[4:] == pytest.approx(
        (9.0, 9.0, 1.0, 1.0)
    )


# --------------------------------------------------------------------------- call stacks


def stack_of(tmp_path: Path, events: list[dict[str, Any]], link_backward: bool = False) -> pl.DataFrame:
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    prepared = prepare(traces, CommonOptions()).events
    return callstack.build(prepared, link_backward=link_backward)


def parents(stack: pl.DataFrame) -> dict[int, int | None]:
    """file index → parent's file index."""
    by_pos = dict(zip(stack["pos"].to_list(), stack["index"].to_list(), strict=True))
    return {
        i: by_pos.get(p) if p is not None else None
        for i, p in zip(stack["index"].to_list(), stack["parent"].to_list(), strict=True)
    }


def test_callstack_tie_rules(tmp_path: Path) -> None:
    events = [
        cpu_op("short", 0, 5),  # 0: same start as 1 but shorter → child of 1
        cpu_op("long", 0, 10),  # 1: outermost
        cpu_op("same_a", 20, 5),  # 2: same start and length as 3, earlier in the file → parent of 3
        cpu_op("same_b", 20, 5),  # 3
        cpu_op("next", 25, 5),  # 4: starts when 2 and 3 end → sibling (outermost)
        cpu_op("zero_end", 30, 0),  # 5: zero-length when 4 ends and nothing starts → inside 4
        cpu_op("zero_start", 40, 0),  # 6: zero-length when 7 starts → inside 7
        cpu_op("opener", 40, 5),  # 7: outermost
        cpu_op("zero_a", 50, 0),  # 8: two zero-length events at one time nest (HTA's order)
        cpu_op("zero_b", 50, 0),  # 9: → inside 8
        cpu_op("other", 0, 100, tid=2),  # 10: another thread: not a parent of anything on tid 1
    ]
    stack = stack_of(tmp_path, events)
    assert parents(stack) == {
        0: 1,
        1: None,
        2: None,
        3: 2,
        4: None,
        5: 4,
        6: 7,
        7: None,
        8: None,
        9: 8,
        10: None,
    }
    depth = dict(zip(stack["index"].to_list(), stack["depth"].to_list(), strict=True))
    assert depth == {0: 1, 1: 0, 2: 0, 3: 1, 4: 0, 5: 1, 6: 1, 7: 0, 8: 0, 9: 1, 10: 0}
    # Subtrees: `last` is the pos of the last descendant.
    last = {i: stack["index"][lp] for i, lp in zip(stack["index"].to_list(), stack["last"].to_list(), strict=True)}
    assert last[1] == 0 and last[2] == 3 and last[4] == 5 and last[8] == 9 and last[10] == 10


def test_callstack_compat_reproduces_hta_walk(tmp_path: Path) -> None:
    """HTA 0.6.1's CallGraph on this trace (run by hand) gives, per file index, (depth, parent):
    outer (0, root), select (1, outer), as_strided (1, item), item (0, root), dense (3, select2),
    select2 (2, as_strided), later (1, item), child (2, later), cudaLaunchKernel (3, child).
    Its comparison is not a total order where zero-length events meet ends and starts at one
    time (11 and 12 here), and its stack pops the top at any end, so "outer" is closed early and
    "item" stays open over "later". The default nesting keeps everything inside "outer"."""
    events = [
        cpu_op("outer", 0, 100),
        cpu_op("select", 10, 1),
        cpu_op("as_strided", 11, 0),
        cpu_op("item", 11, 1),
        cpu_op("dense", 12, 0),
        cpu_op("select2", 12, 1),
        cpu_op("later", 20, 10),
        cpu_op("child", 21, 8),
        runtime("cudaLaunchKernel", 22, 2, 1),
        kernel("k", 30, 5, corr=1),
    ]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))

    def nesting(compat: bool) -> dict[int, tuple[int, int | None]]:
        stack = callstack.build(prepare(traces, CommonOptions(scope=Scope(hta_compat=compat))).events, compat)
        by_pos = dict(zip(stack["pos"].to_list(), stack["index"].to_list(), strict=True))
        rows = zip(stack["index"].to_list(), stack["depth"].to_list(), stack["parent"].to_list(), strict=True)
        return {i: (d, by_pos[p] if p is not None else None) for i, d, p in rows}

    assert nesting(True) == {
        0: (0, None),
        1: (1, 0),
        2: (1, 3),
        3: (0, None),
        4: (3, 5),
        5: (2, 2),
        6: (1, 3),
        7: (2, 6),
        8: (3, 7),
    }
    assert nesting(False) == {
        0: (0, None),
        1: (1, 0),
        2: (2, 3),
        3: (1, 0),
        4: (2, 5),
        5: (1, 0),
        6: (1, 0),
        7: (2, 6),
        8: (3, 7),
    }


def test_callstack_helpers(tmp_path: Path) -> None:
    """A [0, 100] > B [10, 50] > C [20, 30] (runtime corr 1 → kernel 5 µs); A > D [60, 90]
    (runtime corr 2 → kernel 7 µs, inside D). Ancestors at depth 1: B for B and C, D for D."""
    events = [
        cpu_op("A", 0, 100),
        cpu_op("B", 10, 40, cat="user_annotation"),
        runtime("cudaLaunchKernel", 20, 10, 1),
        cpu_op("D", 60, 30),
        runtime("cudaLaunchKernel", 70, 5, 2),
        kernel("k1", 40, 5, corr=1),
        kernel("k2", 80, 7, corr=2),
    ]
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    prepared = prepare(traces, CommonOptions()).events
    stack = callstack.build(prepared)
    index = stack["index"].to_list()
    pos_to_index = dict(zip(stack["pos"].to_list(), index, strict=True))
    anc = callstack.ancestor_at_depth(stack, 1).to_list()
    assert {i: pos_to_index.get(a) if a is not None else None for i, a in zip(index, anc, strict=True)} == {
        0: None,
        1: 1,
        2: 1,
        3: 3,
        4: 3,
    }
    links = callstack.device_links(prepared, stack)
    assert sorted(
        zip(links["index"].to_list(), (pos_to_index[p] for p in links["host_pos"].to_list()), strict=True)
    ) == [(5, 2), (6, 4)]
    per_call = links.group_by("host_pos").agg(gpu=pl.col("dur").sum()).rename({"host_pos": "pos"})
    totals = dict(zip(index, callstack.subtree_sum(stack, per_call, "gpu").to_list(), strict=True))
    assert totals == {0: 12.0, 1: 5.0, 2: 5.0, 3: 7.0, 4: 7.0}
    is_op = stack["cat"].cast(pl.Utf8) == "cpu_op"
    nearest = callstack.nearest_ancestor(stack, is_op).to_list()
    # The runtime under B (an annotation) has A as its closest cpu_op; the one under D has D.
    assert {i: pos_to_index.get(n) if n is not None else None for i, n in zip(index, nearest, strict=True)} == {
        0: None,
        1: 0,
        2: 0,
        3: 0,
        4: 3,
    }


def test_callstack_speed_on_largest_shared_trace(load_shared: Any) -> None:
    traces = load_shared("df_index_resolver")
    events = prepare(traces, CommonOptions(scope=Scope(steps=Steps("all")))).events
    start = time.perf_counter()
    stack = callstack.build(events, link_backward=True)
    elapsed = time.perf_counter() - start
    assert stack.height > 80_000
    assert elapsed < 2.0, f"call stacks took {elapsed:.2f} s"


def test_top_by_gpu_self_sums_ranks_and_drops_cpu_only_names() -> None:
    """mm 600 + 750 = 1350 first; comms 600 + 600 = 1200; relu 0 on both ranks is left out."""
    table = pl.DataFrame(
        {
            "rank": [0, 1, 0, 1, 0, 1],
            "name": ["aten::mm", "aten::mm", "comms", "comms", "aten::relu", "aten::relu"],
            "gpu_self_us": [600.0, 750.0, 600.0, 600.0, 0.0, 0.0],
        }
    )
    top = ops.top_by_gpu_self(table, n=10)
    assert top.rows() == [("aten::mm", 1350.0), ("comms", 1200.0)]
    assert ops.top_by_gpu_self(table, n=1).rows() == [("aten::mm", 1350.0)]


@pytest.mark.parametrize("compat", [False, True])
def test_over_a_dataset_the_tree_is_built_a_rank_at_a_time(tmp_path: Path, compat: bool) -> None:
    """Over an ingested job the ops table keeps no rank's events and equals the loaded job's."""
    from kineto_util import traces_of
    from ranks_jobs import nccl_rank

    from htatui.jobs.ingest import ingest
    from htatui.jobs.load import load_traces

    (tmp_path / "job").mkdir()
    direct = traces_of(tmp_path / "job", *(nccl_rank(r) for r in range(3)))
    ingest([tmp_path / "job"], tmp_path / "ds", max_workers=1)
    stored = load_traces([tmp_path / "ds"])
    options = OpsOptions(scope=Scope(hta_compat=compat))
    table = ops.compute(stored, options)
    assert not any(rank.loaded for rank in stored.ranks.values())
    assert table.equals(ops.compute(direct, options))
    assert sorted(table["rank"].unique().to_list()) == [0, 1, 2]
