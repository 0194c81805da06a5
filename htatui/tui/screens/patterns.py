"""8 Patterns: the most frequent kernel sequences launched under an operator."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from htatui.analysis.export import traces as export
from htatui.analysis.registry import PageTable
from htatui.analysis.views import patterns
from htatui.text.names import middle_cut
from htatui.tui.screens.export_modal import ExportModal
from htatui.tui.screens.page import PageResult, PageScreen, Pane
from htatui.tui.widgets.options import OptionsBar
from htatui.tui.widgets.table import ColumnHint, ViewTable, short_kernel_name
from htatui.tui.widgets.table_pane import TablePane

SEPARATOR = "|"


def pattern_steps(pattern: str) -> list[str]:
    """The root operator followed by its GPU work, names shortened."""
    return [short_kernel_name(part) for part in pattern.split(SEPARATOR)]


def pattern_label(pattern: str) -> str:
    steps = pattern_steps(pattern)
    count = len(steps) - 1
    return f"{steps[0]} → {count} op{'s' if count != 1 else ''}: " + " › ".join(steps[1:])


PATTERNS = PageTable("patterns")


class PatternsScreen(PageScreen):
    PAGE: ClassVar[str] = "patterns"
    PANES: ClassVar[dict[PageTable, Pane]] = {
        PATTERNS: Pane(
            "Frequent patterns",
            columns={"pattern": ColumnHint(width=44, transform=pattern_label, cut_end=True)},
            hint="Type another operator above (tab, then enter).",
        ),
    }
    VIEW_TITLE: ClassVar[str] = "Patterns"
    HELP: ClassVar[str] = (
        "Type an operator name (a substring, case-sensitive) and press enter: each outermost call "
        "of it with at least *min ops* GPU operations beneath it gives a pattern, its name followed "
        "by the kernels, copies and memsets it launched in order. The table counts how often each "
        "pattern occurs on the first chosen rank, with the summed GPU time and operator time. "
        "Repeated patterns are candidates for fusion or CUDA graphs."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "e",
            "export_patterns",
            "Export",
            tooltip="Write the trace with the patterns marked",
            id="patterns.export",
        ),
    ]

    @property
    def options(self) -> patterns.PatternsOptions:
        found = self.view_options["patterns"]
        assert isinstance(found, patterns.PatternsOptions)
        return found

    def compose_body(self) -> ComposeResult:
        with OptionsBar():
            yield from self.option_fields("patterns", "operator", "min_len", "top_k")
        yield self.pane(PATTERNS)
        yield Static("", id="patterns-detail")

    def pane_spec(self, table: PageTable) -> Pane:
        spec = super().pane_spec(table)
        return replace(spec, title=f"Frequent patterns under {self.options.operator!r}")

    def draw(self, result: PageResult) -> None:
        self._show_detail()

    @on(ViewTable.RowHighlighted, "#patterns-main ViewTable")
    def _show_detail(self) -> None:
        detail = self.query_one("#patterns-detail", Static)
        row = self.query_one("#patterns-main", TablePane).table.selected_row()
        if row is None:
            detail.update("")
            return
        root, *work = str(row["pattern"]).split(SEPARATOR)
        text = Text()
        text.append(root, style="bold")
        text.append(f"  ×{row['count']}  (y copies the whole pattern)\n")
        for number, name in enumerate(work, start=1):
            text.append(f"  {number:>2}. {short_kernel_name(name)}", style="bold")
            if short_kernel_name(name) != name:
                text.append(f"  {middle_cut(name, 160)}", style="dim")
            text.append("\n")
        detail.update(text)

    def action_export_patterns(self) -> None:
        traces = self.hta.traces
        if traces is None:
            return
        options = replace(self.options, scope=self.hta.scope())
        rank = patterns.chosen_rank(traces, options)
        if rank is None:
            self.notify("None of the chosen ranks is loaded.", severity="warning")
            return

        def job(
            _ranks: tuple[int, ...] | None,
            folder: Path,
            force: bool,
            _progress: Callable[[int, int, Path], None],
        ) -> list[Path]:
            return [export.export_patterns(traces, options, folder, force)]

        self.app.push_screen(
            ExportModal(
                "Export the patterns overlay",
                job,
                loaded_ranks=traces.rank_ids,
                ranks=(rank,),
                folder=Path.cwd(),
                ask_ranks=False,
                about=f"Rank {rank}: every event of the top {self.options.top_k} patterns under "
                f"{self.options.operator!r} "
                "gets args.Patterns in a copy of the trace named overlaid_<trace>; search 'Patterns' "
                "in Perfetto.",
            )
        )
