"""Plotext charts drawn on the main thread from a view's result, in the app theme's colours."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import RenderResult
from textual.color import Color
from textual.content import Content
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from htatui.tui.widgets.table import middle_truncate

RGB = tuple[int, int, int]
Draw = Callable[["Chart", Plot], None]

FILLS = ("█", "▓", "▒", "░")
"""Bar fill per series, so series differ without colour too (NO_COLOR, monochrome terminals)."""

LABEL_WIDTH = 16
"""Category labels (ranks, kernel names) are shortened in the middle to this many cells."""


@dataclass(frozen=True)
class Series:
    """One named series and the theme variable that colours it."""

    name: str
    values: Sequence[float]
    color: str = "hta-series-1"


class Chart(PlotextPlot):
    """One plotext figure per widget; `show(draw)` stores how to draw and `replot()` draws it.

    Without data the chart says so in a sentence instead of drawing empty axes.
    """

    can_focus = True

    DEFAULT_CSS = """
    Chart {
        height: 1fr;
        min-height: 6;
        background: $surface;
        border: none;
        border-top: solid $panel-lighten-2;
        border-title-color: $foreground-muted;
        &:focus {
            border-top: solid $primary;
            border-title-color: $foreground;
        }
        &.-hidden { display: none; }
        &.-empty {
            height: auto;
            min-height: 2;
            padding: 0 1;
            color: $foreground-muted;
            background: $background;
        }
    }
    """

    def __init__(self, title: str = "", *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.title = title
        self.border_title = title
        self.legend: list[tuple[str, str, str]] = []
        """(series name, colour variable, glyph) triples, drawn in the title rather than over the bars."""
        self._draw: Draw | None = None
        self._empty = "Not computed yet (r runs the analysis)."

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.replot())

    def show(self, draw: Draw | None, empty: str = "Nothing to draw.") -> None:
        """Draw with `draw`, or show the sentence `empty` when there is nothing to draw.

        With no draw and an empty sentence the chart hides (a table above already says why).
        """
        self._draw = draw
        self._empty = empty
        self.set_class(draw is None and not empty, "-hidden")
        self.replot()

    def replot(self) -> None:
        plt = self.plt
        plt.clear_figure()
        self.legend = []
        if self._draw is not None:
            self._draw(self, plt)
        self.border_title = self._title_with_legend()
        self.set_class(self._draw is None, "-empty")
        self.refresh(layout=True)

    def _title_with_legend(self) -> Content:
        parts = [Content(self.title)] if self.title else []
        for name, variable, glyph in self.legend:
            r, g, b = self.rgb(variable)
            parts.append(Content.assemble((glyph, f"rgb({r},{g},{b})"), f" {name}"))
        return Content(" ").join(parts) if parts else Content("")

    def render(self) -> RenderResult:
        if self._draw is None:
            return Text(self._empty, style="italic")
        return super().render()

    def rgb(self, variable: str) -> RGB:
        """A theme variable as an RGB triple for plotext."""
        value = self.app.theme_variables.get(variable) or self.app.theme_variables.get("foreground", "#d0d0d0")
        try:
            return Color.parse(value).rgb
        except Exception:  # noqa: BLE001 - a theme value we cannot parse falls back to grey
            return (138, 138, 138)


def _colors(chart: Chart, series: Sequence[Series]) -> Any:
    """One RGB per series (plotext takes a list here although its hints say otherwise)."""
    return [chart.rgb(s.color) for s in series]


def _fills(series: Sequence[Series]) -> Any:
    return [FILLS[index % len(FILLS)] for index in range(len(series))]


def _legend(series: Sequence[Series]) -> list[tuple[str, str, str]]:
    return [(s.name, s.color, FILLS[index % len(FILLS)]) for index, s in enumerate(series)]


def short_labels(labels: Sequence[object], width: int = LABEL_WIDTH) -> list[str]:
    return [middle_truncate(str(label), width) for label in labels]


def _finite(values: Sequence[float | None]) -> list[float]:
    return [0.0 if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v) for v in values]


def stacked_bars(
    labels: Sequence[object],
    series: Sequence[Series],
    *,
    title: str = "",
    ylabel: str = "",
    horizontal: bool = False,
) -> Draw:
    """Bars per label, stacked by series (e.g. idle / compute / non-compute per rank)."""

    def draw(chart: Chart, plt: Plot) -> None:
        names = short_labels(labels)
        chart.legend = _legend(series)
        plt.stacked_bar(
            names,
            [_finite(s.values) for s in series],
            marker=_fills(series),
            color=_colors(chart, series),
            orientation="horizontal" if horizontal else "vertical",
            width=0.6,
        )
        _decorate(plt, title, ylabel, horizontal)

    return draw


def grouped_bars(
    labels: Sequence[object],
    series: Sequence[Series],
    *,
    title: str = "",
    ylabel: str = "",
    horizontal: bool = False,
) -> Draw:
    """Bars per label, side by side for each series."""

    def draw(chart: Chart, plt: Plot) -> None:
        names = short_labels(labels)
        if len(series) > 1:
            chart.legend = _legend(series)
        if len(series) == 1:
            plt.bar(
                names,
                _finite(series[0].values),
                color=chart.rgb(series[0].color),
                orientation="horizontal" if horizontal else "vertical",
                width=0.6,
            )
        else:
            plt.multiple_bar(
                names,
                [_finite(s.values) for s in series],
                color=_colors(chart, series),
                marker=_fills(series),
                orientation="horizontal" if horizontal else "vertical",
                width=0.6,
            )
        _decorate(plt, title, ylabel, horizontal)

    return draw


def lines(
    series: Sequence[tuple[str, Sequence[float], Sequence[float], str]],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
) -> Draw:
    """Line series given as (name, xs, ys, colour variable); markers differ per series."""
    markers = ("braille", "dot", "hd", "fhd")

    def draw(chart: Chart, plt: Plot) -> None:
        if len(series) > 1:
            chart.legend = [(name, color, "•") for name, _xs, _ys, color in series]
        for index, (_name, xs, ys, color) in enumerate(series):
            plt.plot(
                _finite(xs),
                _finite(ys),
                color=chart.rgb(color),
                marker=markers[index % len(markers)],
            )
        plt.title(title)
        plt.xlabel(xlabel)
        plt.ylabel(ylabel)

    return draw


def step_points(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """A step series (each value holds until the next point) as the corners of its staircase."""
    step_x: list[float] = []
    step_y: list[float] = []
    for index, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if index:
            step_x.append(x)
            step_y.append(step_y[-1])
        step_x.append(x)
        step_y.append(y)
    return step_x, step_y


def histogram(
    values: Sequence[float], *, bins: int = 30, title: str = "", xlabel: str = "", color: str = "hta-series-1"
) -> Draw:
    def draw(chart: Chart, plt: Plot) -> None:
        plt.hist(_finite(values), bins=bins, color=chart.rgb(color))
        plt.title(title)
        plt.xlabel(xlabel)

    return draw


def _decorate(plt: Plot, title: str, ylabel: str, horizontal: bool) -> None:
    plt.title(title)
    if horizontal:
        plt.xlabel(ylabel)
    else:
        plt.ylabel(ylabel)
