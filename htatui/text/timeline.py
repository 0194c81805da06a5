"""A rank's timeline as text: one glyph per cell (type letter, its case for how full the cell is,
an idle mark, or a sparkline bar for counters), as `htatui timeline` prints it and the Timeline
screen draws it (htatui/analysis/timeline/index.py bins the events into the cells)."""

from __future__ import annotations

import math
import textwrap

from htatui.analysis.timeline.events import EventDetails
from htatui.analysis.timeline.index import (
    COUNTER,
    FULL_SHADE,
    GLYPHS,
    SPARK,
    STREAM,
    STREAM_IDLE,
    THREAD_IDLE,
    TimelineError,
    TimelineOptions,
    TimelineRow,
    bin_window,
    build_index,
    visible_rows,
)
from htatui.trace.model import TraceSet


def cell_glyph(row: TimelineRow, cell: int, scale: float | None = None) -> str:
    """The glyph of one cell: a type letter (case = shade), an idle mark, or a sparkline bar."""
    if row.spec.kind == COUNTER:
        value = row.values[cell]
        if value is None or value <= 0 or not scale:
            return " "
        return SPARK[min(len(SPARK) - 1, max(0, math.ceil(value / scale * len(SPARK)) - 1))]
    kind = row.types[cell]
    if kind is None:
        return STREAM_IDLE if row.spec.kind == STREAM else THREAD_IDLE
    glyph = GLYPHS[kind]
    # A hair below one half still counts as half: the fractions are differences of float sums.
    return glyph if row.fractions[cell] >= FULL_SHADE - 1e-9 else glyph.lower()


def counter_scale(row: TimelineRow) -> float | None:
    """The largest value of a counter row in the window (its sparkline's full bar)."""
    present = [v for v in row.values if v is not None]
    return max(present) if present else None


def fmt_us(value: float) -> str:
    """µs to the ns, without trailing zeros: 1250.5, 100."""
    return f"{value:.3f}".rstrip("0").rstrip(".")


def row_label(row: TimelineRow, many_ranks: bool) -> str:
    return f"r{row.spec.rank} {row.spec.label}" if many_ranks else row.spec.label


def render_text(rows: list[TimelineRow], start_us: float, end_us: float, width: int) -> list[str]:
    """The rows as text, one line each: label, a space, then one glyph per cell; first a line
    with the window. Every line is at most `width` characters (cells = width − label − 1)."""
    many = len({row.spec.rank for row in rows}) > 1
    labels = [row_label(row, many) for row in rows]
    label_width = max((len(label) for label in labels), default=0)
    cells = len(rows[0].types) if rows else 0
    header = f"{fmt_us(start_us)}–{fmt_us(end_us)} µs · {fmt_us((end_us - start_us) / max(cells, 1))} µs/cell"
    lines = [header[:width]]
    for row, label in zip(rows, labels, strict=True):
        scale = counter_scale(row) if row.spec.kind == COUNTER else None
        glyphs = "".join(cell_glyph(row, cell, scale) for cell in range(len(row.types)))
        lines.append(f"{label:<{label_width}} {glyphs}"[:width])
    return lines


def label_width(traces: TraceSet, ranks: list[int], options: TimelineOptions) -> int:
    """Width of the widest row label (so cells = width − label width − 1)."""
    many = len(ranks) > 1
    widest = 0
    for rank in ranks:
        index = build_index(traces, rank, options.rules)
        for row in visible_rows(traces, index, options):
            spec = index.rows[row]
            widest = max(widest, len(f"r{spec.rank} {spec.label}" if many else spec.label))
    return widest


def render(
    traces: TraceSet,
    ranks: list[int],
    start_us: float,
    end_us: float,
    width: int,
    options: TimelineOptions | None = None,
) -> list[str]:
    """The timeline of `ranks` over [start_us, end_us) as text lines no wider than `width`."""
    chosen = options or TimelineOptions()
    labels = label_width(traces, ranks, chosen)
    cells = width - labels - 1
    if cells < 1:
        raise TimelineError(f"--width {width} is too narrow: the labels need {labels + 2} columns")
    rows = bin_window(traces, ranks, start_us, end_us, cells, chosen)
    return render_text(rows, start_us, end_us, width)


def legend_entries() -> list[tuple[str, str]]:
    """(glyph, meaning) for every mark a timeline line can hold, type letters first."""
    entries = [(glyph, kind) for kind, glyph in GLYPHS.items()]
    return [
        *entries,
        ("a-z", "the same, under half the cell busy"),
        (STREAM_IDLE, "stream idle"),
        (f"{SPARK[0]}…{SPARK[-1]}", "counter (queue, bandwidth) against its largest value in the window"),
    ]


def legend(glyph_lines: list[str], width: int) -> list[str]:
    """What the marks in `glyph_lines` (the cells, labels cut off) mean, wrapped to `width`; only the marks used."""
    used = {glyph for line in glyph_lines for glyph in line}
    parts = []
    for glyph, meaning in legend_entries():
        if glyph == "a-z":
            if any(g.islower() for g in used):
                parts.append(f"lower case {meaning}")
        elif glyph.startswith(SPARK[0]):
            if used & set(SPARK):
                parts.append(f"{glyph} {meaning}")
        elif glyph in used or glyph.lower() in used and glyph.isalpha():
            parts.append(f"{glyph} {meaning}")
    if not parts:
        return []
    return textwrap.wrap("legend: " + ", ".join(parts), max(width, 20), break_on_hyphens=False)


def details_lines(details: EventDetails) -> list[str]:
    """What the cursor shows about an event, one line each."""
    on_stream = details.stream is not None and not details.row.startswith(STREAM)
    stream = f" · stream {details.stream}" if on_stream else ""
    out = [
        details.name,
        f"start {fmt_us(details.start_us)} µs · dur {fmt_us(details.dur_us)} µs · "
        f"end {fmt_us(details.start_us + details.dur_us)} µs",
        f"{details.row}{stream} · correlation {details.correlation if details.correlation is not None else '–'}",
    ]
    if details.launch is not None:
        out.append(f"launched by {details.launch}" + (f" in {details.op}" if details.op else ""))
    if details.kernel_count:
        more = (
            f" (+{details.kernel_count - len(details.kernels)} more)"
            if details.kernel_count > len(details.kernels)
            else ""
        )
        out.append(f"kernels: {', '.join(details.kernels)}{more}")
    return out
