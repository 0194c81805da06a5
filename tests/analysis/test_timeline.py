"""Timeline binning: a hand-made trace drawn as text and checked cell by cell.

The window [0, 100) µs in 10 cells makes each cell 10 µs, so every cell's type and shade can be
worked out by hand from the events below.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from kineto_util import cpu_op, device, kernel, runtime, step, traces_of

from htatui.analysis.core.intervals import busy_time
from htatui.analysis.timeline import events as tle
from htatui.analysis.timeline import index as tl
from htatui.text import timeline as timeline_text
from htatui.text.timeline import details_lines
from htatui.trace import TraceSet


def hand_trace(tmp_path: Path) -> TraceSet:
    return traces_of(
        tmp_path,
        [
            step(1, 0, 100),  # thread 1, depth 0: every cell, annotation
            cpu_op("aten::mm", 10, 30),  # depth 1: cells 1-3
            runtime("cudaLaunchKernel", 20, 5, 1),  # depth 2: half of cell 2 → upper case
            runtime("cudaLaunchKernel", 52, 3, 2),  # depth 1: 3/10 of cell 5 → lower case
            device("gpu_memcpy", "Memcpy HtoD", 0, 10),  # stream 7: all of cell 0
            kernel("gemm", 30, 40, corr=1),  # stream 7: cells 3-6
            device("gpu_memset", "Memset (Device)", 71, 2),  # stream 7 cell 7: 0.2 memset …
            kernel("elementwise", 76, 4),  # … and 0.4 compute: compute wins, 0.6 busy → upper
            kernel("ncclDevKernel_AllReduce", 75, 20, stream=20, corr=2),  # cells 7 (half), 8, 9 (half)
        ],
    )


# label width is 11 ("thread 1 +1"), so width 22 leaves 10 cells.
EXPECTED = [
    "thread 1    AAAAAAAAAA",
    "thread 1 +1  OOO r    ",
    "thread 1 +2   R       ",
    "stream 7    M..CCCCC..",
    "stream 20   .......NNN",
]


def test_text_rendering_cell_by_cell(tmp_path: Path) -> None:
    traces = hand_trace(tmp_path)
    lines = timeline_text.render(traces, [0], 0.0, 100.0, 22, tl.TimelineOptions(max_depth=3))
    assert lines[0] == "0–100 µs · 10 µs/cell"
    assert lines[1:] == EXPECTED
    assert all(len(line) <= 22 for line in lines)


def test_cell_types_and_fractions(tmp_path: Path) -> None:
    traces = hand_trace(tmp_path)
    rows = tl.bin_window(traces, [0], 0.0, 100.0, 10, tl.TimelineOptions(max_depth=3))
    stream7 = rows[3]
    assert stream7.spec.label == "stream 7"
    assert stream7.types == [tl.MEMCPY, None, None, *[tl.COMPUTE] * 5, None, None]
    assert stream7.fractions[7] == pytest.approx(0.6)
    assert stream7.fractions[0] == pytest.approx(1.0)
    stream20 = rows[4]
    assert stream20.types[7:] == [tl.COMM] * 3
    assert stream20.fractions[7:] == pytest.approx([0.5, 1.0, 0.5])


def test_zoomed_window_and_depth_limit(tmp_path: Path) -> None:
    traces = hand_trace(tmp_path)
    # [20, 30) in 4 cells of 2.5 µs: the launch covers 20-25 → two full cells, then idle.
    lines = timeline_text.render(traces, [0], 20.0, 30.0, 16, tl.TimelineOptions(max_depth=3, rows=("threads",)))
    assert lines[1:] == ["thread 1    AAAA", "thread 1 +1 OOOO", "thread 1 +2 RR  "]
    # depth 1 shows only the top-level rows of each thread.
    lines = timeline_text.render(traces, [0], 0.0, 100.0, 20, tl.TimelineOptions(max_depth=1))
    assert [line[:9].rstrip() for line in lines[1:]] == ["thread 1", "stream 7", "stream 20"]


def test_queue_counter_sparkline(tmp_path: Path) -> None:
    traces = hand_trace(tmp_path)
    rows = tl.bin_window(traces, [0], 0.0, 100.0, 10, tl.TimelineOptions(rows=("queue",)))
    # Launch 1 queues at 20 and its kernel starts at 30 (stream 7); launch 2 queues at 52 and
    # starts at 75 (stream 20): one operation waiting in cells 2 and 5-7; no value before a
    # stream's first point.
    by_label = {row.spec.label: row for row in rows}
    assert by_label["queue s7"].values[1:4] == [None, 1.0, 0.0]
    assert by_label["queue s20"].values[4:8] == [None, 1.0, 1.0, 1.0]
    text = "".join(timeline_text.cell_glyph(by_label["queue s20"], c, 1.0) for c in range(10))
    assert text == "     ███  "


def test_cursor_details_and_links(tmp_path: Path) -> None:
    traces = hand_trace(tmp_path)
    index = tl.build_index(traces, 0)
    stream7 = next(i for i, s in enumerate(index.rows) if s.kind == tl.STREAM and s.key == 7)
    gemm = tle.event_at(index, stream7, 40.0, 50.0)
    assert gemm is not None and gemm["name"] == "gemm"
    info = tle.details(index, gemm)
    assert (info.start_us, info.dur_us, info.stream, info.correlation) == (30.0, 40.0, 7, 1)
    assert info.launch == "cudaLaunchKernel" and info.op == "aten::mm"
    assert details_lines(info) == [
        "gemm",
        "start 30 µs · dur 40 µs · end 70 µs",
        "stream 7 · correlation 1",
        "launched by cudaLaunchKernel in aten::mm",
    ]
    launch = tle.linked_event(index, gemm)
    assert launch is not None and (launch["ts"], launch["depth"]) == (20.0, 2)
    back = tle.linked_event(index, launch)
    assert back is not None and back["name"] == "gemm"
    op = tle.event_at(index, next(i for i, s in enumerate(index.rows) if s.depth == 1), 10.0, 20.0)
    assert op is not None and tle.details(index, op).kernels == ["gemm"]
    assert tle.event_at(index, stream7, 80.0, 90.0) is None
    # A launch row without times opens at its launch-to-kernel span.
    assert tle.correlation_window(traces, 0, 1) == (20.0, 70.0)
    assert tle.correlation_window(traces, 0, 99) is None


def test_steps_and_several_ranks(tmp_path: Path) -> None:
    traces = traces_of(
        tmp_path,
        [step(1, 0, 50), step(2, 50, 50), kernel("gemm", 0, 100)],
        [step(1, 0, 100), kernel("gemm", 50, 50)],
    )
    index = tl.build_index(traces, 0)
    assert index.steps.rows() == [(1, 0.0, 50.0), (2, 50.0, 100.0)]
    lines = timeline_text.render(traces, [0, 1], 0.0, 100.0, 20, tl.TimelineOptions(max_depth=1))
    assert lines[1:] == ["r0 thread 1 AAAAAAAA", "r0 stream 7 CCCCCCCC", "r1 thread 1 AAAAAAAA", "r1 stream 7 ....CCCC"]


def test_bad_windows(tmp_path: Path) -> None:
    traces = hand_trace(tmp_path)
    with pytest.raises(tl.TimelineError, match="empty"):
        timeline_text.render(traces, [0], 50.0, 50.0, 40)
    with pytest.raises(tl.TimelineError, match="too narrow"):
        timeline_text.render(traces, [0], 0.0, 100.0, 10)
    with pytest.raises(tl.TimelineError, match="rank 3"):
        timeline_text.render(traces, [3], 0.0, 100.0, 40)


def test_busy_time_matches_merged_kernels_on_a_real_trace(load_shared: Callable[[str], TraceSet]) -> None:
    """Σ busy fraction × cell width on a stream row is the stream's GPU busy time in the window
    (merged kernel, copy and memset intervals clipped to it), for a window in the middle of
    nccl_parser_config's second step."""
    traces = load_shared("nccl_parser_config")
    rank = traces.rank_ids[0]
    start, end, cells = 251_300.0, 262_300.0, 110
    rows = tl.bin_window(traces, [rank], start, end, cells, tl.TimelineOptions(rows=("streams",)))
    events = traces.ranks[rank].events
    for row in rows:
        gpu = events.filter(
            pl.col("cat").cast(pl.Utf8).is_in(["kernel", "gpu_memcpy", "gpu_memset"])
            & (pl.col("stream") == row.spec.key)
            & (pl.col("ts") < end)
            & (pl.col("end") > start)
        ).select(pl.col("ts").clip(start, end), pl.col("end").clip(start, end))
        expected = float(busy_time(gpu, []).item()) if gpu.height else 0.0
        assert sum(row.fractions) * (end - start) / cells == pytest.approx(expected, rel=1e-9, abs=1e-6)
    assert any(sum(row.fractions) > 0 for row in rows)


def test_memory_bandwidth_counter(tmp_path: Path) -> None:
    traces = traces_of(
        tmp_path,
        [
            step(1, 0, 100),
            step(2, 100, 100),  # the last step is dropped by the views, as in HTA
            {
                **device("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 20, 10, corr=5),
                "args": {"device": 0, "stream": 7, "correlation": 5, "bytes": 1000, "memory bandwidth (GB/s)": 2.0},
            },
            runtime("cudaMemcpyAsync", 10, 5, 5),
        ],
    )
    rows = tl.bin_window(traces, [0], 0.0, 50.0, 5, tl.TimelineOptions(rows=("membw",)))
    assert [row.spec.label for row in rows] == ["bw Memcpy HtoD"]
    # 2 GB/s from 20 to 30 µs: cells [20, 30) hold it; [30, 40) starts at 0 after it ends.
    assert rows[0].values == [None, None, 2.0, 0.0, 0.0]
