"""The two top lines: the view tabs, and the trace, ranks, steps and analysis state."""

from __future__ import annotations

import re
from collections.abc import Mapping

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from htatui.analysis.registry import PAGES
from htatui.text.names import middle_cut
from htatui.tui.base.host import AnalysisHost

NUMBERED_PAGES = 10
"""Pages with a number key: 1-9, then 0 for the tenth; later pages are reached with [ ] and the palette."""


def page_keys() -> dict[str, str]:
    """Each numbered page's key, by its place among the registry's numbered pages (not among the
    pages shown: the Memory page hides on traces without memory events, and the pages after it
    keep their keys)."""
    numbered = [page for page in PAGES if page.numbered]
    return {page.id: str(number % 10) for number, page in enumerate(numbered, 1) if number <= NUMBERED_PAGES}


LETTER_KEYS = {"diagnosis": "D"}
"""The pages opened by a letter rather than a number (the app's `view.<page>` bindings)."""


class ViewTabs(Widget):
    """`1 Temporal  2 Idle  …` with the current view highlighted; the number keys switch."""

    COMPONENT_CLASSES = {"view-tabs--current"}

    DEFAULT_CSS = """
    ViewTabs {
        height: 1;
        background: $panel;
        color: $foreground-muted;
        & > .view-tabs--current {
            background: $primary;
            color: $background;
            text-style: bold;
        }
    }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def render(self) -> Text:
        app = self.app
        views = app.view_order() if isinstance(app, AnalysisHost) else []
        current = self.get_component_rich_style("view-tabs--current")
        text = Text(no_wrap=True, overflow="ellipsis")
        for label, is_current in tab_labels(views, self.current, self.size.width, {**page_keys(), **LETTER_KEYS}):
            text.append(label, style=current if is_current else "")
        return text


def tab_labels(
    views: list[tuple[str, str]], current: str, width: int, keys: Mapping[str, str] | None = None
) -> list[tuple[str, bool]]:
    """`1 Temporal  2 Idle …` as (text, is current) pieces that fit `width`: other views' titles
    are cut to 4, then 3 letters, then left out (the number stays, so every view's key shows; a
    view without a key keeps 3 letters). The current view is bracketed, so it reads without
    colour. `keys`: each view's key (default: by position, 1-9 then 0, none past the tenth)."""
    if keys is None:
        keys = {mode: str(n % 10) for n, (mode, _title) in enumerate(views, 1) if n <= NUMBERED_PAGES}

    def piece(mode: str, title: str, is_current: bool, letters: int | None, pad: str) -> str:
        key = keys.get(mode, "")
        if not key and letters is not None:
            letters = max(letters, 3)
        shown = title if is_current or letters is None else title[:letters]
        label = f"{key} {shown}".strip()
        return f"[{label}]" if is_current else f"{pad}{label}{pad}"

    for letters, pad, gap in ((None, " ", ""), (None, "", " "), (4, "", " "), (3, "", " "), (0, "", " ")):
        pieces = [(piece(mode, title, mode == current, letters, pad) + gap, mode == current) for mode, title in views]
        if sum(len(text) for text, _ in pieces) <= width:
            return pieces
    return pieces


class StatusBar(Widget):
    """Trace name, selected ranks, the profiler steps in use, and what the view is doing."""

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        background: $surface;
        color: $foreground;
    }
    """

    state: reactive[str] = reactive("")
    """What the view's analysis is doing: 'computing…', 'ready', an error."""
    steps: reactive[str] = reactive("")
    """The steps a view's numbers count when it narrows the app's (the Critical path page's one
    step); empty: the app's steps."""

    def render(self) -> Text:
        app = self.app
        text = Text(no_wrap=True, overflow="ellipsis")
        label, ranks, steps = "", "", ""
        notes: list[tuple[str, str]] = []
        if isinstance(app, AnalysisHost):
            label, ranks, steps = app.trace_label, app.ranks_label, self.steps or app.steps_label
            # Skipped files and notes last after the toasts fade.
            skipped = len(app.traces.problems) if app.traces is not None else 0
            if skipped:
                notes.append((f" │ ⚠ {skipped} file{'s' if skipped > 1 else ''} skipped (N)", "bold"))
            if app.load_notes:
                count = len(app.load_notes)
                notes.append((f" │ {count} load note{'s' if count > 1 else ''} (N)", "italic"))
        for piece, style in status_pieces(label, ranks, notes, steps, self.state, self.size.width):
            text.append(piece, style=style)
        return text


def status_pieces(
    label: str, ranks: str, notes: list[tuple[str, str]], steps: str, state: str, width: int
) -> list[tuple[str, str]]:
    """The status line as (text, style) pieces that fit `width` where they can: the trace's name is
    cut first, then the state's words in parentheses, then the state, then the steps' words
    (`step 4 of 2-4 (, . another · a all)` → `step 4 of 2-4 (, . a)`), so the steps and the keys
    that move them are cut last (issue 38 #5)."""

    def pieces(name: str, steps_text: str, state_text: str) -> list[tuple[str, str]]:
        found = [(f" {name}", "bold"), (f" │ ranks {ranks}", "")] if name or ranks else []
        found += notes + ([(f" │ {steps_text}", "")] if steps_text else [])
        return found + ([(f" │ {state_text}", "italic")] if state_text else [])

    short_name = middle_cut(label, SHORT_NAME)
    tries = [
        pieces(label, steps, state),
        pieces(short_name, steps, state),
        pieces(short_name, steps, _bare(state)),
        pieces(short_name, steps, ""),
        pieces(short_name, _keys_only(steps), ""),
        pieces(short_name, _bare(steps), ""),
    ]
    return next((found for found in tries if sum(len(text) for text, _ in found) <= width), tries[-1])


SHORT_NAME = 16
"""The trace's name is cut to this when the status line does not fit."""


def _bare(text: str) -> str:
    """`text` without its words in parentheses: 'computing… (esc cancels)' → 'computing…'."""
    return re.sub(r"\s*\([^()]*\)", "", text).strip()


def _keys_only(text: str) -> str:
    """A parenthesis of keys kept, its words dropped: 'step 4 of 2-4 (, . another · a all)' →
    'step 4 of 2-4 (, . a)'; a parenthesis without keys goes."""
    match = re.search(r"\(([^()]*)\)", text)
    if match is None or "·" not in match.group(1):
        return _bare(text)
    keys = [part.split()[:-1] if len(part.split()) > 1 else part.split() for part in match.group(1).split("·")]
    shown = " ".join(" ".join(words) for words in keys if words)
    return f"{text[: match.start()].rstrip()} ({shown})"
