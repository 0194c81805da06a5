"""The Ops screen's call tree: `e` shows it, `a` lists kernels, `o` jumps to a kernel's launcher."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
from polars.testing import assert_frame_equal
from textual.pilot import Pilot
from tui_helpers import make_app, press, ready

from htatui.analysis.model import job_tree
from htatui.analysis.views import op_tree, ops
from htatui.trace import TraceSet
from htatui.tui.widgets.op_tree import OpTree
from htatui.tui.widgets.status_bar import page_keys
from htatui.tui.widgets.table_pane import TablePane

OPS_KEY = page_keys()["ops"]
SnapCompare = Callable[..., bool]


async def test_tree_kernel_rows_and_launcher_jump(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, OPS_KEY)
        table = app.screen.query_one("#ops-main", TablePane).table
        assert set(table.source["kind"].unique().to_list()) <= set(ops.chosen_kinds("host"))
        # `a`: the device rows too, as `report --view ops --kinds host,kernel,memcpy,memset`.
        await press(pilot, "a")
        expected = ops.compute(small_traces, ops.OpsOptions(kinds="host,kernel,memcpy,memset"))
        assert_frame_equal(table.source, expected)
        # Put the cursor on the all-reduce kernel of rank 0 and jump to its launcher.
        kernel_row = table.shown.with_row_index().filter(
            (pl.col("kind") == "kernel") & pl.col("name").str.starts_with("ncclDevKernel") & (pl.col("rank") == 0)
        )["index"][0]
        table.move_cursor(row=kernel_row)
        await press(pilot, "o")
        tree = app.screen.query_one(OpTree)
        assert tree.display and tree.has_focus and not app.screen.query_one("#ops-main", TablePane).display
        selected = tree.selected_row()
        assert selected is not None and (selected["rank"], selected["name"]) == (0, "record_param_comms")
        nodes = op_tree.build(job_tree.tree(small_traces, ops.OpsOptions()))
        # Steps 1-2 of the three (the default scope): 2 × 200 µs of all-reduce (600 µs with --steps all).
        assert selected["gpu_total_us"] == nodes.filter(pl.col("node") == selected["node"])["gpu_total_us"][0] == 400.0
        # In the tree, `o` on a kernel leaf goes to its parent op; `e` goes back to the table.
        await press(pilot, "l", "j")
        leaf = tree.selected_row()
        assert leaf is not None and leaf["kind"] == "kernel" and leaf["parent_node"] == selected["node"]
        await press(pilot, "o")
        back = tree.selected_row()
        assert back is not None and back["node"] == selected["node"]
        await press(pilot, "e")
        assert app.screen.query_one("#ops-main", TablePane).display and not tree.display


async def test_shapes_key_groups_by_input_shape(small_traces: TraceSet) -> None:
    app = make_app(small_traces)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await press(pilot, OPS_KEY, "i")
        table = app.screen.query_one("#ops-main", TablePane).table
        expected = ops.compute(small_traces, ops.OpsOptions(group_by="shape"))
        assert_frame_equal(table.source, expected)
        assert "input_dims" in [c.key for c in table.columns_spec]
        await press(pilot, "i")
        assert_frame_equal(table.source, ops.compute(small_traces, ops.OpsOptions()))


def test_tree_snapshot(snap_compare: SnapCompare, small_traces: TraceSet) -> None:
    """80x24: two ranks; rank 0 opened down to its all-reduce kernel (the cursor's row)."""
    nodes = op_tree.build(job_tree.tree(small_traces, ops.OpsOptions()))
    leaf = nodes.filter((pl.col("rank") == 0) & pl.col("name").str.starts_with("ncclDevKernel"))["node"][0]

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await press(pilot, OPS_KEY, "e")
        assert pilot.app.screen.query_one(OpTree).reveal(leaf)
        await press(pilot)

    assert snap_compare(make_app(small_traces), terminal_size=(80, 24), run_before=run_before)
