"""rank_figures: info's and the dataset summary's per-rank figures, derived by hand from a tiny trace."""

from __future__ import annotations

from pathlib import Path

from kineto_util import device, kernel, step, traces_of
from memory_util import memory_event


def test_span_kernels_streams_memory_and_steps(tmp_path: Path) -> None:
    from htatui.analysis.core.rank_figures import rank_figures

    events = [
        step(1, 0, 100),
        step(2, 100, 50),
        kernel("gemm", 10, 5, stream=7),
        device("gpu_memcpy", "Memcpy HtoD", 20, 5, stream=7),
        kernel("nccl", 120, 40, stream=9),
        memory_event(170, 512, 512, 1),  # an instant event: not part of the span
    ]
    figures = rank_figures(traces_of(tmp_path, events).ranks[0].events)
    assert figures.span_us == 160.0  # first start 0, last end 120 + 40
    assert figures.kernels == 2
    assert figures.streams == 2  # 7 and 9
    assert figures.memory_events == 1
    assert figures.iterations == [1, 2]


def test_no_complete_events_has_zero_span(tmp_path: Path) -> None:
    from htatui.analysis.core.rank_figures import rank_figures

    figures = rank_figures(
        traces_of(tmp_path, [memory_event(5, 512, 512, 1), memory_event(9, 512, 512, 2)]).ranks[0].events
    )
    assert (figures.span_us, figures.kernels, figures.streams, figures.memory_events) == (0.0, 0, 0, 2)
    assert figures.iterations == []
