"""SVG snapshots of every view at 80x24 and 120x40 (pytest --snapshot-update to regenerate)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_helpers import make_app, press, ready

from htatui.trace import TraceSet
from htatui.tui.app import VIEWS
from htatui.tui.widgets.status_bar import page_keys

SnapCompare = Callable[..., bool]
SIZES = [(80, 24), (120, 40)]


def visit(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        if keys:
            await press(pilot, *keys)

    return run_before


# The Memory page shows only for traces with [memory] events: tests/tui/test_memory_screen.py; the
# pages past the tenth have no number key: tests/tui/test_critical_path_screen.py.
TRACE_VIEWS = [mode for mode, _ in VIEWS if mode != "memory" and mode in page_keys()]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("number", range(1, len(TRACE_VIEWS) + 1), ids=TRACE_VIEWS)
def test_view(snap_compare: SnapCompare, small_traces: TraceSet, number: int, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(small_traces), terminal_size=size, run_before=visit(str(number)))


def test_help(snap_compare: SnapCompare, small_traces: TraceSet) -> None:
    assert snap_compare(make_app(small_traces), terminal_size=(80, 24), run_before=visit("question_mark"))


def test_rank_picker(snap_compare: SnapCompare, small_traces: TraceSet) -> None:
    assert snap_compare(make_app(small_traces), terminal_size=(80, 24), run_before=visit("p", "j"))


def test_cpu_only_says_why(snap_compare: SnapCompare, cpu_only_traces: TraceSet) -> None:
    app = make_app(cpu_only_traces, name="cpu_only")
    assert snap_compare(app, terminal_size=(80, 24), run_before=visit("3"))


def test_filtered_kernels_light_theme(snap_compare: SnapCompare, small_traces: TraceSet) -> None:
    app = make_app(small_traces, theme="htatui-light")
    assert snap_compare(app, terminal_size=(80, 24), run_before=visit("3", "slash", *"gemm", "enter"))


def test_256_theme(snap_compare: SnapCompare, small_traces: TraceSet) -> None:
    app = make_app(small_traces, theme="htatui-256")
    assert snap_compare(app, terminal_size=(80, 24), run_before=visit("2"))


def test_patterns_typed_operator(snap_compare: SnapCompare, small_traces: TraceSet) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await press(pilot, page_keys()["patterns"])
        pilot.app.screen.query_one("#input-operator").focus()
        await press(pilot, *"forward", "enter")

    assert snap_compare(make_app(small_traces), terminal_size=(80, 24), run_before=run_before)


def test_dataset_first_screen(
    snap_compare: SnapCompare, trace_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A dataset's first screen comes from its summary; the stragglers pane says how to read the ranks."""
    from htatui.jobs.ingest import ingest
    from htatui.jobs.load import load_traces

    target = tmp_path_factory.mktemp("snap") / "small.ds"
    ingest([trace_root / "small"], target, max_workers=1)
    app = make_app(load_traces([target]), name="small.ds")
    assert snap_compare(app, terminal_size=(120, 40), run_before=visit())
