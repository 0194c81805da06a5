"""Plotext charts drawn on the main thread from a view's result, in the app theme's colours."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual.app import RenderResult
from textual.color import Color
from textual.content import Content
from textual.geometry import Size
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from htatui.text.names import fit_names, middle_cut
from htatui.tui.widgets.focus_label import FOCUS_MARK

RGB = tuple[int, int, int]
Draw = Callable[["Chart", Plot], None]

FILLS = ("█", "▓", "▒", "░")
"""Bar fill per series, so series differ without colour too (NO_COLOR, monochrome terminals)."""

LABEL_WIDTH = 16
"""Category labels (ranks, kernel names) are shortened in the middle to this many cells."""


ROWS_SHOWN = 12
"""Bar rows shown before the rest are counted (z maximizes the chart to show them all)."""


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
        self._draw: Drawing | None = None
        self._empty = "Not computed yet (r runs the analysis)."

    def on_mount(self) -> None:
        super().on_mount()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.replot())

    def show(self, draw: Drawing | None, empty: str = "Nothing to draw.") -> None:
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
        if isinstance(self._draw, BarRows):
            self.legend = _legend(self._draw.series) if len(self._draw.series) > 1 else []
        elif self._draw is not None:
            self._draw(self, plt)
        self.border_title = self._title_with_legend()
        self.set_class(self._draw is None, "-empty")
        self.set_class(isinstance(self._draw, BarRows), "-rows")
        self.refresh(layout=True)

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self.border_title = self._title_with_legend()

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self.border_title = self._title_with_legend()

    def _title_with_legend(self) -> Content:
        """The title (marked ▶ while the chart has the focus, so focus reads without colour) and legend."""
        parts = [Content(self.title)] if self.title else []
        if self.has_focus:
            parts.insert(0, Content(FOCUS_MARK))
        for name, variable, glyph in self.legend:
            r, g, b = self.rgb(variable)
            parts.append(Content.assemble((glyph, f"rgb({r},{g},{b})"), f" {name}"))
        return Content(" ").join(parts) if parts else Content("")

    def render(self) -> RenderResult:
        if self._draw is None:
            return Text(self._empty, style="italic")
        if isinstance(self._draw, BarRows):
            return self._draw.text(self, self.content_size.width, self.content_size.height)
        return super().render()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if isinstance(self._draw, BarRows):
            rows = len(self._draw.labels)
            return rows if self.is_maximized or rows <= ROWS_SHOWN else ROWS_SHOWN + 1
        return super().get_content_height(container, viewport, width)

    @property
    def is_maximized(self) -> bool:
        return self.screen.maximized is self

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
    return [middle_cut(str(label), width) for label in labels]


def _finite(values: Sequence[float | None]) -> list[float]:
    return [0.0 if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v) for v in values]


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


LINE_MARKERS = ("•", "+", "▲", "x")
"""The glyph of each line series in order (plotext draws any one character as a marker)."""


def tick_labels(values: Sequence[float], count: int = 5) -> tuple[list[float], list[str]]:
    """About `count` of `values`, evenly spread, with short labels (4 significant digits, no float
    noise such as 129.73125000000002)."""
    if not values:
        return [], []
    step = max(1, round(len(values) / count))
    ticks = list(values[::step])
    return ticks, [f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}" for value in ticks]


def lines(
    series: Sequence[tuple[str, Sequence[float], Sequence[float], str]],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    markers: Sequence[str] = LINE_MARKERS,
) -> Draw:
    """Line series given as (name, xs, ys, colour variable); each series is drawn with its own
    marker glyph (`markers`, in turn), which the legend shows beside its name, so the series
    read apart without colour."""

    def draw(chart: Chart, plt: Plot) -> None:
        if len(series) > 1:
            chart.legend = [
                (name, color, markers[index % len(markers)]) for index, (name, _xs, _ys, color) in enumerate(series)
            ]
        for index, (_name, xs, ys, color) in enumerate(series):
            plt.plot(_finite(xs), _finite(ys), color=chart.rgb(color), marker=markers[index % len(markers)])
        plt.title(title)
        plt.xlabel(xlabel)
        plt.ylabel(ylabel)

    return draw


def roofline(
    intensity: Sequence[float],
    achieved: Sequence[float],
    *,
    peak: float,
    bandwidth: float,
    title: str = "",
    flagged: Sequence[bool] = (),
    vector_peak: float | None = None,
) -> Draw:
    """A roofline on log-log axes: the memory roof (bandwidth × intensity) up to the ridge point,
    the compute roof (peak) after it, a lower vector roof when given (the units elementwise
    work runs on), and one dot per op (its FLOP/byte and achieved TFLOP/s); the dots of `flagged`
    ops (above their own roof, the table's `flag`) are drawn apart.

    The logarithms are taken here and the ticks labelled by decade: plotext's own log scale
    transforms its stored data in place on every build, so a redraw would take the log twice."""

    def draw(chart: Chart, plt: Plot) -> None:
        marks = list(flagged) + [False] * (len(intensity) - len(flagged))
        points = [
            (x, y, mark)
            for x, y, mark in zip(_finite(intensity), _finite(achieved), marks, strict=True)
            if x > 0 and y > 0
        ]
        xs = [x for x, _, _ in points] or [1.0]
        ys = [y for _, y, _ in points] or [peak]
        ridge = peak / bandwidth
        left, right = min(min(xs), ridge) / 2, max(max(xs), ridge) * 2
        bottom = min(min(ys), left * bandwidth)
        chart.legend = [("roof", "hta-series-2", "⠉"), ("ops", "hta-series-1", "●")]
        roof_x = [math.log10(left), math.log10(ridge), math.log10(right)]
        roof_y = [math.log10(left * bandwidth), math.log10(peak), math.log10(peak)]
        plt.plot(roof_x, roof_y, color=chart.rgb("hta-series-2"), marker="braille")
        if vector_peak is not None and 0 < vector_peak < peak:
            vector_ridge = vector_peak / bandwidth
            plt.plot(
                [math.log10(max(vector_ridge, left)), math.log10(right)],
                [math.log10(vector_peak)] * 2,
                color=chart.rgb("hta-series-3"),
                marker="braille",
            )
            chart.legend.insert(1, ("vector roof", "hta-series-3", "⠉"))
        for mark, color, glyph in ((False, "hta-series-1", "●"), (True, "warning", "×")):
            chosen = [(x, y) for x, y, m in points if m == mark]
            if chosen:
                plt.scatter(
                    [math.log10(x) for x, _ in chosen],
                    [math.log10(y) for _, y in chosen],
                    color=chart.rgb(color),
                    marker=glyph,
                )
        if any(m for _, _, m in points):
            chart.legend.append(("above roof (flag)", "warning", "×"))
        plt.xticks(*_decades(left, right))
        plt.yticks(*_decades(bottom, max(peak, max(ys)) * 2))
        plt.title(title)
        plt.xlabel("FLOP/byte")
        plt.ylabel("TFLOP/s")

    return draw


def _decades(low: float, high: float) -> tuple[list[float], list[str]]:
    """Ticks at the powers of ten between `low` and `high` (log10 positions, plain labels)."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    powers = list(range(first, last + 1))
    if len(powers) > 8:  # a narrow axis keeps every other decade
        powers = powers[:: math.ceil(len(powers) / 8)]
    return [float(p) for p in powers], [f"{10.0**p:g}" for p in powers]


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


EIGHTHS = " ▏▎▍▌▋▊▉"
"""Partial cells of a one-series bar, so a bar's length is exact to 1/8 of a cell."""


def fmt_bar_value(value: float, unit: str) -> str:
    return f"{value:.1f}%" if unit == "%" else f"{value:,.1f}"


def _split_cells(values: Sequence[float], cells: int, scale: float) -> list[int]:
    """Cells per stacked segment (largest remainder), every non-zero segment at least one cell."""
    if scale <= 0 or cells <= 0:
        return [0 for _ in values]
    exact = [max(v, 0.0) / scale * cells for v in values]
    counts = [math.floor(x) for x in exact]
    total = min(cells, round(sum(exact)))
    order = sorted(range(len(values)), key=lambda i: exact[i] - counts[i], reverse=True)
    for index in order[: max(0, total - sum(counts))]:
        counts[index] += 1
    for index, value in enumerate(values):
        if value > 0 and counts[index] == 0:
            donor = max(range(len(counts)), key=lambda i: counts[i])
            if counts[donor] > 1:
                counts[donor] -= 1
                counts[index] = 1
    return counts


@dataclass(frozen=True)
class BarRows:
    """Horizontal bars as text, one row per label with its value printed beside the bar.

    Labels and values can never drift from their bars (plotext drops and merges tick labels
    when a pane has fewer rows than bars); rows that do not fit are counted, not squeezed.
    """

    labels: Sequence[str]
    series: Sequence[Series]
    unit: str = "µs"
    notes: Sequence[str] | None = None
    """Text after each bar; by default the row's total in `unit`."""

    def text(self, chart: Chart, width: int, height: int) -> Text:
        count = len(self.labels)
        shown = count if count <= height else max(1, height - 1)
        totals = [sum(max(float(v), 0.0) for v in values) for values in self._rows()]
        notes = list(self.notes) if self.notes is not None else [fmt_bar_value(t, self.unit) for t in totals]
        label_width = min(max((len(str(label)) for label in self.labels), default=1), max(8, width // 3))
        note_width = max((len(note) for note in notes), default=0)
        bar_width = max(1, width - label_width - note_width - 2)
        scale = max(totals, default=0.0)
        colors = [chart.rgb(s.color) for s in self.series]
        text = Text(no_wrap=True, overflow="ellipsis")
        labels = fit_names([str(label) for label in self.labels], label_width)
        for index in range(shown):
            text.append(f"{labels[index]:<{label_width}} ")
            values = self._rows()[index]
            used = self._append_bar(text, values, colors, bar_width, scale)
            text.append(" " * (bar_width - used))
            text.append(f" {notes[index]:>{note_width}}")
            if index < shown - 1 or shown < count:
                text.append("\n")
        if shown < count:
            text.append(f"… {count - shown} more (z shows all)", style="dim italic")
        return text

    def _rows(self) -> list[list[float]]:
        columns = [_finite(s.values) for s in self.series]
        return [[column[index] for column in columns] for index in range(len(self.labels))]

    def _append_bar(self, text: Text, values: list[float], colors: list[RGB], width: int, scale: float) -> int:
        if scale <= 0:
            return 0
        if len(values) == 1:
            eighths = round(max(values[0], 0.0) / scale * width * 8)
            full, part = divmod(eighths, 8)
            r, g, b = colors[0]
            bar = "█" * full + (EIGHTHS[part] if part else "")
            text.append(bar, style=f"rgb({r},{g},{b})")
            return len(bar)
        cells = _split_cells(values, width, scale)
        for index, n in enumerate(cells):
            r, g, b = colors[index]
            text.append(FILLS[index % len(FILLS)] * n, style=f"rgb({r},{g},{b})")
        return sum(cells)


Drawing = Draw | BarRows
"""What a chart shows: a plotext figure or text bar rows."""
