"""MarkdownText: a Markdown page drawn by one widget, laid out as Textual's Markdown widget lays it out.

Textual's `Markdown` mounts a widget per block, bullet and list item (~1,250 for the help page:
1.7 CPU-s to open, 0.5 to close, most of it CSS matching); this one parses the text once and wraps
it per width into lines of `Content`, with the same margins, bullets, hanging indents and theme
colours (`$markdown-h1-color`, inline code's warning tint, …).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token
from textual.content import Content, Span
from textual.geometry import Size
from textual.widget import Widget

BULLETS = ("• ", "▪ ", "‣ ", "⭑ ", "◦ ")
"""Textual's bullets by list depth."""

HEADING_MARGINS = {"h1": (2, 1), "h2": (2, 1)}
"""(top, bottom) blank lines around a heading; h3-h6 have (1, 1), as in Textual's Markdown."""


@dataclass(frozen=True)
class Block:
    """One block at its place: its text, the prefix of its first line (a bullet) and of the others
    (the hanging indent), and its margins (adjacent margins collapse to the larger, as in Textual)."""

    kind: str
    """h1-h6, paragraph or code."""
    content: Content
    first_prefix: Content = Content("")
    prefix: Content = Content("")
    top: int = 0
    bottom: int = 0


def inline_content(token: Token) -> Content:
    """An inline token as Content, its emphasis, strong, strike and code as component-class spans."""
    text: list[str] = []
    spans: list[Span] = []
    opened: list[tuple[str, int]] = []
    position = 0

    def add(part: str) -> None:
        nonlocal position
        text.append(part)
        position += len(part)

    for child in token.children or []:
        kind = child.type
        if kind == "text":
            add(re.sub(r"\s+", " ", child.content))
        elif kind == "softbreak":
            add(" ")
        elif kind == "hardbreak":
            add("\n")
        elif kind == "code_inline":
            spans.append(Span(position, position + len(child.content), ".markdown-text--code"))
            add(child.content)
        elif kind in ("em_open", "strong_open", "s_open"):
            opened.append((f".markdown-text--{kind.removesuffix('_open')}", position))
        elif kind in ("em_close", "strong_close", "s_close") and opened:
            style, start = opened.pop()
            spans.append(Span(start, position, style))
    return Content("".join(text), spans=spans)


def parse_blocks(markdown: str) -> list[Block]:
    """The page's blocks in order: headings, paragraphs (in lists: bulleted, no margins) and code."""
    blocks: list[Block] = []
    lists: list[list[int]] = []  # per open list: [is_ordered, next number, number width]
    item_prefixes: list[tuple[Content, Content]] = []  # per open item: (first line, later lines)
    item_first = False
    tokens = MarkdownIt("gfm-like").parse(markdown)
    for index, token in enumerate(tokens):
        kind = token.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            ordered = kind == "ordered_list_open"
            start = int(token.attrs.get("start", 1) or 1) if ordered else 0
            count = list_items(tokens, index) if ordered else 0
            lists.append([int(ordered), start, len(f"{start + count - 1}. ") if ordered else 0])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
            if not lists and blocks:
                blocks[-1] = _with_bottom(blocks[-1], 1)
        elif kind == "list_item_open":
            numbered, number, width = lists[-1]
            if numbered:
                symbol = f"{number}. ".rjust(width + 1)
                lists[-1][1] = number + 1
            else:
                symbol = BULLETS[min(len(lists) - 1, len(BULLETS) - 1)]
            outer = item_prefixes[-1][1] if item_prefixes else Content("")
            bullet = Content.styled(symbol, ".markdown-text--bullet")
            item_prefixes.append((outer + bullet, outer + Content(" " * len(symbol))))
            item_first = True
        elif kind == "list_item_close":
            item_prefixes.pop()
        elif kind == "inline":
            opener = tokens[index - 1].type if index else ""
            content = inline_content(token)
            if opener == "heading_open":
                tag = tokens[index - 1].tag
                top, bottom = HEADING_MARGINS.get(tag, (1, 1))
                blocks.append(Block(tag, content, top=top, bottom=bottom))
            elif item_prefixes:
                first, later = item_prefixes[-1]
                blocks.append(Block("paragraph", content, first if item_first else later, later))
                item_first = False
            else:
                blocks.append(Block("paragraph", content, bottom=1))
        elif kind in ("fence", "code_block"):
            blocks.append(Block("code", Content(token.content.rstrip("\n")), top=1, bottom=1))
    return blocks


def list_items(tokens: list[Token], opener: int) -> int:
    """How many items the list opened at `tokens[opener]` has (its own, not its sub-lists')."""
    level = tokens[opener].level
    count = 0
    for token in tokens[opener + 1 :]:
        if token.level == level and token.type.endswith("_list_close"):
            break
        count += token.type == "list_item_open" and token.level == level + 1
    return count


def _with_bottom(block: Block, bottom: int) -> Block:
    return Block(block.kind, block.content, block.first_prefix, block.prefix, block.top, max(block.bottom, bottom))


def layout(blocks: list[Block], width: int) -> list[Content]:
    """The page's lines at `width` cells: each block wrapped beside its prefix, margins between."""
    lines: list[Content] = []
    previous_bottom: int | None = None
    for block in blocks:
        gap = block.top if previous_bottom is None else max(previous_bottom, block.top)
        lines.extend(Content("") for _ in range(gap))
        lines.extend(block_lines(block, width))
        previous_bottom = block.bottom
    lines.extend(Content("") for _ in range(previous_bottom or 0))
    return lines


def block_lines(block: Block, width: int) -> list[Content]:
    if block.kind == "code":
        return list(block.content.split("\n"))
    if block.kind.startswith("h"):
        style = f".markdown-text--{block.kind if block.kind in ('h1', 'h2') else 'h3'}"
        wrapped = block.content.wrap(max(1, width))
        if block.kind != "h1":
            # The heading's style on its words only: an underline (h2) stops where they do.
            return [line.stylize_before(style) for line in wrapped]
        # Textual centres h1's block (content-align), each line left within it, the whole width styled.
        widest = max((line.cell_length for line in wrapped), default=0)
        left = max(0, (width - widest) // 2)
        return [
            line.pad_left(left).pad_right(max(0, width - left - line.cell_length)).stylize_before(style)
            for line in wrapped
        ]
    indent = block.prefix.cell_length
    wrapped = block.content.wrap(max(1, width - indent))
    return [(block.first_prefix if n == 0 else block.prefix) + line for n, line in enumerate(wrapped)]


class MarkdownText(Widget):
    """A Markdown page as one widget: wrapped to its width, as tall as its text."""

    COMPONENT_CLASSES = {
        "markdown-text--h1",
        "markdown-text--h2",
        "markdown-text--h3",
        "markdown-text--bullet",
        "markdown-text--code",
        "markdown-text--em",
        "markdown-text--strong",
        "markdown-text--s",
    }

    DEFAULT_CSS = """
    MarkdownText {
        height: auto;
        padding: 0 2;
        color: $foreground;
        & > .markdown-text--h1 {
            color: $markdown-h1-color;
            background: $markdown-h1-background;
            text-style: $markdown-h1-text-style;
        }
        & > .markdown-text--h2 {
            color: $markdown-h2-color;
            background: $markdown-h2-background;
            text-style: $markdown-h2-text-style;
        }
        & > .markdown-text--h3 {
            color: $markdown-h3-color;
            background: $markdown-h3-background;
            text-style: $markdown-h3-text-style;
        }
        & > .markdown-text--bullet { color: $text-primary; }
        &:light > .markdown-text--bullet { color: $text-secondary; }
        &:dark > .markdown-text--code { background: $warning 10%; color: $text-warning 95%; }
        &:light > .markdown-text--code { background: $error 5%; color: $text-error 95%; }
        &:ansi > .markdown-text--code { background: ansi_default; }
        & > .markdown-text--em { text-style: italic; }
        & > .markdown-text--strong { text-style: bold; }
        & > .markdown-text--s { text-style: strike; }
    }
    """

    def __init__(self, markdown: str, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.blocks = parse_blocks(markdown)
        self._lines: tuple[int, list[Content]] = (-1, [])

    def lines(self, width: int) -> list[Content]:
        """The page's lines at `width` (kept until the width changes)."""
        if self._lines[0] != width:
            self._lines = (width, layout(self.blocks, width))
        return self._lines[1]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Content:
        return Content("\n").join(self.lines(self.content_size.width))
