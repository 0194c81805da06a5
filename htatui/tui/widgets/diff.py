"""The diff screen's widgets: its title line, styled delta and status cells, and the delta bars."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from htatui.analysis.diff import compare as diff
from htatui.text.diff import GLYPHS, diff_title, fmt_compact, fmt_count, fmt_delta, fmt_whole
from htatui.text.names import fit_names, middle_cut
from htatui.text.numbers import cell_text
from htatui.tui.widgets.table import Column

STATUS_COLORS = {
    "added": "accent",
    "removed": "primary",
    "slower": "warning",
    "faster": "primary",
    "unchanged": "foreground-muted",
}
"""Theme variables that colour each status (orange for more time, blue for less)."""

BAR_COUNT = 10


class DiffTitle(Widget):
    """`htatui diff │ base A ↔ test B`, both names kept at any width."""

    def __init__(self, base: str, test: str) -> None:
        super().__init__(id="diff-title")
        self.base, self.test = base, test

    def render(self) -> Text:
        prefix, sides = diff_title(self.base, self.test, self.size.width)
        title = Text(prefix, no_wrap=True, overflow="ellipsis")
        title.append(sides, style="not bold")
        return title


def theme_color(screen: Screen[Any], variable: str, fallback: str = "") -> str:
    """A colour from the app's theme variables (the CSS has none of its own)."""
    variables = screen.app.theme_variables
    return str(variables.get(variable) or variables.get(fallback) or "")


@dataclass(frozen=True)
class StyledColumn(Column):
    """A column whose cells carry a style chosen per value (set by the screen from the theme)."""

    styles: tuple[tuple[str, str], ...] = ()
    """(value, rich style) pairs for status cells; empty for signed delta cells."""
    signed_styles: tuple[str, str] = ("", "")
    """Styles of positive and negative values of a delta column."""

    def cell(self, value: Any) -> Text:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return Text("–", justify="right" if self.numeric else "left", style="dim")
        if self.fmt == "status":
            style = dict(self.styles).get(str(value), "")
            return Text(GLYPHS.get(str(value), "?"), style=style, justify="center")
        if self.fmt == "count":
            return Text(fmt_count(value), justify="right")
        if self.fmt in ("delta_us", "delta_pct", "delta"):
            number = float(value)
            style = self.signed_styles[0] if number > 0 else self.signed_styles[1] if number < 0 else ""
            if self.fmt == "delta_us":
                text = fmt_delta(number)
            elif self.fmt == "delta_pct":
                text = fmt_delta(number, "%") if abs(number) < 1000 else f"{number:+,.0f}%"
            else:
                text = f"{'+' if number > 0 else ''}{fmt_whole(number)}"
            return Text(text, style=style, justify="right")
        if self.fmt == "whole":
            return Text(fmt_whole(float(value)), justify="right")
        if self.fmt == "text":
            return Text(middle_cut(str(value), self.width or 36))
        try:
            text = fmt_compact(float(value)) if self.fmt == "us" else cell_text(float(value))
        except (TypeError, ValueError):
            text = str(value)
        return Text(text, justify="right")


class DeltaBars(VerticalScroll):
    """Horizontal text bars of the largest increases (▲) and decreases (▼) of total time."""

    can_focus = True

    DEFAULT_CSS = """
    DeltaBars {
        height: 1fr;
        padding: 0 1;
        border-top: solid $panel-lighten-2;
        border-title-color: $foreground-muted;
        background: $surface;
        scrollbar-size-vertical: 1;
        &:focus {
            border-top: solid $primary;
            border-title-color: $foreground;
        }
        & > Static { width: 1fr; height: auto; }
    }
    """

    def __init__(self, *, widget_id: str | None = None) -> None:
        super().__init__(id=widget_id)
        self.border_title = f"top {BAR_COUNT} changes (µs)"
        self.frame = pl.DataFrame(schema=diff.DIFF_SCHEMA)

    def compose(self) -> ComposeResult:
        yield Static("", id="bars-text")

    def show(self, frame: pl.DataFrame) -> None:
        self.frame = frame
        self.query_one("#bars-text", Static).update(self.render_bars())

    def on_resize(self) -> None:
        if self.frame.height:
            self.query_one("#bars-text", Static).update(self.render_bars())

    def render_bars(self) -> Text:
        increases, decreases = diff.top_changes(self.frame, BAR_COUNT)
        width = max(self.scrollable_content_region.width - 1, 30)
        label_width = max(10, min(28, width // 2 - 4))
        value_width = 9
        bar_width = max(4, width - label_width - value_width - 4)
        largest = max([abs(v) for v in increases["delta_us"].to_list() + decreases["delta_us"].to_list()] or [0.0])
        up = theme_color(self.screen, "hta-series-2", "accent")
        down = theme_color(self.screen, "hta-series-1", "primary")
        text = Text(no_wrap=True, overflow="ellipsis")
        for title, rows, glyph, color in (
            ("increases", increases, "▲", up),
            ("decreases", decreases, "▼", down),
        ):
            text.append(f"{glyph} {title}\n", style="bold")
            if rows.height == 0:
                text.append("  none\n", style="dim")
                continue
            labels = fit_names([str(name) for name in rows["name"]], label_width)
            for label, record in zip(labels, rows.iter_rows(named=True), strict=True):
                value = float(record["delta_us"])
                cells = 0 if largest <= 0 else max(1, round(abs(value) / largest * bar_width))
                mark = GLYPHS.get(str(record["status"]), " ")
                text.append(f"{mark} {label:<{label_width}} ")
                text.append("█" * cells, style=color)
                text.append(" " * (bar_width - cells))
                text.append(f" {fmt_delta(value, compact=True):>{value_width}}\n")
        text.rstrip()
        return text
