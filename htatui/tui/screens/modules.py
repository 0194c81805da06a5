"""Modules: time per nn.Module instance or class, and the module tree with the kernels each launched."""

from __future__ import annotations

from typing import ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from htatui.analysis.registry import PageTable
from htatui.analysis.views import modules
from htatui.tui.screens.page import PageResult, PageScreen, Pane, pane_id
from htatui.tui.widgets.op_tree import OpTree
from htatui.tui.widgets.table import ColumnHint
from htatui.tui.widgets.table_pane import TablePane

INSTANCES = PageTable("modules")
TYPES = PageTable("modules", "types")
TREE = PageTable("modules", "tree")

NO_MODULES = "No nn.Module calls: record with torch.profiler(with_modules=True) or with_stack=True."


class ModulesScreen(PageScreen):
    PAGE: ClassVar[str] = "modules"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        INSTANCES: Pane(
            "Modules (instances)",
            NO_MODULES,
            sort="gpu_total_us",
            columns={
                "module": ColumnHint(width=20),
                "type": ColumnHint(width=14, priority=3),
                "parent": ColumnHint(width=16, priority=4),
                "depth": ColumnHint(priority=4),
                "gpu_total_us": ColumnHint(priority=0),
                "host_total_us": ColumnHint(priority=0),
                "host_self_us": ColumnHint(priority=2),
                "kernels": ColumnHint(priority=2),
            },
        ),
        TYPES: Pane(
            "Module types",
            NO_MODULES,
            sort="gpu_total_us",
            columns={
                "type": ColumnHint(width=20),
                "gpu_total_us": ColumnHint(priority=0),
                "host_total_us": ColumnHint(priority=0),
                "host_self_us": ColumnHint(priority=2),
                "kernels": ColumnHint(priority=2),
            },
        ),
    }
    VIEW_TITLE: ClassVar[str] = "Modules"
    HELP: ClassVar[str] = (
        "Time per **nn.Module**, from the module events of a trace recorded with `with_modules=True` "
        "(or `with_stack=True`), over the scope's steps: per instance (`Linear_3`), its calls, host "
        "time with and without its child modules (*self*), and the GPU time of the kernels, copies and "
        "memsets launched inside it by itself (*gpu self*) or with its children (*gpu total*). Work "
        "launched outside every module (backward on the autograd thread, the optimizer) belongs to "
        "none. `t` switches to one row per module **type** (a module inside one of its own type is "
        "counted once in the totals: `report --view modules --types`). `e` switches to the **module "
        "tree** (calls merged by call path, kernels as leaves, biggest GPU total first; enter or `l` "
        "expands: `report --view modules --tree`)."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "toggle_tree", "Tree", tooltip="Show the module tree or the table", id="modules.tree"),
        Binding("t", "toggle_types", "Types", tooltip="One row per module type or per instance", id="modules.types"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.tree_shown = False
        self.types_shown = False

    def compose_body(self) -> ComposeResult:
        yield self.pane(INSTANCES)
        types = self.pane(TYPES)
        types.display = False
        yield types
        tree = OpTree(id="modules-tree")
        tree.border_title = "Module tree · µs self/total (cpu: host) · enter expands"
        tree.display = False
        yield tree

    def draw(self, result: PageResult) -> None:
        table = result.frame("modules", "tree")
        nodes = modules.nodes_of(table) if table.height else pl.DataFrame(schema=modules.NODE_SCHEMA)
        self.query_one(OpTree).show(nodes)

    def _show(self) -> None:
        instances = self.query_one(f"#{pane_id(INSTANCES)}", TablePane)
        types = self.query_one(f"#{pane_id(TYPES)}", TablePane)
        tree = self.query_one(OpTree)
        instances.display = not self.tree_shown and not self.types_shown
        types.display = not self.tree_shown and self.types_shown
        tree.display = self.tree_shown
        (tree if self.tree_shown else (types if self.types_shown else instances).table).focus()

    def action_toggle_tree(self) -> None:
        self.tree_shown = not self.tree_shown
        self._show()

    def action_toggle_types(self) -> None:
        self.types_shown = not self.types_shown
        self.tree_shown = False
        self._show()
