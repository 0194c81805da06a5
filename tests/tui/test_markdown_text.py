"""MarkdownText draws a page as Textual's Markdown widget does, with one widget instead of hundreds."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import Markdown

from htatui.tui.screens.help import HELP_FILE
from htatui.tui.widgets.markdown_text import MarkdownText, parse_blocks

SAMPLE = """# Title

A paragraph with **bold**, *italic*, ~~struck~~ and `code` words, long enough to wrap at the
width the test gives it, twice over if it can.

## Keys

- `j` / `k` down and up, a line that goes on long enough to wrap under its own text and not under the bullet
- `g` top

Between the lists.

8. eight
9. nine, wrapped under its number rather than under the start of the line it began on
10. ten

- outer
  - inner item that is long enough to wrap under its own bullet, one level in from the outer one
- outer again
"""

Cell = tuple[str, object, object, bool, bool, bool, bool]


class OneWidget(App[None]):
    def __init__(self, widget: Widget, theme: str) -> None:
        super().__init__()
        self.widget = widget
        self.theme = theme

    def compose(self) -> ComposeResult:
        yield self.widget


async def cells(widget: Widget, theme: str, size: tuple[int, int]) -> list[list[Cell]]:
    """The screen's cells: character, colours and text style (a space's foreground is invisible)."""
    app = OneWidget(widget, theme)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause()
        rows: list[list[Cell]] = []
        for strip in app.screen._compositor.render_strips():
            row: list[Cell] = []
            for segment in strip:
                style = segment.style
                assert style is not None
                for char in segment.text:
                    colour = None if char == " " else style.color
                    row.append(
                        (
                            char,
                            colour,
                            style.bgcolor,
                            bool(style.bold),
                            bool(style.italic),
                            bool(style.underline),
                            bool(style.strike),
                        )
                    )
            rows.append(row)
        return rows


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light", "nord"])
async def test_draws_what_textuals_markdown_draws(theme: str) -> None:
    size = (60, 40)
    ours = await cells(MarkdownText(SAMPLE), theme, size)
    textuals = await cells(Markdown(SAMPLE), theme, size)
    text = ["".join(cell[0] for cell in row) for row in ours]
    assert text == ["".join(cell[0] for cell in row) for row in textuals]
    assert ours == textuals
    # What the sample checks is on the screen: the wrapped bullet's hanging indent, the numbers
    # right-aligned to the widest (10.), the nested list one bullet in.
    assert any(line.startswith("  • j / k down") for line in text)
    assert "   9. nine, wrapped" in "\n".join(text)
    assert "  10. ten" in "\n".join(text)
    assert any(line.startswith("    ▪ inner") for line in text)


async def test_the_help_page_is_drawn_alike() -> None:
    page = HELP_FILE.read_text(encoding="utf-8")
    size = (80, 120)
    assert await cells(MarkdownText(page), "textual-dark", size) == await cells(Markdown(page), "textual-dark", size)


def test_blocks_keep_every_word() -> None:
    blocks = parse_blocks(SAMPLE)
    words = " ".join(block.content.plain for block in blocks).split()
    source = SAMPLE.replace("**", "").replace("*", "").replace("~~", "").replace("`", "").replace("#", "")
    expected = [word for word in source.split() if word not in {"-", "8.", "9.", "10."}]
    assert words == expected
