"""The Ops screen's performance model: `f` adds the model's columns and draws the roofline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from polars.testing import assert_frame_equal
from textual.pilot import Pilot
from tui_helpers import make_app, press, ready

from htatui.analysis.views import ops
from htatui.trace import TraceSet
from htatui.tui.screens.ops import BARS_TITLE, NO_ROOFLINE
from htatui.tui.widgets.chart import Chart
from htatui.tui.widgets.status_bar import page_keys
from htatui.tui.widgets.table_pane import TablePane

OPS_KEY = page_keys()["ops"]
SnapCompare = Callable[..., bool]


@pytest.fixture(scope="module")
def resnet(load_shared: Callable[[str], TraceSet]) -> TraceSet:
    return load_shared("h100_resnet_eager")


async def test_roofline_key(resnet: TraceSet) -> None:
    """`f` on the H100 ResNet: the table is `report --view ops --group-by shape --flops`, the
    chart the roofline of the dtype holding most self GPU time (bf16 under autocast, on an H100
    SXM: 989.4 TFLOP/s, 3.35 TB/s) with the 12 cache-resident rows marked, and the table's
    title the coverage; `f` again goes back to the bars."""
    app = make_app(resnet, "h100_resnet_eager")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await press(pilot, OPS_KEY, "f")
        table = app.screen.query_one("#ops-main", TablePane).table
        assert_frame_equal(table.source, ops.compute(resnet, ops.OpsOptions(group_by="shape", flops=True)))
        chart = app.screen.query_one("#ops-chart", Chart)
        assert chart.title.startswith("Roofline: 989.4 TFLOP/s, 3.35 TB/s;")
        # The rows above their roof are counted and drawn apart; the page gives the coverage.
        assert chart.title.endswith("12 above their roof (flag)")
        assert ("above roof (flag)", "warning", "×") in chart.legend
        assert "coverage: rank 0 98.0 % of 13.8 ms GPU time modelled" in str(table.note)
        await press(pilot, "f")
        assert chart.title == BARS_TITLE
        assert_frame_equal(table.source, ops.compute(resnet, ops.OpsOptions()))


async def test_roofline_without_shapes_says_why(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, OPS_KEY, "f")
        chart = app.screen.query_one("#ops-chart", Chart)
        assert chart._empty == NO_ROOFLINE


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_roofline_snapshot(snap_compare: SnapCompare, resnet: TraceSet, size: tuple[int, int]) -> None:
    """The roofline of h100_resnet_eager with the chart focused and maximized (`z`)."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await press(pilot, OPS_KEY, "f")
        pilot.app.screen.query_one("#ops-chart", Chart).focus()
        await press(pilot, "z")

    assert snap_compare(make_app(resnet, "h100_resnet_eager"), terminal_size=size, run_before=run_before)
