"""7 Ops: the operator table (as `prof.key_averages()`) and the call tree of ops."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis import op_tree, ops
from htatui.analysis.common import CommonOptions
from htatui.trace import TraceSet
from htatui.tui.screens.base import ViewScreen
from htatui.tui.widgets.chart import BarRows, Chart, Series
from htatui.tui.widgets.op_tree import DEVICE_KINDS, OpTree
from htatui.tui.widgets.table import Column
from htatui.tui.widgets.table_pane import TablePane

COLUMNS = [
    Column("name", "operator", "text", width=30),
    Column("rank", "rank", "int", width=4),
    Column("count", "calls", "int"),
    Column("gpu_self_us", "gpu self (µs)", "us"),
    Column("gpu_total_us", "gpu total (µs)", "us"),
    Column("cpu_self_us", "cpu self (µs)", "us"),
    Column("cpu_total_us", "cpu total (µs)", "us"),
    Column("kind", "kind", "text", width=15),
]

TOP_BARS = 10
WITH_DEVICE_ROWS = "host,kernel,memcpy,memset"
"""The `a` table: host rows and the work they launched (GPU annotations are spans, not work)."""
NO_OPS = "No CPU operators (cpu_op events) on the chosen ranks; was the profiler's CPU activity recorded?"


@dataclass(frozen=True)
class OpsResult:
    """The host table, the table with device rows too, and the call tree's nodes."""

    host: pl.DataFrame
    every: pl.DataFrame
    nodes: pl.DataFrame


class OpsScreen(ViewScreen):
    VIEW_TITLE: ClassVar[str] = "Ops"
    HELP: ClassVar[str] = (
        "Per rank and operator, as `prof.key_averages()` prints it (every step counted, the last "
        "one included, as the profiler does): calls, CPU time with and "
        "without the operators it calls (*self*), and the GPU time of the kernels, copies and "
        "memsets it launched itself (*gpu self*) or through the operators beneath it (*gpu total*). "
        "Sorted by self GPU time; `s` picks another column. Rows have a *kind*: op, annotation, "
        "runtime, driver, kernel-launcher; `a` adds the device rows (kernels, copies, memsets). "
        "`e` switches to the **call tree** of ops and annotations (self/total GPU and CPU time per "
        "node, biggest GPU total first; enter or `l` expands). `o` on a kernel row jumps to the op "
        "that launched it (most of its time), on an op row to its heaviest place in the tree. `i` "
        "splits the rows by input shapes (traces recorded with record_shapes). The "
        "bars show the operators with the most self GPU time over the chosen ranks."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "toggle_tree", "Tree", tooltip="Show the call tree or the table", id="ops.tree"),
        Binding("a", "toggle_device_rows", "Kernels", tooltip="List kernels, copies and memsets too", id="ops.all"),
        Binding(
            "o",
            "launcher",
            "Launcher",
            show=False,
            tooltip="Jump to the op that launched the kernel",
            id="ops.launcher",
        ),
        Binding(
            "i",
            "toggle_shapes",
            "Shapes",
            show=False,
            tooltip="One row per input shape (record_shapes)",
            id="ops.shapes",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.device_rows = False
        self.tree_shown = False
        self.by_shape = False
        self._result: OpsResult | None = None

    def compose_body(self) -> ComposeResult:
        yield TablePane("Operators", id="ops-table", row_limit=300)
        tree = OpTree(id="ops-tree")
        tree.display = False
        yield tree
        yield Chart(f"Top {TOP_BARS} operators by self GPU time (µs, all chosen ranks)", id="ops-chart")

    def option_values(self) -> tuple[bool]:
        return (self.by_shape,)

    def analyse(self, traces: TraceSet, common: CommonOptions) -> OpsResult:
        options = ops.OpsOptions(common.scope)
        built = ops.tree(traces, options)
        group = "shape" if self.by_shape else "name"
        every = ops.table(traces, built, ops.OpsOptions(common.scope, kinds=WITH_DEVICE_ROWS, group_by=group))
        host = every.filter(pl.col("kind").is_in(ops.chosen_kinds("host")))
        return OpsResult(host=host, every=every, nodes=op_tree.build(built))

    def show_result(self, result: OpsResult) -> None:
        self._result = result
        self._show_table()
        self.query_one(OpTree).show(result.nodes)
        self._show_chart(result.host)

    def _show_table(self) -> None:
        if self._result is None:
            return
        frame = self._result.every if self.device_rows else self._result.host
        columns = list(COLUMNS)
        if ops.SHAPE_COLUMN in frame.columns:
            columns.insert(1, Column(ops.SHAPE_COLUMN, "input shapes", "text", width=24))
        self.query_one("#ops-table", TablePane).show(frame, columns, empty=NO_OPS, sort="gpu_self_us")

    def _show_pane(self, tree: bool) -> None:
        self.tree_shown = tree
        pane = self.query_one("#ops-table", TablePane)
        op_tree_widget = self.query_one(OpTree)
        pane.display = not tree
        op_tree_widget.display = tree
        self.query_one("#ops-chart", Chart).display = not tree  # the tree gets the whole body
        (op_tree_widget if tree else pane.table).focus()

    def action_toggle_tree(self) -> None:
        self._show_pane(not self.tree_shown)

    def action_toggle_shapes(self) -> None:
        self.by_shape = not self.by_shape
        self.request_analysis()

    def action_toggle_device_rows(self) -> None:
        self.device_rows = not self.device_rows
        self._show_table()
        self.notify("kernels, copies and memsets listed" if self.device_rows else "host rows only", timeout=2)

    def action_launcher(self) -> None:
        """From a kernel row (table or tree), the op that launched it; from an op, its node."""
        if self._result is None:
            return
        tree = self.query_one(OpTree)
        row = tree.selected_row() if self.tree_shown else self.query_one("#ops-table", TablePane).table.selected_row()
        if row is None:
            return
        nodes = self._result.nodes
        if row["kind"] in DEVICE_KINDS:
            if self.tree_shown and row.get("parent_node") is not None:
                target: int | None = int(row["parent_node"])
            else:
                target = op_tree.launcher_of(nodes, int(row["rank"]), str(row["name"]), str(row["kind"]))
        else:
            same = nodes.filter(
                (pl.col("rank") == row["rank"]) & (pl.col("name") == row["name"]) & (pl.col("kind") == row["kind"])
            ).sort(["gpu_total_us", "cpu_total_us", "node"], descending=[True, True, False])
            target = int(same["node"][0]) if same.height else None
        if target is None:
            self.notify(f"No op launched {row['name']}.", severity="warning")
            return
        self._show_pane(True)
        tree.reveal(target)

    def _show_chart(self, result: pl.DataFrame) -> None:
        chart = self.query_one("#ops-chart", Chart)
        top = ops.top_by_gpu_self(result, TOP_BARS)
        if top.height == 0:
            chart.show(None, "" if result.height == 0 else "None of these operators launched GPU work.")
            return
        chart.show(BarRows(top["name"].to_list(), [Series("gpu self", top["gpu_self_us"].to_list(), "hta-compute")]))
