"""A fitted table drawn as text in one pass, in rich's heavy-head box: rich's own Table measured
and rendered every cell through its layout engine, 3 ms a row (20,000 rows of the job's critical
path took 38 s); this writes each row as one joined string."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from htatui.text.fit import FitColumn

_CONTROL_PICTURES = {code: 0x2400 + code for code in range(32)} | {127: 0x2421}
"""Control characters in a name (a newline, an escape sequence) drawn as their Unicode
pictures (␊, ␛): one row stays one line, and nothing reaches the terminal as a command."""


def visible(text: str) -> str:
    """`text` with its control characters as their pictures (cells are made of it; CSV and JSON keep them)."""
    return text.translate(_CONTROL_PICTURES) if not text.isprintable() else text


def _cells(text: str) -> int:
    """Terminal cells `text` takes (wide characters count two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _aligned(text: str, width: int, right: bool) -> str:
    pad = " " * (width - _cells(text))
    return pad + text if right else text + pad


def column_widths(columns: Sequence[FitColumn]) -> list[int]:
    return [max(_cells(c.header), max((_cells(cell) for cell in c.cells), default=0)) for c in columns]


def table_rows(columns: Sequence[FitColumn]) -> Iterator[str]:
    """The table's lines after its header: the rule under the header, each row, the bottom rule."""
    widths = column_widths(columns)
    yield "┡" + "╇".join("━" * (w + 2) for w in widths) + "┩"
    lefts = [not c.numeric for c in columns]
    for row in zip(*(c.cells for c in columns), strict=True):
        parts = (_aligned(cell, w, not left) for cell, w, left in zip(row, widths, lefts, strict=True))
        yield "│ " + " │ ".join(parts) + " │"
    yield "└" + "┴".join("─" * (w + 2) for w in widths) + "┘"


def table_head(columns: Sequence[FitColumn]) -> tuple[str, str]:
    """The top rule and the header line."""
    widths = column_widths(columns)
    top = "┏" + "┳".join("━" * (w + 2) for w in widths) + "┓"
    names = (_aligned(c.header, w, c.numeric) for c, w in zip(columns, widths, strict=True))
    return top, "┃ " + " ┃ ".join(names) + " ┃"
