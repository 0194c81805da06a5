"""`htatui timeline` (the timeline as text) and `htatui export slice` (a window as a Chrome trace)."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htatui.cli.errors import fail

DEFAULT_WIDTH = 120


def _row_kinds(text: str) -> tuple[str, ...]:
    from htatui.analysis.timeline.index import ROW_KINDS

    kinds = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [k for k in kinds if k not in ROW_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"--rows: choose from {', '.join(ROW_KINDS)}, got {text!r}")
    return kinds


def add_timeline_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    from htatui.text.timeline import legend_entries

    marks = "\n".join(f"  {glyph:<5} {meaning}" for glyph, meaning in legend_entries())
    parser = sub.add_parser(
        "timeline",
        help="print a rank's timeline over a time window as text",
        description="One line per thread (CPU nesting levels below it), stream and counter; one mark per "
        "cell of time. A legend of the marks used follows the lines.",
        epilog=f"marks:\n{marks}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    load_flags(parser)
    parser.add_argument("--rank", default=None, help="rank(s) to draw: e.g. 0, 0,1 or all (default: the first)")
    parser.add_argument("--start", type=float, default=None, help="window start, µs (default: first event)")
    parser.add_argument("--end", type=float, default=None, help="window end, µs (default: last event)")
    parser.add_argument("--width", type=int, default=None, help="line width in characters (default: terminal)")
    parser.add_argument(
        "--rows", type=_row_kinds, default=None, help="row kinds: threads,streams,queue,membw (default threads,streams)"
    )
    parser.add_argument("--depth", type=int, default=2, help="CPU nesting rows per thread (default 2)")
    parser.set_defaults(run=lambda args: run_timeline(args, load))


def run_timeline(args: argparse.Namespace, load: Callable[[list[Path], bool], Any]) -> int:
    from htatui.analysis.timeline import index as timeline
    from htatui.cli.args import parse_ranks, rules_from_args
    from htatui.text import timeline as timeline_text
    from htatui.trace import LoadError

    width = args.width if args.width is not None else shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    if width < 1:
        return fail(f"--width must be positive, got {width}")
    if args.depth < 0:
        return fail(f"--depth must be 0 or more, got {args.depth}")
    try:
        ranks = parse_ranks(args.rank)
    except argparse.ArgumentTypeError as exc:
        return fail(str(exc).replace("--ranks", "--rank"))
    try:
        traces = load(list(args.paths), not args.no_cache)
    except LoadError as exc:
        return fail(str(exc))
    if args.rank is None:
        chosen = traces.rank_ids[:1]
    else:
        chosen = list(ranks) if ranks is not None else traces.rank_ids
    missing = [r for r in chosen if r not in traces.ranks]
    if missing:
        return fail(f"rank {missing[0]} is not in the traces (ranks: {', '.join(map(str, traces.rank_ids))})")
    if not chosen:
        return fail("no rank loaded")
    options = timeline.TimelineOptions(
        max_depth=args.depth, rows=args.rows or timeline.DEFAULT_ROWS, rules=rules_from_args(args)
    )
    try:
        indexes = [timeline.build_index(traces, r, options.rules) for r in chosen]
        start = args.start if args.start is not None else min(i.first_us for i in indexes)
        end = args.end if args.end is not None else max(i.last_us for i in indexes)
        lines = timeline_text.render(traces, chosen, start, end, width, options)
    except timeline.TimelineError as exc:
        return fail(str(exc))
    cells_from = timeline_text.label_width(traces, chosen, options) + 1
    key = timeline_text.legend([line[cells_from:] for line in lines[1:]], width)
    sys.stdout.write("\n".join([*lines, *([""] + key if key else [])]) + "\n")
    return 0


def add_slice_command(
    kinds: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    parser = kinds.add_parser("slice", help="write the events of a time window as a trimmed Chrome trace")
    load_flags(parser)
    parser.add_argument("--start", type=float, required=True, help="window start, µs (the views' time base)")
    parser.add_argument("--end", type=float, required=True, help="window end, µs")
    parser.add_argument("--ranks", default="all", help="ranks to include: all (default) or e.g. 0,3")
    parser.add_argument("-o", "--out", type=Path, required=True, help="output file (.json, or .json.gz for gzip)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    parser.set_defaults(run=lambda args: run_slice(args, load))


def run_slice(args: argparse.Namespace, load: Callable[[list[Path], bool], Any]) -> int:
    from htatui.analysis.export.slice import export_slice
    from htatui.analysis.export.traces import ExportError, ExportExistsError
    from htatui.cli.args import parse_ranks
    from htatui.trace import LoadError

    try:
        ranks = parse_ranks(args.ranks)
    except argparse.ArgumentTypeError as exc:
        return fail(str(exc))
    try:
        traces = load(list(args.paths), not args.no_cache)
    except LoadError as exc:
        return fail(str(exc))
    try:
        path, count = export_slice(
            traces, list(ranks) if ranks is not None else None, args.start, args.end, args.out, force=args.force
        )
    except ExportExistsError as exc:
        return fail(f"{exc} (pass --force to overwrite)")
    except ExportError as exc:
        return fail(str(exc))
    print(path)
    print(f"htatui: wrote {count} events", file=sys.stderr)
    return 0
