"""Choose the ranks every view shows: one, several, or all."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import SelectionList, Static
from textual.widgets.selection_list import Selection


class RankPicker(ModalScreen[tuple[int, ...] | None]):
    """space toggles, a selects all, o keeps only the highlighted rank, enter applies."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "apply", "Apply", id="ranks.apply", priority=True),
        Binding("escape", "cancel", "Cancel", id="ranks.cancel"),
        Binding("a", "all", "All", id="ranks.all"),
        Binding("o", "only", "Only this", id="ranks.only"),
        Binding("j", "down", "Down", show=False, id="ranks.down"),
        Binding("k", "up", "Up", show=False, id="ranks.up"),
    ]

    DEFAULT_CSS = """
    RankPicker {
        align: center middle;
        & > Vertical {
            width: 44;
            max-width: 100%;
            height: auto;
            max-height: 90%;
            border: round $primary;
            background: $surface;
            padding: 0 1;
        }
        & SelectionList { height: auto; max-height: 16; border: none; }
        & .hint { color: $foreground-muted; }
    }
    """

    def __init__(self, ranks: list[int], selected: tuple[int, ...] | None) -> None:
        super().__init__()
        self.ranks = ranks
        self.selected = set(ranks if selected is None else selected)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("[b]Ranks[/b] shown by every view")
            yield SelectionList[int](
                *(
                    Selection(self._prompt(rank, index == 0), rank, rank in self.selected)
                    for index, rank in enumerate(self.ranks)
                ),
                id="rank-list",
            )
            yield Static("space toggle · a all · o only this · enter apply · esc cancel", classes="hint")

    @staticmethod
    def _prompt(rank: int, current: bool) -> str:
        """The cursor row carries a ▶, so it shows without colour (NO_COLOR, monochrome)."""
        return f"{'▶' if current else ' '} rank {rank}"

    @on(SelectionList.SelectionHighlighted, "#rank-list")
    def _move_glyph(self, event: SelectionList.SelectionHighlighted[int]) -> None:
        rank_list = self.rank_list
        for index, rank in enumerate(self.ranks):
            wanted = self._prompt(rank, index == event.selection_index)
            if str(rank_list.get_option_at_index(index).prompt) != wanted:
                rank_list.replace_option_prompt_at_index(index, wanted)

    @property
    def rank_list(self) -> SelectionList[int]:
        return self.query_one("#rank-list", SelectionList)

    def action_apply(self) -> None:
        chosen = tuple(sorted(self.rank_list.selected))
        if not chosen:
            self.notify("Pick at least one rank (a selects all).", severity="warning")
            return
        self.dismiss(chosen)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_all(self) -> None:
        self.rank_list.select_all()

    def action_only(self) -> None:
        rank_list = self.rank_list
        index = rank_list.highlighted
        if index is None:
            return
        rank_list.deselect_all()
        rank_list.select(rank_list.get_option_at_index(index).value)

    def action_down(self) -> None:
        self.rank_list.action_cursor_down()

    def action_up(self) -> None:
        self.rank_list.action_cursor_up()
