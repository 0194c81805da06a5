"""`htatui report --view VIEW` and `htatui export …`: the views' CLI faces.

Views and their tables come from the registry (htatui/analysis/views.py); an option field becomes
a flag when OPTION_FLAGS names it (its default is read from the options class), and a flag given
to a view without that field is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from htatui.analysis.views import BY_ID, VIEWS, View, frame_of
from htatui.report import render_frame


@dataclass(frozen=True)
class OptionFlag:
    flag: str
    field: str
    kind: Callable[[str], Any]
    help: str


def _int_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


OPTION_FLAGS: list[OptionFlag] = [
    OptionFlag(
        "--consecutive-kernel-delay", "consecutive_kernel_delay_us", float, "idle: kernel_wait threshold, µs"
    ),
    OptionFlag("--streams", "streams", _int_tuple, "idle: only these streams, e.g. 7,20"),
    OptionFlag("--top", "top_k", int, "kernels/kernel-spread/patterns/ops: how many names (ops: per rank) to keep"),
    OptionFlag("--duration-ratio", "duration_ratio", float, "kernels: HTA's cumulative-time quantile"),
    OptionFlag("--runtime-cutoff", "runtime_cutoff_us", float, "launch: runtime outlier cutoff, µs"),
    OptionFlag("--launch-delay-cutoff", "launch_delay_cutoff_us", float, "launch: delay outlier cutoff, µs"),
    OptionFlag("--max-queue-length", "max_queue_length", int, "queue: length counted as full"),
    OptionFlag("--operator", "operator", str, "patterns: operator name to look under"),
    OptionFlag("--min-len", "min_len", int, "patterns: minimum kernels under the operator"),
    OptionFlag("--rank", "rank", int, "patterns: the rank to mine (default: the first rank)"),
    OptionFlag("--sort-by", "sort_by", str, "ops: column to sort by, descending"),
    OptionFlag("--kinds", "kinds", str, "ops: host (default), all, or e.g. op,annotation,kernel"),
    OptionFlag("--group-by", "group_by", str, "ops: name (default) or shape (needs record_shapes)"),
    OptionFlag("--flops", "flops", bool, "ops: add flops, TFLOP/s and GB/s columns"),
    OptionFlag("--num-candidates", "num_candidates", int, "stragglers: how many ranks to name"),
]


def _defaults(field_name: str) -> str:
    """'(30)' or '(kernels 10, patterns 5)': the option's defaults, read from the options classes."""
    found: dict[str, str] = {}
    for view in VIEWS:
        for option in dataclasses.fields(view.options):
            if option.name == field_name and option.default not in (dataclasses.MISSING, None):
                found.setdefault(repr(option.default).strip("'"), view.id)
    if not found:
        return ""
    if len(found) == 1:
        return f" ({next(iter(found))})"
    return " (" + ", ".join(f"{view_id} {value}" for value, view_id in found.items()) + ")"


def add_report_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    format_flag: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    report = sub.add_parser("report", help="print one analysis view as a table, CSV or JSON")
    load_flags(report)
    format_flag(report)
    report.add_argument("--view", required=True, choices=sorted(BY_ID), help="which view to print")
    report.add_argument("--ranks", default="all", help="ranks to analyse: all (default) or e.g. 0,3")
    report.add_argument("--hta-compat", action="store_true", help="reproduce HTA 0.6.1's numbers and quirks")
    report.add_argument("--include-last-step", action="store_true", help="keep the last ProfilerStep")
    tables = sorted({table.name for view in VIEWS for table in view.tables[1:]})
    for flag in tables:
        report.add_argument(f"--{flag}", action="store_true", help=f"print the {flag} table of the view")
    for option in OPTION_FLAGS:
        if option.kind is bool:  # a switch: present = True
            report.add_argument(option.flag, dest=option.field, action="store_const", const=True, help=option.help)
            continue
        help_text = option.help + _defaults(option.field)
        report.add_argument(option.flag, dest=option.field, type=option.kind, default=None, help=help_text)
    report.set_defaults(run=lambda args: run_report(args, load))


def run_report(args: argparse.Namespace, load: Callable[[list[Path], bool], Any]) -> int:
    from htatui.cli_args import parse_ranks
    from htatui.trace import LoadError

    view: View[Any] = BY_ID[args.view]
    own = {table.name for table in view.tables[1:]}
    chosen = [name for name in own if getattr(args, name.replace("-", "_"), False)]
    other_tables = sorted(
        {table.name for v in VIEWS for table in v.tables[1:]} - own - {"main"},
    )
    other_tables = [name for name in other_tables if getattr(args, name.replace("-", "_"), False)]
    if other_tables:
        print(f"htatui: --{other_tables[0]} does not apply to --view {args.view}", file=sys.stderr)
        return 2
    options_class = view.options
    names = {f.name for f in dataclasses.fields(options_class)}
    values: dict[str, Any] = {}
    for option in OPTION_FLAGS:
        value = getattr(args, option.field, None)
        if value is None:
            continue
        if option.field not in names:
            print(f"htatui: {option.flag} does not apply to --view {args.view}", file=sys.stderr)
            return 2
        values[option.field] = value
    try:
        ranks = parse_ranks(args.ranks)
    except argparse.ArgumentTypeError as exc:
        print(f"htatui: {exc}", file=sys.stderr)
        return 2
    try:
        traces = load(list(args.paths), not args.no_cache)
    except LoadError as exc:
        print(f"htatui: {exc}", file=sys.stderr)
        return 2
    if ranks is not None:
        missing = [r for r in ranks if r not in traces.ranks]
        if missing:
            have = ", ".join(map(str, traces.rank_ids))
            print(f"htatui: rank {missing[0]} is not in the traces (ranks: {have})", file=sys.stderr)
            return 2
    options = options_class(ranks=ranks, hta_compat=args.hta_compat, include_last_step=args.include_last_step, **values)
    table = view.table(chosen[0]) if chosen else view.main
    try:
        result = table.compute(traces, options)
    except ValueError as exc:  # an option value the view refuses (e.g. an unknown column)
        print(f"htatui: --view {args.view}: {exc}", file=sys.stderr)
        return 2
    frame, message = frame_of(result)
    if message:
        print(f"htatui: {message}", file=sys.stderr)
    title = f"{args.view}{' ' + chosen[0] if chosen else ''}"
    render_frame(frame, args.format, title=title)
    return 0


def add_export_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    """`export counters` / `export patterns` are registered by htatui.analysis.export's CLI face."""
    try:
        from htatui.export_cli import add_export_commands
    except ImportError:
        return
    add_export_commands(sub, load_flags, load)
