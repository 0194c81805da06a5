"""The call tree of ops and annotations (`htatui.analysis.views.op_tree` nodes) as a Textual Tree.

Children are added when a node is first expanded (a real trace has thousands of nodes) and are
sorted by GPU total time, then CPU total time. Each label shows calls, self / total GPU time
and self / total CPU time in µs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from htatui.analysis.model import op_events
from htatui.text.names import middle_cut
from htatui.tui.widgets.table import fmt_us

NAME_WIDTH = 32
DEVICE_KINDS = frozenset(op_events.DEVICE_KINDS)
"""Device work has no CPU time: dimmed, without it."""

NodeData = tuple[int, int]
"""(rank, node id); a rank's header row has node id -1."""


def node_label(row: dict[str, Any]) -> Text:
    """`name ×calls  gpu self/total  cpu self/total`; device leaves dimmed, without CPU time."""
    name = middle_cut(str(row["name"]), NAME_WIDTH)
    text = Text(name, style="dim" if row["kind"] in DEVICE_KINDS else "")
    if row["kind"] not in ("op", "kernel", "module"):
        text.append(f" [{row['kind']}]", style="italic dim")
    text.append(f" ×{row['count']:,}", style="bold")
    text.append(f"  gpu {fmt_us(row['gpu_self_us'])}/{fmt_us(row['gpu_total_us'])}")
    if row["kind"] not in DEVICE_KINDS:  # device work has no CPU time
        text.append(f"  cpu {fmt_us(row['cpu_self_us'])}/{fmt_us(row['cpu_total_us'])}", style="dim")
    return text


class OpTree(Tree[NodeData]):
    """The call tree; `show(nodes)` replaces its content, `reveal(rank, node)` opens the path to
    a node and puts the cursor on it."""

    DEFAULT_CSS = """
    OpTree {
        height: 1fr;
        border: none;
        border-top: solid $panel-lighten-2;
        border-title-color: $foreground-muted;
        &:focus {
            border-top: solid $primary;
            border-title-color: $foreground;
        }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False, id="optree.down"),
        Binding("k", "cursor_up", "Up", show=False, id="optree.up"),
        Binding("l", "expand_node", "Expand", show=False, id="optree.expand"),
        Binding("h", "collapse_node", "Collapse", show=False, id="optree.collapse"),
    ]

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__("Call tree", id=id)
        self.show_root = False
        self.guide_depth = 2
        self.border_title = "Call tree · µs self/total · enter expands"
        self._op_rows: dict[int, dict[str, Any]] = {}
        self._op_children: dict[tuple[int, int], list[int]] = {}
        self._op_nodes: dict[int, TreeNode[NodeData]] = {}
        self._op_filled: set[int] = set()

    def show(self, nodes: pl.DataFrame) -> None:
        self.clear()
        self._op_rows = {int(r["node"]): r for r in nodes.iter_rows(named=True)}
        ordered = nodes.sort(["gpu_total_us", "cpu_total_us", "node"], descending=[True, True, False])
        self._op_children = {}
        for rank, node, parent in zip(
            ordered["rank"].to_list(), ordered["node"].to_list(), ordered["parent_node"].to_list(), strict=True
        ):
            self._op_children.setdefault((rank, -1 if parent is None else parent), []).append(node)
        self._op_nodes = {}
        self._op_filled = set()
        ranks = sorted({rank for rank, _ in self._op_children})
        if len(ranks) == 1:
            self._add_op_children(self.root, ranks[0], -1)
        else:
            for rank in ranks:
                header = self.root.add(Text(f"rank {rank}", style="bold"), data=(rank, -1))
                self._add_op_children(header, rank, -1)
        self.root.expand()

    def _add_op_children(self, parent: TreeNode[NodeData], rank: int, node: int) -> None:
        for child in self._op_children.get((rank, node), []):
            has_children = (rank, child) in self._op_children
            tree_node = parent.add(node_label(self._op_rows[child]), data=(rank, child), allow_expand=has_children)
            self._op_nodes[child] = tree_node
        self._op_filled.add(node if node >= 0 else -1 - rank)

    def _fill_op(self, tree_node: TreeNode[NodeData]) -> None:
        if tree_node.data is None:
            return
        rank, node = tree_node.data
        if (node if node >= 0 else -1 - rank) not in self._op_filled:
            self._add_op_children(tree_node, rank, node)

    def _on_tree_node_expanded(self, event: Tree.NodeExpanded[NodeData]) -> None:
        self._fill_op(event.node)

    def selected_row(self) -> dict[str, Any] | None:
        """The node under the cursor (None on a rank header or an empty tree)."""
        current = self.cursor_node
        if current is None or current.data is None or current.data[1] < 0:
            return None
        return self._op_rows.get(current.data[1])

    def reveal(self, node: int) -> bool:
        """Expand the path to `node` and move the cursor onto it; False if it is not in the tree."""
        row = self._op_rows.get(node)
        if row is None:
            return False
        path: list[int] = []
        current: object = node
        while isinstance(current, int):
            path.append(current)
            current = self._op_rows[current]["parent_node"]
        for ancestor in reversed(path[1:]):
            self._fill_op(self._op_nodes[ancestor])
        target = self._op_nodes.get(node)
        if target is None:
            return False
        opened = target.parent
        while opened is not None:  # rank headers included
            opened.expand()
            opened = opened.parent
        # The tree lays out its lines on the next refresh; the cursor can only move then.
        self.call_after_refresh(self._put_cursor, target)
        return True

    def _put_cursor(self, target: TreeNode[NodeData]) -> None:
        self.move_cursor(target)
        self.scroll_to_node(target)

    def action_expand_node(self) -> None:
        if self.cursor_node is not None:
            self._fill_op(self.cursor_node)
            self.cursor_node.expand()

    def action_collapse_node(self) -> None:
        if self.cursor_node is not None:
            self.cursor_node.collapse()
