"""`?`: every key of the current view, the app, tables and option boxes, plus what views mean."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from htatui.tui.base.host import KeymapHost
from htatui.tui.base.keymap import remapped
from htatui.tui.widgets.filter_bar import FilterBar
from htatui.tui.widgets.markdown_text import MarkdownText
from htatui.tui.widgets.options import OptionInput
from htatui.tui.widgets.table import ViewTable

HELP_FILE = Path(__file__).with_name("help.md")


def bindings_of(cls: type) -> list[Binding]:
    """A class's bindings including those it inherits, first definition of a key wins."""
    seen: set[str] = set()
    found: list[Binding] = []
    for klass in cls.__mro__:
        if not klass.__module__.startswith("htatui"):
            continue
        for item in klass.__dict__.get("BINDINGS", []):
            if not isinstance(item, Binding):
                continue
            if item.key in seen or item.system:
                continue
            seen.add(item.key)
            found.append(item)
    return found


class HelpScreen(ModalScreen[None]):
    """A scrollable page; esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "close", "Close", id="help.close"),
        Binding("j,down", "scroll_down", "Down", show=False, id="help.down"),
        Binding("k,up", "scroll_up", "Up", show=False, id="help.up"),
        Binding("ctrl+d,pagedown,space", "page_down", "Page down", show=False, id="help.page_down"),
        Binding("ctrl+u,pageup", "page_up", "Page up", show=False, id="help.page_up"),
        Binding("g,home", "top", "Top", show=False, id="help.top"),
        Binding("G,end", "bottom", "Bottom", show=False, id="help.bottom"),
    ]

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
        & > Vertical {
            width: 100;
            max-width: 100%;
            height: 100%;
            border: round $primary;
            background: $surface;
        }
        & MarkdownText { margin: 0 1; }
        & .hint { dock: bottom; color: $foreground-muted; padding: 0 1; }
    }
    """

    def __init__(self, origin: Screen[Any]) -> None:
        super().__init__()
        self.origin = origin

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll(id="help-scroll"):
                yield MarkdownText(self.page(), id="help-text")
            yield Static("j/k scroll · g/G top/bottom · esc closes", classes="hint")

    def on_mount(self) -> None:
        self.scroller.focus()

    @property
    def scroller(self) -> VerticalScroll:
        return self.query_one("#help-scroll", VerticalScroll)

    def page(self) -> str:
        """This view's explanation and keys first, then the app's keys and the general text."""
        sections: list[str] = []
        groups: list[tuple[str, list[Binding]]] = []
        view_title = getattr(self.origin, "VIEW_TITLE", "")
        if view_title:
            about = getattr(self.origin, "HELP", "")
            sections.append(f"# {view_title}\n\n{about}")
            groups.append((f"Keys in {view_title}", bindings_of(type(self.origin))))
        groups.append(("Keys everywhere", bindings_of(type(self.app))))
        groups.append(("Tables", bindings_of(ViewTable)))
        groups.append(("Filter bar (/)", bindings_of(FilterBar)))
        groups.append(("Option boxes", bindings_of(OptionInput)))
        for title, bindings in groups:
            rows = [f"## {title}", ""]
            for binding in bindings:
                description = binding.tooltip or binding.description or binding.action
                rows.append(f"- `{self._keys(binding)}` {description}")
            sections.append("\n".join(rows))
        sections.append(
            "## Always\n\n- `tab` / `shift+tab` next / previous pane\n"
            "- `ctrl+p` / `:` command palette (view:, rank:, export:, theme:, app:)\n"
            "- `ctrl+q` quit at once"
        )
        sections.append(HELP_FILE.read_text(encoding="utf-8"))
        return "\n\n".join(sections)

    def _keys(self, default: Binding) -> str:
        """The keys that run the binding now: the keymap's where it names the binding's id."""
        binding = remapped(default, self.app.keymap if isinstance(self.app, KeymapHost) else {})
        keys = [key.strip() for key in binding.key.split(",")]
        if binding.key_display and len(keys) == 1:
            return binding.key_display
        return " / ".join(self.app.get_key_display(Binding(key, binding.action)) for key in keys)

    def action_close(self) -> None:
        self.dismiss(None)

    # immediate=True: a deferred scroll counts from where the last one aimed only after a refresh,
    # so a quick burst of keys would move the page once.
    def action_scroll_down(self) -> None:
        self.scroller.scroll_down(animate=False, immediate=True)

    def action_scroll_up(self) -> None:
        self.scroller.scroll_up(animate=False, immediate=True)

    def action_page_down(self) -> None:
        self._page(1)

    def action_page_up(self) -> None:
        self._page(-1)

    def _page(self, direction: int) -> None:
        scroller = self.scroller
        page = scroller.scrollable_content_region.height
        scroller.scroll_to(y=scroller.scroll_target_y + direction * page, animate=False, immediate=True)

    def action_top(self) -> None:
        self.scroller.scroll_home(animate=False, immediate=True)

    def action_bottom(self) -> None:
        self.scroller.scroll_end(animate=False, immediate=True)
