"""7 Ops: the operator table (as `prof.key_averages()`) and the call tree of ops."""

from __future__ import annotations

from typing import ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis.registry import PageTable
from htatui.analysis.views import op_tree
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.chart import BarRows, Chart, Series, roofline
from htatui.tui.widgets.op_tree import DEVICE_KINDS, OpTree
from htatui.tui.widgets.table import ColumnHint
from htatui.tui.widgets.table_pane import TablePane

OPS = PageTable("ops")
TOP_BARS = PageTable("ops", "top-bars")
TREE = PageTable("op-tree")

HOST_ROWS = "host"
WITH_DEVICE_ROWS = "host,kernel,memcpy,memset"
"""The `a` table: host rows and the work they launched (GPU annotations are spans, not work)."""
NO_OPS = "No CPU operators (cpu_op events) on the chosen ranks; was the profiler's CPU activity recorded?"
BARS_TITLE = "Top 10 operators by self GPU time (µs, all chosen ranks)"
NO_ROOFLINE = (
    "No op has FLOPs from its input shapes on a known device: the trace needs record_shapes=True and "
    "a GPU in the peak table (docs/semantics-perf-model.md)."
)


class OpsScreen(PageScreen):
    PAGE: ClassVar[str] = "ops"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        OPS: Pane(
            "Operators",
            NO_OPS,
            sort="gpu_self_us",
            row_limit=300,
            columns={"name": ColumnHint(width=30)},
        ),
    }
    VIEW_TITLE: ClassVar[str] = "Ops"
    HELP: ClassVar[str] = (
        "Per rank and operator, as `prof.key_averages()` prints it (over the scope's steps; "
        "`--steps all` counts every step, as the profiler does): calls, CPU time with and "
        "without the operators it calls (*self*), and the GPU time of the kernels, copies and "
        "memsets it launched itself (*gpu self*) or through the operators beneath it (*gpu total*). "
        "Sorted by self GPU time; `s` picks another column. Rows have a *kind*: op, annotation, "
        "runtime, driver, kernel-launcher; `a` adds the device rows (kernels, copies, memsets: "
        "`report --view ops --kinds host,kernel,memcpy,memset`). "
        "`e` switches to the **call tree** of ops and annotations (self/total GPU and CPU time per "
        "node, biggest GPU total first; enter or `l` expands). `o` on a kernel row jumps to the op "
        "that launched it (most of its time), on an op row to its heaviest place in the tree. `i` "
        "splits the rows by input shapes (traces recorded with record_shapes). The "
        "bars show the operators with the most self GPU time over the chosen ranks. `f` adds the "
        "**performance model** (rows by input shape, `report --view ops --group-by shape --flops`): "
        "FLOPs and bytes per call from the shapes, achieved TFLOP/s and TB/s, the share of the "
        "roofline and whether memory or compute bounds it, and its *headroom* (GPU time the op "
        "would not need at the roof: `s` sorts by it), and a *flag* on a row above its roof (`cache-resident`: its "
        "bytes fit in the cache; `model?`: more work than the kernels could do); the table's sentence gives the "
        "*coverage* (the share of GPU time the model covers). The chart becomes the **roofline** (log-log: one "
        "dot per op shape, `×` for a flagged one; the roofs of the device's bandwidth and of the dtype peak that "
        "holds the most self GPU time, on matrix and on vector units)."
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
            "f",
            "toggle_roofline",
            "Roofline",
            show=False,
            tooltip="FLOPs and bytes from input shapes; the roofline chart",
            id="ops.roofline",
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
        self.tree_shown = False
        self.tree_nodes: pl.DataFrame | None = None

    @property
    def device_rows(self) -> bool:
        return self.view_options["ops"].kinds == WITH_DEVICE_ROWS  # type: ignore[attr-defined, no-any-return]

    @property
    def by_shape(self) -> bool:
        return self.view_options["ops"].group_by == "shape"  # type: ignore[attr-defined, no-any-return]

    @property
    def roofline_shown(self) -> bool:
        options = self.view_options["ops"]
        return bool(options.flops and options.group_by == "shape")  # type: ignore[attr-defined]

    def compose_body(self) -> ComposeResult:
        yield self.pane(OPS)
        tree = OpTree(id="ops-tree")
        tree.display = False
        yield tree
        yield Chart(BARS_TITLE, id="ops-chart")

    def draw(self, result: PageResult) -> None:
        self.tree_nodes = op_tree.nodes_of(result.frame("op-tree"))
        self.query_one(OpTree).show(self.tree_nodes)
        if self.roofline_shown:
            self._show_roofline(result.frame("ops"))
        else:
            self._show_chart(result.frame("ops", "top-bars"), result.frame("ops").height)

    def _show_pane(self, tree: bool) -> None:
        self.tree_shown = tree
        pane = self.query_one("#ops-main", TablePane)
        op_tree_widget = self.query_one(OpTree)
        pane.display = not tree
        op_tree_widget.display = tree
        self.query_one("#ops-chart", Chart).display = not tree  # the tree gets the whole body
        (op_tree_widget if tree else pane.table).focus()

    def action_toggle_tree(self) -> None:
        self._show_pane(not self.tree_shown)

    def action_toggle_shapes(self) -> None:
        self.set_knob("group_by", "name" if self.by_shape else "shape")
        self.request_analysis()

    def action_toggle_roofline(self) -> None:
        shown = self.roofline_shown
        self.set_knob("flops", not shown)
        self.set_knob("group_by", "name" if shown else "shape")
        self.request_analysis()

    def action_toggle_device_rows(self) -> None:
        self.set_knob("kinds", HOST_ROWS if self.device_rows else WITH_DEVICE_ROWS)
        self.request_analysis()
        self.notify("kernels, copies and memsets listed" if self.device_rows else "host rows only", timeout=2)

    def action_launcher(self) -> None:
        """From a kernel row (table or tree), the op that launched it; from an op, its node."""
        nodes = self.tree_nodes
        if nodes is None:
            return
        tree = self.query_one(OpTree)
        row = tree.selected_row() if self.tree_shown else self.query_one("#ops-main", TablePane).table.selected_row()
        if row is None:
            return
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

    def _show_roofline(self, table: pl.DataFrame) -> None:
        """Ops with a model and a known device, placed by intensity and achieved rate; the roofs
        are the device's bandwidth and the dtype peak under which most self GPU time ran."""
        chart = self.query_one("#ops-chart", Chart)
        placed = table.filter(
            (pl.col("flop_per_byte") > 0) & (pl.col("tflop_per_s") > 0) & pl.col("peak_tflop_per_s").is_not_null()
        )
        if placed.height == 0:
            chart.title = "Roofline"
            chart.show(None, NO_ROOFLINE)
            return

        # The roofs of the peak that holds the most self GPU time (wrappers such as an autocast
        # aten::conv2d with float inputs own none of it), on matrix units and on vector units.
        def dominant(rows: pl.DataFrame) -> pl.DataFrame:
            return (
                rows.group_by("peak_tflop_per_s", "memory_tb_per_s")
                .agg(pl.col("gpu_self_us").sum())
                .sort(["gpu_self_us", "peak_tflop_per_s"], descending=True)
            )

        matrix = placed.filter(pl.col("unit") == "matrix")
        roofs = dominant(matrix if matrix.height else placed)
        peak, bandwidth = float(roofs["peak_tflop_per_s"][0]), float(roofs["memory_tb_per_s"][0])
        vector = dominant(placed.filter((pl.col("unit") == "vector") & (pl.col("memory_tb_per_s") == bandwidth)))
        vector_peak = float(vector["peak_tflop_per_s"][0]) if vector.height else None
        flagged = placed["flag"].is_not_null()
        above = int(flagged.sum())
        chart.title = f"Roofline: {peak:g} TFLOP/s, {bandwidth:g} TB/s; {placed.height} op shapes" + (
            f", {above} above their roof (flag)" if above else ""
        )
        chart.show(
            roofline(
                placed["flop_per_byte"].to_list(),
                placed["tflop_per_s"].to_list(),
                peak=peak,
                bandwidth=bandwidth,
                flagged=flagged.to_list(),
                vector_peak=vector_peak if vector_peak != peak else None,
            )
        )

    def _show_chart(self, top: pl.DataFrame, rows: int) -> None:
        chart = self.query_one("#ops-chart", Chart)
        chart.title = BARS_TITLE
        if top.height == 0:
            chart.show(None, "" if rows == 0 else "None of these operators launched GPU work.")
            return
        chart.show(BarRows(top["name"].to_list(), [Series("gpu self", top["gpu_self_us"].to_list(), "hta-compute")]))
